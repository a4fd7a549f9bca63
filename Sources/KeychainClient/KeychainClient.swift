import Foundation
import KeychainCore
import KeychainStorage
import Synchronization

/// Apple's four item calls on one keychain through a ``KeychainService``: what `SecItem*`, the credential helpers
/// and the native ``Keychain`` API use. Errors carry Apple's status codes.
public final class KeychainClient: Sendable {
    public let service: any KeychainService
    /// The keychain the calls go to; nil is the service's default keychain.
    public let keychain: KeychainReference?

    public init(service: any KeychainService, keychain: KeychainReference? = nil) {
        self.service = service
        self.keychain = keychain
    }

    /// An embedded client for a keychain by name or path, created (with `password`, or none) if it does not exist.
    public static func open(
        keychain nameOrPath: String, locations: KeychainLocations = .current(), caller: Caller,
        createWithPassword password: SecretBytes? = nil, kdf: KDFParameters = .standard,
        clock: (@Sendable () -> Date)? = nil
    ) throws(KeychainError) -> KeychainClient {
        let service = EmbeddedKeychainService(locations: locations, caller: caller) { configuration in
            configuration.kdf = kdf
            if let clock { configuration.clock = clock }
        }
        let reference = service.resolve(nameOrPath)
        try service.createKeychainIfMissing(reference, password: password, settings: .never)
        return KeychainClient(service: service, keychain: reference)
    }

    private static let sharedClient = Mutex<KeychainClient?>(nil)

    /// The process's client for the default keychain (`login` unless configured), with the application's access
    /// groups (see ``ApplicationIdentity``). Opening happens at the first call, not here.
    /// The service is chosen by ``KeychainBackend`` (keychaind when it runs, or with `KEYCHAIN_BACKEND=daemon`).
    public static func shared() throws(KeychainError) -> KeychainClient {
        try sharedClient.withLock { (client: inout KeychainClient?) throws(KeychainError) -> KeychainClient in
            if let client { return client }
            let made = KeychainClient(service: try KeychainBackend.service())
            client = made
            return made
        }
    }

    /// A client of the user's default keychain for a tool that declares its groups when embedded (the credential
    /// helpers); through keychaind the daemon decides. With no keychain at all, the first call creates `login`
    /// without a password and says so once.
    public static func openDefault(caller: Caller, locations: KeychainLocations = .current()) throws(KeychainError)
        -> KeychainClient
    {
        KeychainClient(service: try KeychainBackend.service(caller: caller, locations: locations))
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

    /// Ends the service's use before the process exits (an embedded service folds the WAL and records the files).
    public func close() { service.close() }
}
