#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A call that stopped because it needs what only the user can give (a password, a yes): storage finds it with
/// ``AccessEvaluator``, the service layer's ``Asker`` obtains it and runs the call again with the new grant. Storage
/// itself never asks anyone.
public struct PendingAccess: Sendable, Hashable {
    public var requirement: AccessRequirement
    /// The item concerned; nil for the keychain itself, or for an item being added.
    public var item: UUID?
    /// What the question calls the item: its label, else its service or server.
    public var itemName: String
    /// What the call does with the item (the question says it).
    public var operation: ItemOperation?
    /// An earlier answer was wrong (an application password that did not open the item).
    public var retry: Bool

    public init(_ requirement: AccessRequirement, item: UUID? = nil, itemName: String = "",
                operation: ItemOperation? = nil, retry: Bool = false) {
        self.requirement = requirement
        self.item = item
        self.itemName = itemName
        self.operation = operation
        self.retry = retry
    }
}

extension KeychainError {
    /// The error a call stops with when it needs `pending`: errSecInteractionNotAllowed, which is exactly what a
    /// caller gets where nobody can be asked.
    public static func needs(_ pending: PendingAccess, fileID: StaticString = #fileID, line: UInt = #line) -> Self {
        var error = Self(.interactionNotAllowed, AccessEvaluator.reason(pending.requirement), fileID: fileID, line: line)
        error.pending = pending
        return error
    }
}

extension Item {
    /// What a question about the item calls it: its label, else its service, else its server.
    public var displayName: String {
        attributes["labl"]?.stringValue ?? attributes["svce"]?.stringValue ?? attributes["srvr"]?.stringValue ?? ""
    }
}
