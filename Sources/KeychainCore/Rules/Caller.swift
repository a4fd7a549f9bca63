#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Who is calling, as far as the keychain's rules care: the access groups it may use (semantics §3.2, §3.3) and its
/// program. What it may do with them is decided by ``AccessEvaluator`` alone.
///
/// The list order matters: the first group is where an add without `kSecAttrAccessGroup` lands.
public struct Caller: Sendable, Hashable {
    public var accessGroups: [String]
    /// The calling program as the kernel reports it (keychaind: the peer's executable and its digest); nil where
    /// it cannot be known for certain (embedded mode), and then trusted-application lists are not enforced.
    public var application: TrustedApplication?

    /// The group the token items live in; readable, never writable.
    public static let tokenGroup = "com.apple.token"
    /// The group of keychaind's own sync state (device keys, the account's item keys): no caller sees or writes it,
    /// not even the keychain's own tools (docs/SYNC.md).
    public static let syncStateGroup = "com.swift-keychain.sync-state"
    /// The group of the access log's private key (docs/ACCESS-LOG.md): as hidden as the sync state.
    public static let accessLogGroup = "com.swift-keychain.access-log"
    /// keychaind's own groups: no caller sees or writes them, and no backup carries them.
    public static func isKeychaindOwn(_ group: String) -> Bool { group == syncStateGroup || group == accessLogGroup }
    /// The group of the secrets keychaind keeps for sandboxed applications (the Secret portal): seen and backed up
    /// like any item, written by keychaind alone (a program that planted an application's secret first would know
    /// the key to that application's data), claimed by no program.
    public static let portalSecretGroup = "org.freedesktop.portal.Secret"
    /// Groups only keychaind writes: its own, and the Secret portal's.
    public static func isKeychaindWritten(_ group: String) -> Bool { isKeychaindOwn(group) || group == portalSecretGroup }
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
}
