#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

/// Apple's four item calls on one keychain through a ``KeychainService``: what `SecItem*`, the credential helpers
/// and the native ``Keychain`` API use. Errors carry Apple's status codes. (Ways to open one with the engine in
/// this process, `open`, `shared` and `openDefault`, come with KeychainClient.)
public final class KeychainClient: Sendable {
    public let service: any KeychainService
    /// The keychain the calls go to; nil is the service's default keychain.
    public let keychain: KeychainReference?

    public init(service: any KeychainService, keychain: KeychainReference? = nil) {
        self.service = service
        self.keychain = keychain
    }

    // MARK: - Apple's four calls, on dictionaries

    /// `SecItemAdd`.
    @discardableResult
    public func add(_ attributes: [String: QueryValue]) throws(KeychainError) -> FoundItem {
        try service.add(attributes, to: keychain)
    }

    /// `SecItemCopyMatching`: the matches, up to the query's limit.
    public func search(_ query: [String: QueryValue]) throws(KeychainError) -> [FoundItem] {
        try service.search(query, in: keychain)
    }

    /// `SecItemUpdate`: how many items changed.
    @discardableResult
    public func update(_ query: [String: QueryValue], with attributes: [String: QueryValue]) throws(KeychainError)
        -> Int
    {
        try service.update(query, with: attributes, in: keychain)
    }

    /// `SecItemDelete`: how many items went.
    @discardableResult
    public func delete(_ query: [String: QueryValue]) throws(KeychainError) -> Int {
        try service.delete(query, in: keychain)
    }

    /// Stores `secret` in the item `query` names: adds it, or updates the existing item with the same primary key
    /// (Apple's duplicate rule) with `attributes` and the secret, in one transaction. Items that merely match a
    /// partial query are never touched.
    public func upsert(_ query: [String: QueryValue], secret: SecretBytes, attributes: [String: QueryValue] = [:])
        throws(KeychainError)
    {
        try service.upsert(query, secret: secret, attributes: attributes, in: keychain)
    }

    /// Deletes every item `matching` selects and adds `attributes`' item, in one transaction (a credential helper's
    /// store that replaces whatever it held for the same server).
    @discardableResult
    public func replaceAll(matching: [String: QueryValue], with attributes: [String: QueryValue])
        throws(KeychainError) -> Int
    {
        try service.replaceAll(matching: matching, with: attributes, in: keychain)
    }

    // The same calls with requests already parsed (`Security` parses Apple's dictionary once, for the result's
    // shape too) or built typed.

    @discardableResult
    public func add(_ item: ItemQuery) throws(KeychainError) -> FoundItem { try service.add(item, to: keychain) }

    public func search(_ query: ItemQuery) throws(KeychainError) -> [FoundItem] { try service.search(query, in: keychain) }

    @discardableResult
    public func update(_ query: ItemQuery, with changes: ItemUpdate) throws(KeychainError) -> Int {
        try service.update(query, with: changes, in: keychain)
    }

    @discardableResult
    public func delete(_ query: ItemQuery) throws(KeychainError) -> Int { try service.delete(query, in: keychain) }

    /// Adds `item`, or gives its duplicate (the same primary key) `changes` and the item's secret, in one
    /// transaction.
    public func upsert(_ item: ItemQuery, changes: ItemUpdate) throws(KeychainError) {
        try service.upsert(item, changes: changes, in: keychain)
    }

    /// Deletes every item `matching` selects and adds `item`, in one transaction.
    @discardableResult
    public func replaceAll(matching: ItemQuery, with item: ItemQuery) throws(KeychainError) -> Int {
        try service.replaceAll(matching: matching, with: item, in: keychain)
    }

    /// Ends the service's use before the process exits (an embedded service folds the WAL and records the files).
    public func close() { service.close() }
}
