#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How an attribute's value is coerced on input and compared (semantics §1.2).
public enum AttributeKind: Sendable, Hashable {
    /// String, data or number, kept as given; compared by bytes.
    case blob
    /// Always data; strings become their UTF-8 bytes.
    case data
    /// Always a string; data is decoded as UTF-8.
    case string
    /// An integer; canonical decimal strings become numbers, other strings stay strings.
    case number
    /// A date; nothing else is accepted.
    case date
    /// An accessibility code (`pdmn`).
    case access
    /// A `SecAccessControl` (`accc`).
    case accessControl
    /// The synchronizable flag, stored 0 or 1.
    case sync
    /// Empty data or a 16-byte UUID (`musr`).
    case uuid
    /// Exactly 20 bytes (`sha1`).
    case sha1

    /// The value an absent primary-key attribute counts as (semantics §2.2).
    public var defaultValue: AttributeValue {
        switch self {
        case .blob, .string, .access: .string("")
        case .data, .uuid, .sha1, .accessControl: .data(.init())
        case .number, .sync: .number(0)
        case .date: .date(0)
        }
    }
}
