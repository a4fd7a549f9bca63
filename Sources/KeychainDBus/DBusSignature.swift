/// D-Bus type signatures (the specification's "Type System"): validated before any value is read with them.
public enum DBusSignature {
    public static let maximumLength = 255
    /// The specification's limits: 32 nested arrays and 32 nested structures.
    public static let maximumArrayDepth = 32
    public static let maximumStructDepth = 32

    public struct Invalid: Error, Sendable, Equatable {
        public let reason: String
    }

    /// Splits a signature into its complete types ("a{sv}s" → ["a{sv}", "s"]); throws when it is not valid.
    public static func completeTypes(_ signature: String) throws(Invalid) -> [String] {
        let bytes = Array(signature.utf8)
        guard bytes.count <= maximumLength else { throw Invalid(reason: "signature longer than 255") }
        var types: [String] = []
        var index = 0
        while index < bytes.count {
            let end = try completeTypeEnd(bytes, from: index, arrays: 0, structs: 0)
            types.append(String(decoding: bytes[index..<end], as: UTF8.self))
            index = end
        }
        return types
    }

    /// Whether `signature` is exactly one complete type (a variant's signature).
    public static func isSingleCompleteType(_ signature: String) -> Bool {
        (try? completeTypes(signature))?.count == 1
    }

    static let basicCodes: Set<UInt8> = Set("ybnqiuxtdsoghv".utf8).subtracting([UInt8(ascii: "v")])

    /// The index just past the complete type starting at `start`.
    static func completeTypeEnd(_ bytes: [UInt8], from start: Int, arrays: Int, structs: Int)
        throws(Invalid) -> Int
    {
        guard start < bytes.count else { throw Invalid(reason: "incomplete type") }
        switch bytes[start] {
        case UInt8(ascii: "y"), UInt8(ascii: "b"), UInt8(ascii: "n"), UInt8(ascii: "q"), UInt8(ascii: "i"),
             UInt8(ascii: "u"), UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "s"),
             UInt8(ascii: "o"), UInt8(ascii: "g"), UInt8(ascii: "h"), UInt8(ascii: "v"):
            return start + 1
        case UInt8(ascii: "a"):
            guard arrays < maximumArrayDepth else { throw Invalid(reason: "arrays nested too deeply") }
            if start + 1 < bytes.count, bytes[start + 1] == UInt8(ascii: "{") {
                // DICT_ENTRY: a basic key and one complete value type, only as an array's element.
                guard structs < maximumStructDepth else { throw Invalid(reason: "structures nested too deeply") }
                let keyIndex = start + 2
                guard keyIndex < bytes.count, basicCodes.contains(bytes[keyIndex]) else {
                    throw Invalid(reason: "a dictionary key must be a basic type")
                }
                let valueEnd = try completeTypeEnd(bytes, from: keyIndex + 1, arrays: arrays + 1, structs: structs + 1)
                guard valueEnd < bytes.count, bytes[valueEnd] == UInt8(ascii: "}") else {
                    throw Invalid(reason: "a dictionary entry holds one key and one value")
                }
                return valueEnd + 1
            }
            return try completeTypeEnd(bytes, from: start + 1, arrays: arrays + 1, structs: structs)
        case UInt8(ascii: "("):
            guard structs < maximumStructDepth else { throw Invalid(reason: "structures nested too deeply") }
            var index = start + 1
            guard index < bytes.count, bytes[index] != UInt8(ascii: ")") else { throw Invalid(reason: "empty structure") }
            while index < bytes.count, bytes[index] != UInt8(ascii: ")") {
                index = try completeTypeEnd(bytes, from: index, arrays: arrays, structs: structs + 1)
            }
            guard index < bytes.count else { throw Invalid(reason: "unclosed structure") }
            return index + 1
        default:
            throw Invalid(reason: "unknown type code")
        }
    }
}
