#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

/// macOS `security`'s `print_buffer`: hex when any byte is non-printable, a quoted string when any is printable.
enum BufferPrinter {
    static func isPrintable(_ b: UInt8) -> Bool { b >= 0x20 && b <= 0x7e && b != 0x5c }

    static func format(_ bytes: [UInt8]) -> String {
        guard !bytes.isEmpty else { return "" }
        let anyNonPrintable = bytes.contains { !isPrintable($0) }
        let anyPrintable = bytes.contains { isPrintable($0) }
        var out = ""
        if anyNonPrintable {
            out += "0x" + Hex.string(bytes, uppercase: true)
            out += anyPrintable ? "  " : " "
        }
        if anyPrintable {
            out += "\""
            for b in bytes {
                if isPrintable(b) {
                    out.unicodeScalars.append(UnicodeScalar(b))
                } else {
                    out += "\\" + Hex.octal(b)
                }
            }
            out += "\""
        }
        return out
    }

    /// A 32-bit value as `security` prints it: its four big-endian bytes through the buffer printer.
    static func format(uint32 value: UInt32) -> String {
        format([UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)])
    }

    /// `-w` output: the raw password, or lowercase hex if any byte is not printable (isprint).
    static func passwordForW(_ bytes: [UInt8]) -> [UInt8] {
        if bytes.allSatisfy({ $0 >= 0x20 && $0 <= 0x7e }) { return bytes }
        return Array(Hex.string(bytes).utf8)
    }
}
