#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A stored attribute value, after Apple's input coercion (semantics §1.2).
///
/// Blob attributes keep the caller's choice of string, data or number; `matchKey` makes `"abc"` and
/// `<616263>` equal for matching and uniqueness, as Apple's SHA-1 columns do.
public enum AttributeValue: Hashable, Sendable {
    case string(String)
    case data(Data)
    case number(Int64)
    /// Seconds since 2001-01-01 00:00:00 UTC (Core Foundation's reference date).
    case date(Double)

    public static func date(_ date: Date) -> AttributeValue { .date(date.timeIntervalSinceReferenceDate) }

    public var stringValue: String? {
        switch self {
        case .string(let s): s
        case .data(let d): String(validating: d, as: UTF8.self)
        default: nil
        }
    }
    public var numberValue: Int64? { if case .number(let n) = self { n } else { nil } }
    public var dataValue: Data? {
        switch self {
        case .data(let d): d
        case .string(let s): Data(s.utf8)
        default: nil
        }
    }
    public var dateValue: Date? {
        if case .date(let t) = self { Date(timeIntervalSinceReferenceDate: t) } else { nil }
    }

    /// The bytes that decide equality for `kind`: blob and data compare by content whatever the Swift type.
    public func matchKey(for kind: AttributeKind) -> [UInt8] {
        switch kind {
        case .blob, .data, .uuid, .sha1:
            switch self {
            case .string(let s): return [0x62] + Array(s.utf8)
            case .data(let d): return [0x62] + Array(d)
            case .number(let n):
                // Apple hashes a CFNumber as its 4-byte host-order int32.
                let v = Int32(truncatingIfNeeded: n).littleEndian
                return [0x62] + withUnsafeBytes(of: v) { Array($0) }
            case .date(let t): return [0x64] + withUnsafeBytes(of: t.bitPattern.bigEndian) { Array($0) }
            }
        default:
            switch self {
            case .string(let s): return [0x73] + Array(s.utf8)
            case .data(let d): return [0x62] + Array(d)
            case .number(let n): return [0x6e] + withUnsafeBytes(of: n.bigEndian) { Array($0) }
            case .date(let t): return [0x64] + withUnsafeBytes(of: t.bitPattern.bigEndian) { Array($0) }
            }
        }
    }
}

extension AttributeValue: CustomStringConvertible {
    /// Redacted: attribute values are private data and stay out of logs.
    public var description: String {
        switch self {
        case .string(let s): "string(\(s.utf8.count) bytes)"
        case .data(let d): "data(\(d.count) bytes)"
        case .number: "number"
        case .date: "date"
        }
    }
}
