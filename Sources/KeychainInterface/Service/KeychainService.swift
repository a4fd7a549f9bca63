import KeychainCore

/// The one door to the keychain for every front end: `security`, the `Security` and `LocalAuthentication` modules,
/// the credential helpers and the native API.
///
/// Two implementations: ``EmbeddedKeychainService`` opens the keychain files in this process; the daemon's client
/// (keychaind, next) will send the same calls over a socket. Front ends never know which one they have, and never
/// say who they are: the service decides who is calling (the embedded one from the process's application identity,
/// the daemon from its peer's credentials).
///
/// Items are described with Apple's dictionaries (`kSecClass` → `"class"`, …); keychains by reference, resolved by
/// the service (``resolve(_:)``). `nil` as a keychain means the default keychain, and the first use of a missing
/// default `login` keychain creates it without a password (nobody can be asked here: a front end that can ask
/// creates it first with ``createKeychain(_:password:settings:)``).
public protocol KeychainService: Sendable {
    // MARK: - Which keychains

    /// A keychain name or path, resolved as macOS does: a path beginning with `/` is taken as is; anything else is
    /// relative to the keychain directory, with the `.keychain-db` naming.
    func resolve(_ nameOrPath: String) -> KeychainReference
    func defaultKeychain() -> KeychainReference
    func setDefaultKeychain(_ keychain: KeychainReference?) throws(KeychainError)
    func loginKeychain() -> KeychainReference
    func setLoginKeychain(_ keychain: KeychainReference?) throws(KeychainError)
    /// The keychains searched when none is named: the configured list, else the default keychain alone.
    func searchList() -> [KeychainReference]
    func setSearchList(_ keychains: [KeychainReference]) throws(KeychainError)

    // MARK: - Keychains

    func state(of keychain: KeychainReference) throws(KeychainError) -> KeychainState
    /// The search list with each keychain's state (through keychaind, one round trip; the default asks for the
    /// list, then for each state).
    func listedKeychains() throws(KeychainError) -> [ListedKeychain]
    /// Creates a keychain, unlocked; with no password it is a keychain of a device without a passcode.
    func createKeychain(_ keychain: KeychainReference, password: SecretBytes?, settings: KeychainSettings)
        throws(KeychainError)
    /// Deletes a keychain file (only a keychain: anything else is errSecInvalidKeychain) and drops it from the
    /// search list and the default.
    func deleteKeychain(_ keychain: KeychainReference) throws(KeychainError)
    func lock(_ keychain: KeychainReference) throws(KeychainError)
    func lockAll()
    /// Unlocks with the keychain's password (nil for a keychain without one); wrong ones count toward the back-off.
    func unlock(_ keychain: KeychainReference, password: SecretBytes?) throws(KeychainError)
    func settings(of keychain: KeychainReference) throws(KeychainError) -> KeychainSettings
    func setSettings(_ settings: KeychainSettings, of keychain: KeychainReference) throws(KeychainError)
    /// Changes, sets or removes (nil) the password; returns how many WhenPasscodeSet items went with a removal.
    @discardableResult
    func changePassword(of keychain: KeychainReference, old: SecretBytes?, new: SecretBytes?) throws(KeychainError)
        -> Int

    // MARK: - Items (Apple's four calls, and two that are one transaction each)
    //
    // Typed: a front end parses Apple's dictionaries once, in its own process (the extension below, or
    // `QueryParser`), and the wire carries the parsed values. The service holds each one to what the parser can
    // produce (`checked()`), since any program can write them on keychaind's socket.

    @discardableResult
    func add(_ item: ItemQuery, to keychain: KeychainReference?) throws(KeychainError) -> FoundItem
    func search(_ query: ItemQuery, in keychain: KeychainReference?) throws(KeychainError) -> [FoundItem]
    /// Searches the search list's keychains in order and stops at the first with a match, in one call (through
    /// keychaind, one round trip instead of the list's and then one per keychain). Items that are not found are
    /// skipped; any other keychain's error is thrown when none matched, the last one met.
    func firstMatch(_ query: ItemQuery) throws(KeychainError) -> SearchListMatch
    @discardableResult
    func update(_ query: ItemQuery, with changes: ItemUpdate, in keychain: KeychainReference?) throws(KeychainError)
        -> Int
    @discardableResult
    func delete(_ query: ItemQuery, in keychain: KeychainReference?) throws(KeychainError) -> Int
    /// Adds `item`, or gives its duplicate (the same primary key) `changes` and the item's secret, in one
    /// transaction; items that merely match a partial query are never touched. The secret travels once, in `item`:
    /// `changes` carries none.
    func upsert(_ item: ItemQuery, changes: ItemUpdate, in keychain: KeychainReference?) throws(KeychainError)
    /// Deletes every item `matching` selects and adds `item`, in one transaction.
    @discardableResult
    func replaceAll(matching: ItemQuery, with item: ItemQuery, in keychain: KeychainReference?) throws(KeychainError)
        -> Int
    /// Every item of the keychain, whatever its group (`dump-keychain`); locked classes are left out.
    func allItems(in keychain: KeychainReference, includingSecrets: Bool) throws(KeychainError) -> [FoundItem]

    // MARK: - Keys

    /// Runs a private-key operation (sign, decrypt, key exchange, or copy the public key) on the one private key
    /// `query` selects (a `keys` query, or a persistent reference), where the key lives; its bytes never come back
    /// (semantics §5.2).
    func useKey(_ query: ItemQuery, _ use: KeyUse, in keychain: KeychainReference?) throws(KeychainError)
        -> SecretBytes
    /// Generates a key pair where it is stored and stores it (SecKeyCreateRandomKey with kSecAttrIsPermanent): the
    /// private key never exists outside the service.
    func generateKeyPair(_ generation: KeyGeneration, in keychain: KeychainReference?) throws(KeychainError)
        -> GeneratedKeyPair

    // MARK: - Certificates, identities and files (`security import`, `export`, `find-certificate`)

    /// Reads certificates, keys and identities from a file (PKCS#12, PEM, DER) and stores them, all or none: here
    /// the file is opened where its private keys will live. Items already in the keychain are skipped; when nothing
    /// was new, errSecDuplicateItem. A PKCS#12 without `passphrase` that needs one: errSecPassphraseRequired.
    /// Returns the stored items' attributes.
    func importItems(_ request: ItemImport, into keychain: KeychainReference?) throws(KeychainError) -> [FoundItem]
    /// Writes the selected items as a file: certificates as PEM or DER; identities as PKCS#12, their private keys
    /// wrapped where they live (a key that must not leave is refused: errSecKeyIsSensitive).
    func exportItems(_ request: ItemExport, from keychain: KeychainReference?) throws(KeychainError) -> SecretBytes
    /// The certificate items `query` selects, with their hashes, names and whether their private key is here.
    func certificates(_ query: ItemQuery, in keychain: KeychainReference?) throws(KeychainError)
        -> [CertificateRecord]

    // MARK: - Backup (`security backup-keychain`, `restore-keychain`)

    /// Writes every item of `keychain` into a backup file at `path` (absolute), sealed under `password`
    /// (docs/FILE-FORMAT.md "Backup file"). Only the keychain's own `security` may, after the owner gave the
    /// keychain's password (asked where passwords are asked); `WhenPasscodeSetThisDeviceOnly` items stay out.
    func backUp(_ keychain: KeychainReference, to path: String, password: SecretBytes) throws(KeychainError)
        -> BackupReport
    /// Restores a backup file into `keychain`, all or nothing, merging by primary key (the newer modification date
    /// wins; on a tie the keychain's copy stays). The same owner rule as ``backUp(_:to:password:)``.
    func restore(from path: String, password: SecretBytes, into keychain: KeychainReference) throws(KeychainError)
        -> BackupReport

    // MARK: - Moving in (`security import-secrets`)

    /// Stores secrets read from another store, each as an item: one that is already there (the same primary key)
    /// is counted, not added twice; one that cannot be stored is reported by name and the others go on. A keyring
    /// file is read here, with its password.
    func importSecrets(_ request: SecretImport, into keychain: KeychainReference?) throws(KeychainError) -> ImportReport

    // MARK: - Sync (`security sync-setup`, `sync-now`, `sync-status`, `sync-leave`)

    /// Sets up, runs, shows or ends the sync of `keychain` (docs/SYNC.md). keychaind runs it; the same owner rule
    /// as a backup (only the keychain's own `security`); an in-process keychain answers errSecNotAvailable.
    func sync(_ request: SyncRequest, keychain: KeychainReference) throws(KeychainError) -> SyncReport

    // MARK: - Access log (`security access-log`, `verify-access-log`)

    /// The access log's records or its check (docs/ACCESS-LOG.md). keychaind keeps it; only the keychain's own
    /// `security`, after the login keychain's password; an in-process keychain answers errSecNotAvailable.
    func accessLog(_ request: AccessLogRequest) throws(KeychainError) -> AccessLogReport

    // MARK: - The owner (LocalAuthentication)

    /// Checks the keychain password for `context` and marks it authenticated when right (false when wrong; the
    /// back-off counts it).
    func authenticateOwner(_ password: SecretBytes, for context: AuthenticationContext,
                           in keychain: KeychainReference?) throws(KeychainError) -> Bool

    // MARK: - Events

    /// Delivers every keychain event of other processes to `handler`, on a thread of its own, until the
    /// subscription is cancelled; nil where there is nobody to hear them from (embedded mode: each process only
    /// sees its own changes).
    func subscribe(_ handler: @escaping @Sendable (KeychainEvent) -> Void) throws(KeychainError) -> EventSubscription?

    /// Ends this client's use: an embedded service closes its files (the WAL folded in, the files recorded as
    /// checked). A command-line tool calls it before it exits.
    func close()
}

extension KeychainService {
    /// The walk in the service's own process: the list with its states, then a search per keychain.
    public func firstMatch(_ query: ItemQuery) throws(KeychainError) -> SearchListMatch {
        let listed = try listedKeychains().filter(\.state.exists)
        guard !listed.isEmpty else { return .callerWalks }
        var lastError: KeychainError?
        for keychain in listed {
            // A password to ask for: the caller's to ask, where its user is (the daemon would ask elsewhere).
            if keychain.state.hasPassword && keychain.state.isLocked { return .callerWalks }
            do {
                let found = try search(query, in: keychain.keychain)
                if !found.isEmpty { return .found(keychain.keychain, found) }
            } catch KeychainStatus.itemNotFound {
                continue
            } catch {
                lastError = error
            }
        }
        throw lastError ?? KeychainError.itemNotFound()
    }
}

/// Apple-style dictionaries, parsed here, in the calling process, into the typed requests above.
extension KeychainService {
    @discardableResult
    public func add(_ attributes: [String: QueryValue], to keychain: KeychainReference?) throws(KeychainError)
        -> FoundItem
    {
        try add(QueryParser.parse(attributes, for: .add), to: keychain)
    }

    public func search(_ query: [String: QueryValue], in keychain: KeychainReference?) throws(KeychainError)
        -> [FoundItem]
    {
        try search(QueryParser.parse(query, for: .search), in: keychain)
    }

    @discardableResult
    public func update(_ query: [String: QueryValue], with attributes: [String: QueryValue],
                       in keychain: KeychainReference?) throws(KeychainError) -> Int
    {
        let parsed = try QueryParser.parse(query, for: .update)
        return try update(parsed, with: QueryParser.parseUpdate(attributes, itemClass: parsed.itemClass), in: keychain)
    }

    @discardableResult
    public func delete(_ query: [String: QueryValue], in keychain: KeychainReference?) throws(KeychainError) -> Int {
        try delete(QueryParser.parse(query, for: .delete), in: keychain)
    }

    /// Adds the item (`query` and `attributes`, with `secret`), or updates its duplicate with `attributes` and the
    /// secret.
    public func upsert(_ query: [String: QueryValue], secret: SecretBytes, attributes: [String: QueryValue],
                       in keychain: KeychainReference?) throws(KeychainError)
    {
        let (item, changes) = try QueryParser.parseUpsert(query, secret: secret, attributes: attributes)
        try upsert(item, changes: changes, in: keychain)
    }

    @discardableResult
    public func replaceAll(matching: [String: QueryValue], with attributes: [String: QueryValue],
                           in keychain: KeychainReference?) throws(KeychainError) -> Int
    {
        try replaceAll(matching: QueryParser.parse(matching, for: .delete),
                       with: QueryParser.parse(attributes, for: .add), in: keychain)
    }

    /// A key operation on the private key `query` selects: its class is `keys` whatever it says, unless a
    /// persistent reference (which stands alone, Apple's rule) names the key.
    public func useKey(_ query: [String: QueryValue], _ use: KeyUse, in keychain: KeychainReference?)
        throws(KeychainError) -> SecretBytes
    {
        var dictionary = query
        if dictionary["v_PersistentRef"] == nil { dictionary["class"] = .string("keys") }
        return try useKey(QueryParser.parse(dictionary, for: .search), use, in: keychain)
    }

    /// The certificates `query` selects, its class `cert` whatever it says.
    public func certificates(_ query: [String: QueryValue], in keychain: KeychainReference?) throws(KeychainError)
        -> [CertificateRecord]
    {
        var dictionary = query
        dictionary["class"] = .string("cert")
        return try certificates(QueryParser.parse(dictionary, for: .search), in: keychain)
    }
}

extension KeychainService {
    public func listedKeychains() throws(KeychainError) -> [ListedKeychain] {
        try searchList().map { keychain throws(KeychainError) in ListedKeychain(keychain, try state(of: keychain)) }
    }

    public func resolve(_ nameOrPath: String?) -> KeychainReference {
        nameOrPath.map { resolve($0) } ?? defaultKeychain()
    }

    /// The keychain a front end works on: `keychain` when it exists, the default keychain when nil. A missing default
    /// keychain that is the login keychain is created, as macOS creates `login` at first use, with the password
    /// `choosePassword` returns (a front end that can ask the user; nil: none). Any other missing keychain is
    /// errSecNoSuchKeychain. The one rule for `security`, SecKeychain and the other front ends. (The embedded
    /// service keeps its own copy for an item call that names no keychain, on its fast path, `file(orDefault:)`:
    /// there the default keychain's paths are worked out once, not per call.)
    public func existingKeychain(
        _ keychain: KeychainReference?,
        creatingLoginWith choosePassword: () throws(KeychainError) -> SecretBytes? = { nil }
    ) throws(KeychainError) -> KeychainReference {
        let target = keychain ?? defaultKeychain()
        if try state(of: target).exists { return target }
        guard keychain == nil, target == loginKeychain() else { throw KeychainError(.noSuchKeychain, target.fileName) }
        try createKeychainIfMissing(target, password: try choosePassword(), settings: .never)
        return target
    }

    /// Creates `keychain` unless it exists; another process creating it at the same moment is not an error.
    public func createKeychainIfMissing(_ keychain: KeychainReference, password: SecretBytes?,
                                        settings: KeychainSettings) throws(KeychainError)
    {
        if try state(of: keychain).exists { return }
        do {
            try createKeychain(keychain, password: password, settings: settings)
        } catch KeychainStatus.duplicateKeychain {
            // made by another process first
        } catch {
            throw error
        }
    }
}
