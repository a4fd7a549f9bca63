import Foundation
import KeychainCore
import KeychainStorage
import Synchronization

/// What every front end calls: Apple's four item calls over one keychain, with a caller's access groups.
///
/// The embedded backend opens the keychain file in this process. Errors carry Apple's status codes.
public final class KeychainClient: Sendable {
    public let file: KeychainFile
    public let caller: Caller

    public init(file: KeychainFile, caller: Caller) {
        self.file = file
        self.caller = caller
    }

    /// Opens (or, the first time, creates) a keychain by name or path. A new keychain gets `password`;
    /// with none it is a keychain without a password, like a device without a passcode.
    public static func open(
        keychain nameOrPath: String, locations: KeychainLocations = .current(), caller: Caller,
        createWithPassword password: SecretBytes? = nil, kdf: KDFParameters = .standard,
        clock: (@Sendable () -> Date)? = nil
    ) throws(KeychainError) -> KeychainClient {
        let url = locations.url(forKeychain: nameOrPath)
        var configuration = OpenKeychains.standardConfiguration(locations: locations)
        configuration.kdf = kdf
        if let clock { configuration.clock = clock }
        let file = try OpenKeychains.shared.file(at: url, configuration: configuration, createWithPassword: password)
        return KeychainClient(file: file, caller: caller)
    }

    private static let sharedClient = Mutex<KeychainClient?>(nil)

    /// The process's client for the default keychain (`login` unless configured), created on first use, with the
    /// application's access groups (see ``ApplicationIdentity``).
    public static func shared() throws(KeychainError) -> KeychainClient {
        try sharedClient.withLock { (client: inout KeychainClient?) throws(KeychainError) -> KeychainClient in
            if let client { return client }
            let made = try openDefault(caller: Caller(accessGroups: ApplicationIdentity.current().accessGroups))
            client = made
            return made
        }
    }

    /// Opens the user's default keychain. With no keychain at all, creates `login` without a password and says so
    /// once on standard error (nobody can be asked for one here; the `security` command asks on a terminal).
    public static func openDefault(caller: Caller, locations: KeychainLocations = .current()) throws(KeychainError)
        -> KeychainClient
    {
        let url = KeychainPreferences(locations: locations).defaultKeychain()
        let isNew = !FileManager.default.fileExists(atPath: url.path)
        let made = try open(keychain: url.path, locations: locations, caller: caller)
        if isNew {
            FileHandle.standardError.write(
                Data("keychain: created \(url.path) without a password (no way to ask for one)\n".utf8))
        }
        return made
    }

    // MARK: - Apple's four calls, on dictionaries

    /// `SecItemAdd`.
    @discardableResult
    public func add(_ attributes: [String: QueryValue]) throws(KeychainError) -> FoundItem {
        try file.add(QueryParser.parse(attributes, for: .add), caller: caller)
    }

    /// `SecItemCopyMatching`: the matches, up to the query's limit.
    public func search(_ query: [String: QueryValue]) throws(KeychainError) -> [FoundItem] {
        try file.search(QueryParser.parse(query, for: .search), caller: caller)
    }

    /// `SecItemUpdate`: how many items changed.
    @discardableResult
    public func update(_ query: [String: QueryValue], with attributes: [String: QueryValue]) throws(KeychainError)
        -> Int
    {
        let parsed = try QueryParser.parse(query, for: .update)
        let changes = try QueryParser.parseUpdate(attributes, itemClass: parsed.itemClass)
        return try file.update(parsed, with: changes, caller: caller)
    }

    /// `SecItemDelete`: how many items went.
    @discardableResult
    public func delete(_ query: [String: QueryValue]) throws(KeychainError) -> Int {
        try file.delete(QueryParser.parse(query, for: .delete), caller: caller)
    }

    /// Stores `secret` in the item `query` names: adds it, or updates the existing item with the same primary key
    /// (Apple's duplicate rule) with `attributes` and the secret, in one transaction. Items that merely match a
    /// partial query are never touched.
    public func upsert(_ query: [String: QueryValue], secret: SecretBytes, attributes: [String: QueryValue] = [:])
        throws(KeychainError)
    {
        var addDictionary = query.merging(attributes) { _, new in new }
        addDictionary["v_Data"] = .data(secret.unprotectedData())
        let parsed = try QueryParser.parse(addDictionary, for: .add)
        var changes = try QueryParser.parseUpdate(attributes, itemClass: parsed.itemClass)
        changes.valueData = secret
        try file.addOrUpdate(parsed, changes: changes, caller: caller)
    }

    /// Deletes every item `matching` selects and adds `attributes`' item, in one transaction (a credential helper's
    /// store that replaces whatever it held for the same server).
    @discardableResult
    public func replaceAll(matching: [String: QueryValue], with attributes: [String: QueryValue])
        throws(KeychainError) -> Int
    {
        try file.replaceAll(
            matching: QueryParser.parse(matching, for: .delete), with: QueryParser.parse(attributes, for: .add),
            caller: caller)
    }
}
