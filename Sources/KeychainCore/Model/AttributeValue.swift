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

    /// Whether `self` and `other` have the same ``matchKey(for:)``, for strings and data without making either key
    /// (a search compares every candidate's attributes with the query's this way).
    public func hasSameMatchKey(as other: AttributeValue, for kind: AttributeKind) -> Bool {
        switch (self, other) {
        case (.string(let a), .string(let b)):
            return a.utf8.elementsEqual(b.utf8)  // bytes, not Unicode equivalence
        case (.data(let a), .data(let b)):
            return a == b
        case (.string(let s), .data(let d)), (.data(let d), .string(let s)):
            switch kind {
            case .blob, .data, .uuid, .sha1: return s.utf8.elementsEqual(d)
            default: return false  // a string's key is tagged as a string there, data's as data
            }
        default:
            return matchKey(for: kind) == other.matchKey(for: kind)
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
