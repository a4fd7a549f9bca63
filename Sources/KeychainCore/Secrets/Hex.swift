/// Fixed-width hexadecimal and octal digits without Foundation's `String(format:)` (the client side links only
/// FoundationEssentials, which has no printf formatting).
public enum Hex {
    /// Two hexadecimal digits.
    public static func byte(_ value: UInt8, uppercase: Bool = false) -> String {
        padded(String(value, radix: 16, uppercase: uppercase), to: 2)
    }

    /// Hexadecimal digits of every byte, two each.
    /// Written into one buffer (a digest's hex is made for every client keychaind serves).
    public static func string(_ bytes: some Sequence<UInt8>, uppercase: Bool = false) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        append(bytes, uppercase: uppercase, to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// The digits of ``string(_:uppercase:)`` appended to `text` as UTF-8.
    public static func append(_ bytes: some Sequence<UInt8>, uppercase: Bool = false, to text: inout [UInt8]) {
        let inMemory: Void? = bytes.withContiguousStorageIfAvailable {
            append(UnsafeRawBufferPointer($0), uppercase: uppercase, to: &text)
        }
        if inMemory == nil { appendDigits(of: bytes, uppercase: uppercase, to: &text) }
    }

    /// ``append(_:uppercase:to:)`` for bytes in memory: not generic, so it is compiled for callers in other modules
    /// (a generic one runs there unspecialized, through witness tables, byte by byte).
    public static func append(_ bytes: UnsafeRawBufferPointer, uppercase: Bool = false, to text: inout [UInt8]) {
        appendDigits(of: bytes, uppercase: uppercase, to: &text)
    }

    private static func appendDigits(of bytes: some Sequence<UInt8>, uppercase: Bool, to text: inout [UInt8]) {
        let digits: StaticString = uppercase ? "0123456789ABCDEF" : "0123456789abcdef"
        digits.withUTF8Buffer { digit in
            for byte in bytes {
                text.append(digit[Int(byte >> 4)])
                text.append(digit[Int(byte & 0x0f)])
            }
        }
    }

    /// Eight hexadecimal digits of a 32-bit value.
    public static func word(_ value: UInt32, uppercase: Bool = false) -> String {
        padded(String(value, radix: 16, uppercase: uppercase), to: 8)
    }

    /// The bytes that pairs of hexadecimal digits (either case) spell; nil for anything else.
    public static func bytes(_ text: some StringProtocol) -> [UInt8]? {
        guard text.count % 2 == 0, text.allSatisfy(\.isHexDigit) else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(text.count / 2)
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }

    /// Three octal digits, as C's `\ooo` escapes.
    public static func octal(_ value: UInt8) -> String { padded(String(value, radix: 8), to: 3) }

    /// `text` with zeros in front up to `width` characters.
    public static func padded(_ text: String, to width: Int) -> String {
        String(repeating: "0", count: max(0, width - text.count)) + text
    }
}
