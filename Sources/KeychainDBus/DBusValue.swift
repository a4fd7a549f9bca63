/// One D-Bus value with its type. Containers carry their element signatures so that empty arrays keep a type.
public indirect enum DBusValue: Sendable, Hashable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// An index into the message's file descriptors (``DBusMessage/fileDescriptors``).
    case unixFD(UInt32)
    /// An array of `elementSignature` values (`ay` bytes are an array of `.byte`).
    case array(elementSignature: String, [DBusValue])
    /// `a{kv}`: an array of dictionary entries.
    case dictionary(keySignature: String, valueSignature: String, [DictionaryEntry])
    case structure([DBusValue])
    case variant(DBusValue)

    public struct DictionaryEntry: Sendable, Hashable {
        public var key: DBusValue
        public var value: DBusValue
        public init(_ key: DBusValue, _ value: DBusValue) {
            self.key = key
            self.value = value
        }
    }

    /// The value's complete type signature.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .unixFD: "h"
        case .array(let element, _): "a" + element
        case .dictionary(let key, let value, _): "a{" + key + value + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .variant: "v"
        }
    }

    // MARK: - Conveniences for the common shapes

    /// `ay` from bytes.
    public static func bytes(_ bytes: some Sequence<UInt8>) -> DBusValue {
        .array(elementSignature: "y", bytes.map { .byte($0) })
    }

    /// `a{ss}` from a Swift dictionary, sorted by key so that the encoding is stable.
    public static func stringDictionary(_ pairs: [String: String]) -> DBusValue {
        .dictionary(keySignature: "s", valueSignature: "s",
                    pairs.sorted { $0.key < $1.key }.map { DictionaryEntry(.string($0.key), .string($0.value)) })
    }

    public var stringValue: String? {
        switch self {
        case .string(let s), .objectPath(let s), .signature(let s): s
        case .variant(let inner): inner.stringValue
        default: nil
        }
    }

    public var uint32Value: UInt32? {
        if case .uint32(let n) = self { return n }
        if case .variant(let inner) = self { return inner.uint32Value }
        return nil
    }

    public var boolValue: Bool? {
        if case .boolean(let b) = self { return b }
        if case .variant(let inner) = self { return inner.boolValue }
        return nil
    }

    /// The bytes of an `ay`.
    public var byteArray: [UInt8]? {
        guard case .array("y", let elements) = self else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(elements.count)
        for element in elements {
            guard case .byte(let b) = element else { return nil }
            out.append(b)
        }
        return out
    }

    /// The elements of an array (`a…`), or the values of a variant holding one.
    public var arrayElements: [DBusValue]? {
        switch self {
        case .array(_, let elements): elements
        case .variant(let inner): inner.arrayElements
        default: nil
        }
    }

    /// The entries of an `a{..}`.
    public var dictionaryEntries: [DictionaryEntry]? {
        switch self {
        case .dictionary(_, _, let entries): entries
        case .variant(let inner): inner.dictionaryEntries
        default: nil
        }
    }

    /// An `a{ss}` as a Swift dictionary (later duplicates win).
    public var stringDictionaryValue: [String: String]? {
        guard let entries = dictionaryEntries else { return nil }
        var out: [String: String] = [:]
        for entry in entries {
            guard let key = entry.key.stringValue, case .string(let value) = entry.value else { return nil }
            out[key] = value
        }
        return out
    }
}

/// Object paths (`/`, or `/` then elements of [A-Za-z0-9_] separated by single slashes) and member, interface and
/// bus names, as the specification defines them.
public enum DBusNames {
    public static func isValidObjectPath(_ path: String) -> Bool {
        let bytes = Array(path.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        guard bytes.last != UInt8(ascii: "/") else { return false }
        var previousSlash = false
        for byte in bytes.dropFirst() {
            if byte == UInt8(ascii: "/") {
                if previousSlash { return false }
                previousSlash = true
            } else {
                guard isPathCharacter(byte) else { return false }
                previousSlash = false
            }
        }
        return !previousSlash
    }

    static func isPathCharacter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
    }

    /// A member (method or signal) name: 1–255 of [A-Za-z0-9_], not starting with a digit.
    public static func isValidMember(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...255).contains(bytes.count), !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[0]) else { return false }
        return bytes.allSatisfy(isPathCharacter)
    }

    /// An interface or error name: two or more elements of member characters separated by dots.
    public static func isValidInterface(_ name: String) -> Bool {
        guard name.utf8.count <= 255 else { return false }
        let elements = name.split(separator: ".", omittingEmptySubsequences: false)
        return elements.count >= 2 && elements.allSatisfy { isValidMember(String($0)) }
    }

    /// A bus name: unique (`:1.42`) or well-known (`org.freedesktop.secrets`); elements may hold `-`.
    public static func isValidBusName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...255).contains(bytes.count) else { return false }
        let unique = bytes[0] == UInt8(ascii: ":")
        let elements = (unique ? name.dropFirst() : Substring(name)).split(separator: ".", omittingEmptySubsequences: false)
        guard elements.count >= 2 else { return false }
        for element in elements {
            guard let first = element.utf8.first else { return false }
            if !unique, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) { return false }
            guard element.utf8.allSatisfy({ isPathCharacter($0) || $0 == UInt8(ascii: "-") }) else { return false }
        }
        return true
    }
}
