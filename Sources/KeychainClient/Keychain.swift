import Foundation
import KeychainCore

/// A keychain for one service: the two-line way to keep a password or token.
///
/// ```swift
/// let keychain = try Keychain(service: "com.example.app")
/// try keychain.set("s3cret", for: "alice")
/// let password = try keychain.string(for: "alice")   // nil when absent
/// ```
/// Values are generic-password items (service + account), stored in the user's default keychain unless another
/// ``KeychainClient`` is given, as data-protection items (`kSecUseDataProtectionKeychain`): other programs do not
/// see them unless they share the access group. Thread-safe.
public struct Keychain: Sendable {
    public let service: String
    public let client: KeychainClient
    public var accessibility: Accessibility = .whenUnlocked
    public var label: String?
    /// Whether this keychain's items are synchronizable (`kSecAttrSynchronizable`): they reach the user's other
    /// devices when the keychain syncs (docs/SYNC.md). Reads and removals see only items of the same kind.
    public var synchronizable = false

    public init(service: String, client: KeychainClient? = nil) throws(KeychainError) {
        self.service = service
        if let client { self.client = client } else { self.client = try KeychainClient.shared() }
    }

    /// A copy that stores new items with `accessibility`.
    public func accessibility(_ value: Accessibility) -> Keychain {
        var copy = self
        copy.accessibility = value
        return copy
    }

    /// A copy whose items are synchronizable (or not).
    public func synchronizable(_ value: Bool) -> Keychain {
        var copy = self
        copy.synchronizable = value
        return copy
    }

    /// A copy that labels new items.
    public func label(_ value: String) -> Keychain {
        var copy = self
        copy.label = value
        return copy
    }

    /// Stores `value` for `account`, replacing any earlier value (one transaction, no check-then-act race).
    public func set(_ value: String, for account: String) throws(KeychainError) {
        try set(SecretBytes(utf8: value), for: account)
    }

    public func set(_ value: Data, for account: String) throws(KeychainError) {
        try set(SecretBytes(value), for: account)
    }

    public func set(_ secret: SecretBytes, for account: String) throws(KeychainError) {
        var item = ItemQuery.add(.genericPassword, key(account), secret: secret)
        // A data-protection item (Apple's advice for new code on macOS too): seen only by programs entitled to
        // this program's access group, not by every program as a file keychain's item would be.
        item.dataProtectionKeychain = true
        item.setSynchronizable(synchronizable)
        item.accessibility = accessibility
        if let label { item[.label] = .string(label) }
        var changes = ItemUpdate(label: label)
        changes.accessibility = accessibility
        try client.upsert(item, changes: changes)
    }

    /// The secret for `account`, or nil when there is none.
    public func secret(for account: String) throws(KeychainError) -> SecretBytes? {
        do {
            var query = ItemQuery.search(.genericPassword, key(account), returning: .data)
            query.setSynchronizable(synchronizable)
            return try client.search(query).first?.secret
        } catch KeychainStatus.itemNotFound {
            return nil
        } catch {
            throw error
        }
    }

    public func string(for account: String) throws(KeychainError) -> String? {
        try secret(for: account)?.unprotectedString()
    }

    public func data(for account: String) throws(KeychainError) -> Data? {
        try secret(for: account)?.unprotectedData()
    }

    /// Removes the value for `account`; removing what is not there is not an error.
    public func remove(_ account: String) throws(KeychainError) {
        do {
            var query = ItemQuery.matching(.genericPassword, key(account), for: .delete)
            query.setSynchronizable(synchronizable)
            try client.delete(query)
        } catch KeychainStatus.itemNotFound {
            return
        } catch {
            throw error
        }
    }

    /// The accounts that have a value for this service.
    public func accounts() throws(KeychainError) -> [String] {
        do {
            var query = ItemQuery.search(.genericPassword, [.service: .string(service)], returning: .attributes, limit: .all)
            query.setSynchronizable(synchronizable)
            return try client.search(query).compactMap { $0.item[.account]?.stringValue }
        } catch KeychainStatus.itemNotFound {
            return []
        } catch {
            throw error
        }
    }

    /// The primary key of this service's item for `account`.
    private func key(_ account: String) -> [AttributeName: AttributeValue] {
        [.service: .string(service), .account: .string(account)]
    }
}
