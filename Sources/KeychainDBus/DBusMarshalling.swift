/// The D-Bus wire format (the specification's "Marshaling"): values aligned to their size relative to the start of
/// the message, in the byte order the message names. We write little-endian; we read both.
public struct DBusWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    mutating func pad(to alignment: Int) {
        while bytes.count % alignment != 0 { bytes.append(0) }
    }

    mutating func integer<T: FixedWidthInteger>(_ value: T) {
        pad(to: MemoryLayout<T>.size)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func string(_ value: String) {
        integer(UInt32(value.utf8.count))
        bytes.append(contentsOf: value.utf8)
        bytes.append(0)
    }

    mutating func signature(_ value: String) {
        bytes.append(UInt8(value.utf8.count))
        bytes.append(contentsOf: value.utf8)
        bytes.append(0)
    }

    /// Writes `value`; the caller has checked that its signature is valid (DBusMessage does).
    public mutating func write(_ value: DBusValue) {
        switch value {
        case .byte(let v): bytes.append(v)
        case .boolean(let v): integer(UInt32(v ? 1 : 0))
        case .int16(let v): integer(v)
        case .uint16(let v): integer(v)
        case .int32(let v): integer(v)
        case .uint32(let v): integer(v)
        case .int64(let v): integer(v)
        case .uint64(let v): integer(v)
        case .double(let v): integer(v.bitPattern)
        case .string(let v), .objectPath(let v): string(v)
        case .signature(let v): signature(v)
        case .unixFD(let v): integer(v)
        case .array(let element, let elements):
            writeArray(alignment: DBusReader.alignment(of: element.utf8.first ?? 0)) { writer in
                for element in elements { writer.write(element) }
            }
        case .dictionary(_, _, let entries):
            writeArray(alignment: 8) { writer in
                for entry in entries {
                    writer.pad(to: 8)
                    writer.write(entry.key)
                    writer.write(entry.value)
                }
            }
        case .structure(let fields):
            pad(to: 8)
            for field in fields { write(field) }
        case .variant(let inner):
            signature(inner.signature)
            write(inner)
        }
    }

    /// An array: its byte length (not counting the padding before the first element), then the elements.
    private mutating func writeArray(alignment: Int, _ elements: (inout DBusWriter) -> Void) {
        integer(UInt32(0))
        let lengthOffset = bytes.count - 4
        pad(to: alignment)
        let start = bytes.count
        elements(&self)
        let length = UInt32(bytes.count - start)
        withUnsafeBytes(of: length.littleEndian) { raw in
            for (i, byte) in raw.enumerated() { bytes[lengthOffset + i] = byte }
        }
    }
}

/// Reads values of known signatures from a message's bytes, checking everything the specification requires:
/// alignment padding is zero, booleans are 0 or 1, strings are UTF-8 without NUL and NUL-terminated, object paths and
/// signatures are valid, arrays fit and their elements fill them exactly, nesting stays within the limits.
public struct DBusReader {
    public struct Malformed: Error, Sendable, Equatable {
        public let reason: String
    }

    /// The specification's largest array (64 MiB).
    public static let maximumArrayLength = 1 << 26
    /// Variants can nest without a signature saying so; the specification caps total nesting at 64.
    static let maximumDepth = 64

    let bytes: [UInt8]
    let bigEndian: Bool
    public private(set) var offset: Int
    /// Where the message starts in `bytes`: alignment is counted from there.
    let origin: Int
    let end: Int

    public init(_ bytes: [UInt8], bigEndian: Bool, offset: Int = 0, origin: Int = 0, end: Int? = nil) {
        self.bytes = bytes
        self.bigEndian = bigEndian
        self.offset = offset
        self.origin = origin
        self.end = end ?? bytes.count
    }

    public var atEnd: Bool { offset == end }

    static func alignment(of code: UInt8) -> Int {
        switch code {
        case UInt8(ascii: "y"), UInt8(ascii: "g"), UInt8(ascii: "v"): 1
        case UInt8(ascii: "n"), UInt8(ascii: "q"): 2
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "("), UInt8(ascii: "{"): 8
        default: 4  // b i u s o h a
        }
    }

    mutating func align(_ alignment: Int) throws(Malformed) {
        while (offset - origin) % alignment != 0 {
            guard offset < end else { throw Malformed(reason: "truncated") }
            guard bytes[offset] == 0 else { throw Malformed(reason: "non-zero padding") }
            offset += 1
        }
    }

    mutating func take(_ count: Int) throws(Malformed) -> ArraySlice<UInt8> {
        guard count >= 0, count <= end - offset else { throw Malformed(reason: "truncated") }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(Malformed) -> T {
        try align(MemoryLayout<T>.size)
        let raw = try take(MemoryLayout<T>.size)
        var value: T = 0
        if bigEndian {
            for byte in raw { value = value << 8 | T(byte) }
        } else {
            for byte in raw.reversed() { value = value << 8 | T(byte) }
        }
        return value
    }

    mutating func string() throws(Malformed) -> String {
        let length = Int(try integer(UInt32.self))
        return try terminatedText(length)
    }

    mutating func signatureText() throws(Malformed) -> String {
        let length = Int(try take(1).first!)
        let text = try terminatedText(length)
        do { _ = try DBusSignature.completeTypes(text) } catch { throw Malformed(reason: "invalid signature") }
        return text
    }

    private mutating func terminatedText(_ length: Int) throws(Malformed) -> String {
        let raw = try take(length)
        guard try take(1).first == 0 else { throw Malformed(reason: "string not NUL-terminated") }
        guard !raw.contains(0), let text = String(validating: raw, as: UTF8.self) else {
            throw Malformed(reason: "string is not valid UTF-8")
        }
        return text
    }

    /// Reads one value of the complete type `signature`.
    public mutating func read(_ signature: String) throws(Malformed) -> DBusValue {
        try read(Array(signature.utf8)[...], depth: 0)
    }

    mutating func read(_ signature: ArraySlice<UInt8>, depth: Int) throws(Malformed) -> DBusValue {
        guard depth <= Self.maximumDepth else { throw Malformed(reason: "nested too deeply") }
        guard let code = signature.first else { throw Malformed(reason: "empty signature") }
        switch code {
        case UInt8(ascii: "y"): return .byte(try take(1).first!)
        case UInt8(ascii: "b"):
            switch try integer(UInt32.self) {
            case 0: return .boolean(false)
            case 1: return .boolean(true)
            default: throw Malformed(reason: "boolean other than 0 or 1")
            }
        case UInt8(ascii: "n"): return .int16(try integer(Int16.self))
        case UInt8(ascii: "q"): return .uint16(try integer(UInt16.self))
        case UInt8(ascii: "i"): return .int32(try integer(Int32.self))
        case UInt8(ascii: "u"): return .uint32(try integer(UInt32.self))
        case UInt8(ascii: "x"): return .int64(try integer(Int64.self))
        case UInt8(ascii: "t"): return .uint64(try integer(UInt64.self))
        case UInt8(ascii: "d"): return .double(Double(bitPattern: try integer(UInt64.self)))
        case UInt8(ascii: "h"): return .unixFD(try integer(UInt32.self))
        case UInt8(ascii: "s"): return .string(try string())
        case UInt8(ascii: "o"):
            let path = try string()
            guard DBusNames.isValidObjectPath(path) else { throw Malformed(reason: "invalid object path") }
            return .objectPath(path)
        case UInt8(ascii: "g"): return .signature(try signatureText())
        case UInt8(ascii: "v"):
            let inner = try signatureText()
            guard DBusSignature.isSingleCompleteType(inner) else { throw Malformed(reason: "variant of several types") }
            return .variant(try read(Array(inner.utf8)[...], depth: depth + 1))
        case UInt8(ascii: "a"):
            let length = Int(try integer(UInt32.self))
            guard length <= Self.maximumArrayLength else { throw Malformed(reason: "array too long") }
            let element = signature.dropFirst()
            guard let elementCode = element.first else { throw Malformed(reason: "array without element type") }
            try align(Self.alignment(of: elementCode))
            guard length <= end - offset else { throw Malformed(reason: "truncated") }
            let arrayEnd = offset + length
            if elementCode == UInt8(ascii: "{") {
                let inner = element.dropFirst().dropLast()
                let keyType = inner.prefix(1)
                let valueType = inner.dropFirst()
                var entries: [DBusValue.DictionaryEntry] = []
                while offset < arrayEnd {
                    try align(8)
                    let key = try read(keyType, depth: depth + 1)
                    let value = try read(valueType, depth: depth + 1)
                    entries.append(.init(key, value))
                }
                guard offset == arrayEnd else { throw Malformed(reason: "array length does not match its elements") }
                return .dictionary(keySignature: String(decoding: keyType, as: UTF8.self),
                                   valueSignature: String(decoding: valueType, as: UTF8.self), entries)
            }
            var elements: [DBusValue] = []
            if elementCode == UInt8(ascii: "y") {
                elements = try take(length).map { .byte($0) }
            } else {
                while offset < arrayEnd { elements.append(try read(element, depth: depth + 1)) }
            }
            guard offset == arrayEnd else { throw Malformed(reason: "array length does not match its elements") }
            return .array(elementSignature: String(decoding: element, as: UTF8.self), elements)
        case UInt8(ascii: "("):
            try align(8)
            var fields: [DBusValue] = []
            var rest = signature.dropFirst().dropLast()
            while !rest.isEmpty {
                let typeEnd: Int
                do {
                    typeEnd = try DBusSignature.completeTypeEnd(Array(rest), from: 0, arrays: 0, structs: 0)
                } catch {
                    throw Malformed(reason: "invalid structure signature")
                }
                fields.append(try read(rest.prefix(typeEnd), depth: depth + 1))
                rest = rest.dropFirst(typeEnd)
            }
            return .structure(fields)
        default:
            throw Malformed(reason: "unknown type code")
        }
    }
}
