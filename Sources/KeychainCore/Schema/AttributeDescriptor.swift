#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One attribute of an item class: its 4-character code, kind, and whether it is part of the uniqueness key.
public struct AttributeDescriptor: Sendable, Hashable {
    public let code: String
    public let kind: AttributeKind
    public let isPrimaryKey: Bool
    /// False for internal attributes that `kSecReturnAttributes` leaves out (`musr`, `tomb`).
    public let isReturned: Bool

    init(_ code: String, _ kind: AttributeKind, primaryKey: Bool = false, returned: Bool = true) {
        self.code = code
        self.kind = kind
        self.isPrimaryKey = primaryKey
        self.isReturned = returned
    }
}
