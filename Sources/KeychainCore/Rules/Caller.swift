#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Who is calling, as far as the keychain's rules care: the access groups it may use (semantics §3.2, §3.3).
///
/// The list order matters: the first group is where an add without `kSecAttrAccessGroup` lands.
public struct Caller: Sendable, Hashable {
    public var accessGroups: [String]
    /// The calling program as the kernel reports it (keychaind: the peer's executable and its digest); nil where
    /// it cannot be known for certain (embedded mode), and then trusted-application lists are not enforced.
    public var application: TrustedApplication?

    /// The group the token items live in; readable, never writable.
    public static let tokenGroup = "com.apple.token"
    /// A caller entitled to every group.
    public static let wildcardGroup = "*"

    public init(accessGroups: [String], application: TrustedApplication? = nil) {
        self.application = application
        // com.apple.token is always last (and never a default for writes).
        var groups = accessGroups.filter { $0 != Self.tokenGroup }
        if accessGroups.contains(Self.tokenGroup) { groups.append(Self.tokenGroup) }
        self.accessGroups = groups
    }

    public var hasWildcard: Bool { accessGroups.contains(Self.wildcardGroup) }

    /// The group an add goes to when it names none, or `errSecMissingEntitlement`.
    public func defaultGroup() throws(KeychainError) -> String {
        guard let first = accessGroups.first, first != Self.tokenGroup, first != Self.wildcardGroup else {
            throw KeychainError(.missingEntitlement, "the caller has no access group")
        }
        return first
    }

    public func checkReadable(_ group: String) throws(KeychainError) {
        if hasWildcard || accessGroups.contains(group) { return }
        throw KeychainError(.missingEntitlement, "access group not entitled")
    }

    public func checkWritable(_ group: String) throws(KeychainError) {
        if group == Self.tokenGroup { throw KeychainError(.missingEntitlement, "access group is read-only") }
        try checkReadable(group)
    }

    /// The groups a search may see (nil: any); update and delete never touch `com.apple.token`.
    public func visibleGroups(for operation: Operation) -> Set<String>? {
        if hasWildcard { return nil }
        var set = Set(accessGroups)
        if operation == .update || operation == .delete { set.remove(Self.tokenGroup) }
        return set
    }
}
