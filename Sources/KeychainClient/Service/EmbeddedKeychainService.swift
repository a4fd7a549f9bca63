import Foundation
import KeychainCore
import KeychainStorage
import Synchronization

/// The keychain service inside this process: it opens the keychain files itself (one handle per file and process,
/// shared through ``OpenKeychains``, so every API of the process sees one lock state).
///
/// Who is calling is this process: its ``Caller`` comes from its application identity (or, for the system tools
/// that see every group, from their construction), never from what a call says.
public final class EmbeddedKeychainService: KeychainService {
    public let locations: KeychainLocations
    public let caller: Caller
    private let preferences: KeychainPreferences
    private let configuration: KeychainFile.Configuration
    private let announcedLogin = Mutex(false)
    /// The files this service has used, which ``close()`` closes (not the other handles of the process).
    private let used = Mutex<Set<String>>([])

    /// - Parameters:
    ///   - caller: the access groups this process may use (default: its ``ApplicationIdentity``).
    ///   - configure: adjusts the file configuration (tests: a fast KDF, a clock).
    /// Who asks this service's user (for keychaind: pinentry on the client's terminal or display); nil = the
    /// process's default prompter.
    private let prompter: (any Prompter)?

    ///   - prompter: asks this client's user when a call allows it (unlock a locked keychain, authenticate for a
    ///     protected item); nil uses the process's default (the terminal, or pinentry).
    ///   - baseConfiguration: the file configuration to start from (default: ``OpenKeychains/standardConfiguration``,
    ///     which reads the environment; keychaind makes it once, not per connection).
    public init(locations: KeychainLocations = .current(), caller: Caller? = nil, prompter: (any Prompter)? = nil,
                baseConfiguration: KeychainFile.Configuration? = nil,
                configure: (inout KeychainFile.Configuration) -> Void = { _ in }) {
        self.locations = locations
        self.prompter = prompter
        self.caller = caller ?? Caller(accessGroups: ApplicationIdentity.current().accessGroups)
        self.preferences = KeychainPreferences(locations: locations)
        var configuration = baseConfiguration ?? OpenKeychains.standardConfiguration(locations: locations)
        configure(&configuration)
        self.configuration = configuration
    }

    // MARK: - Which keychains

    public func resolve(_ nameOrPath: String) -> KeychainReference { reference(locations.url(forKeychain: nameOrPath)) }
    public func defaultKeychain() -> KeychainReference { KeychainReference(path: preferences.paths().defaultKeychain) }
    public func loginKeychain() -> KeychainReference { KeychainReference(path: preferences.paths().loginKeychain) }
    public func searchList() -> [KeychainReference] { preferences.paths().searchList.map { KeychainReference(path: $0) } }

    public func setDefaultKeychain(_ keychain: KeychainReference?) throws(KeychainError) {
        try preferences.setDefaultKeychain(keychain.map(url))
    }

    public func setLoginKeychain(_ keychain: KeychainReference?) throws(KeychainError) {
        try preferences.setLoginKeychain(keychain.map(url))
    }

    public func setSearchList(_ keychains: [KeychainReference]) throws(KeychainError) {
        try preferences.setSearchList(keychains.map(url))
    }

    // MARK: - Keychains

    public func state(of keychain: KeychainReference) throws(KeychainError) -> KeychainState {
        guard StandardPath.exists(keychain.path) else {
            return KeychainState(exists: false, isLocked: true, hasPassword: false)
        }
        let file = try self.file(keychain)
        return KeychainState(exists: true, isLocked: file.isLocked, hasPassword: file.hasPassword)
    }

    public func createKeychain(_ keychain: KeychainReference, password: SecretBytes?, settings: KeychainSettings)
        throws(KeychainError)
    {
        let target = url(keychain)
        let file = try KeychainFile.create(at: target, password: password, settings: settings,
                                           configuration: configuration)
        OpenKeychains.shared.adopt(file)
        used.withLock { _ = $0.insert(file.standardizedPath) }
    }

    public func deleteKeychain(_ keychain: KeychainReference) throws(KeychainError) {
        let target = url(keychain)
        try preferences.deleteKeychain(target)
        OpenKeychains.shared.forget(target)
    }

    public func lock(_ keychain: KeychainReference) throws(KeychainError) { try file(keychain).lock() }

    public func lockAll() { for file in OpenKeychains.shared.all { file.lock() } }

    public func unlock(_ keychain: KeychainReference, password: SecretBytes?) throws(KeychainError) {
        try file(keychain).unlock(password: password)
    }

    public func settings(of keychain: KeychainReference) throws(KeychainError) -> KeychainSettings {
        try file(keychain).settings()
    }

    public func setSettings(_ settings: KeychainSettings, of keychain: KeychainReference) throws(KeychainError) {
        try file(keychain).setSettings(settings)
    }

    @discardableResult
    public func changePassword(of keychain: KeychainReference, old: SecretBytes?, new: SecretBytes?)
        throws(KeychainError) -> Int
    {
        try file(keychain).changePassword(old: old, new: new)
    }

    // MARK: - Items

    @discardableResult
    public func add(_ attributes: [String: QueryValue], to keychain: KeychainReference?) throws(KeychainError)
        -> FoundItem
    {
        let attributes = prepared(attributes)
        return try unlockingOnDemand(attributes, keychain) { () throws(KeychainError) in
            try file(orDefault: keychain).add(QueryParser.parse(attributes, for: .add), caller: caller)
        }
    }

    public func search(_ query: [String: QueryValue], in keychain: KeychainReference?) throws(KeychainError)
        -> [FoundItem]
    {
        let query = prepared(query)
        return try unlockingOnDemand(query, keychain) { () throws(KeychainError) in
            try file(orDefault: keychain).search(QueryParser.parse(query, for: .search), caller: caller)
        }
    }

    /// A search whose secrets stay here, for a private-key operation (EmbeddedKeychainService+Keys.swift).
    func searchForKeyUse(_ query: [String: QueryValue], in keychain: KeychainReference?) throws(KeychainError)
        -> [FoundItem]
    {
        let query = prepared(query)
        return try unlockingOnDemand(query, keychain) { () throws(KeychainError) in
            try file(orDefault: keychain).search(QueryParser.parse(query, for: .search), caller: caller, purpose: .keyUse)
        }
    }

    @discardableResult
    public func update(_ query: [String: QueryValue], with attributes: [String: QueryValue],
                       in keychain: KeychainReference?) throws(KeychainError) -> Int
    {
        let query = prepared(query)
        let parsed = try QueryParser.parse(query, for: .update)
        let changes = try QueryParser.parseUpdate(attributes, itemClass: parsed.itemClass)
        return try unlockingOnDemand(query, keychain) { () throws(KeychainError) in
            try file(orDefault: keychain).update(parsed, with: changes, caller: caller)
        }
    }

    @discardableResult
    public func delete(_ query: [String: QueryValue], in keychain: KeychainReference?) throws(KeychainError) -> Int {
        let query = prepared(query)
        return try unlockingOnDemand(query, keychain) { () throws(KeychainError) in
            try file(orDefault: keychain).delete(QueryParser.parse(query, for: .delete), caller: caller)
        }
    }

    public func upsert(_ query: [String: QueryValue], secret: SecretBytes, attributes: [String: QueryValue],
                       in keychain: KeychainReference?) throws(KeychainError)
    {
        var addDictionary = prepared(query.merging(attributes) { _, new in new })
        addDictionary["v_Data"] = .secret(secret)
        let parsed = try QueryParser.parse(addDictionary, for: .add)
        var changes = try QueryParser.parseUpdate(attributes, itemClass: parsed.itemClass)
        changes.valueData = secret
        _ = try unlockingOnDemand(addDictionary, keychain) { () throws(KeychainError) in
            try file(orDefault: keychain).addOrUpdate(parsed, changes: changes, caller: caller)
        }
    }

    @discardableResult
    public func replaceAll(matching: [String: QueryValue], with attributes: [String: QueryValue],
                           in keychain: KeychainReference?) throws(KeychainError) -> Int
    {
        let attributes = prepared(attributes)
        return try unlockingOnDemand(attributes, keychain) { () throws(KeychainError) in
            try file(orDefault: keychain).replaceAll(
                matching: QueryParser.parse(matching, for: .delete), with: QueryParser.parse(attributes, for: .add),
                caller: caller)
        }
    }

    public func allItems(in keychain: KeychainReference, includingSecrets: Bool) throws(KeychainError)
        -> [FoundItem]
    {
        try file(keychain).allItems(includingSecrets: includingSecrets, caller: caller)
    }

    /// Nothing to subscribe to in-process: only keychaind hears every process's changes.
    public func subscribe(_ handler: @escaping @Sendable (KeychainEvent) -> Void) throws(KeychainError)
        -> EventSubscription?
    {
        nil
    }

    public func authenticateOwner(_ password: SecretBytes, for context: AuthenticationContext,
                                  in keychain: KeychainReference?) throws(KeychainError) -> Bool
    {
        try file(orDefault: keychain).authenticateOwner(password, for: context)
    }

    /// The paths of the keychain files this service has used.
    public var usedFiles: Set<String> { used.withLock { $0 } }

    /// Closes the files this service used (the WAL folded in, the files recorded as checked); a later call opens
    /// them again. Other services of the process keep theirs.
    public func close() {
        for path in used.withLock({ $0 }) { OpenKeychains.shared.close(URL(fileURLWithPath: path)) }
    }

    // MARK: - Asking the user

    /// A call's dictionary with this client's prompter attached (a fresh context per call), unless the call brings
    /// its own context or credential reference.
    private func prepared(_ dictionary: [String: QueryValue]) -> [String: QueryValue] {
        guard let prompter, dictionary["u_AuthCtx"] == nil, dictionary["u_CredRef"] == nil else { return dictionary }
        var out = dictionary
        out["u_AuthCtx"] = .authenticationContext(AuthenticationContext(prompter: prompter))
        return out
    }

    /// Runs an item call; when it fails because its keychain is locked and the call allows UI, asks for the
    /// keychain's password (three tries) and runs it again, as macOS asks to unlock the login keychain.
    private func unlockingOnDemand<T>(_ dictionary: [String: QueryValue], _ keychain: KeychainReference?,
                                      _ body: () throws(KeychainError) -> T) throws(KeychainError) -> T {
        do {
            return try body()
        } catch KeychainStatus.interactionNotAllowed {
            let file = try self.file(orDefault: keychain)
            guard file.hasPassword, file.isLocked, allowsUI(dictionary),
                let prompter = prompter ?? configuration.prompter
            else { throw KeychainError.interactionNotAllowed("the keychain is locked") }
            let name = file.url.deletingPathExtension().lastPathComponent
            var complaint: String?
            for _ in 0..<3 {
                let request = PasswordRequest(
                    kind: .keychainPassword,
                    description: dictionary["u_OpPrompt"].flatMap { if case .string(let s) = $0 { s } else { nil } }
                        ?? "An application wants to use the keychain \"\(name)\". Enter its password to unlock it.",
                    prompt: "Password:", error: complaint)
                switch prompter.requestPassword(request) {
                case .cancelled: throw KeychainError(.userCanceled)
                case .unavailable: throw KeychainError.interactionNotAllowed("the keychain is locked")
                case .entered(let password):
                    do throws(KeychainError) {
                        try file.unlock(password: password)
                        return try body()
                    } catch KeychainStatus.authFailed {
                        complaint = "Wrong password, try again."
                    } catch {
                        throw error
                    }
                }
            }
            throw KeychainError(.authFailed)
        } catch {
            throw error
        }
    }

    /// False for kSecUseAuthenticationUIFail / Skip, kSecUseNoAuthenticationUI, or a context that forbids it.
    private func allowsUI(_ dictionary: [String: QueryValue]) -> Bool {
        if case .string(let ui) = dictionary["u_AuthUI"], ui != AuthenticationUI.allow.rawValue { return false }
        if dictionary["u_NoAuthUI"] == .bool(true) || dictionary["u_NoAuthUI"] == .int(1) { return false }
        if case .authenticationContext(let context) = dictionary["u_AuthCtx"], context.interactionNotAllowed {
            return false
        }
        return true
    }

    // MARK: - Files

    /// The open handle of an existing keychain.
    func file(_ keychain: KeychainReference) throws(KeychainError) -> KeychainFile {
        let file = try OpenKeychains.shared.file(at: url(keychain), configuration: configuration, createWithPassword: nil,
                                                 create: false)
        used.withLock { _ = $0.insert(file.standardizedPath) }
        return file
    }

    /// The named keychain, or the default one; a missing default `login` keychain is created without a password
    /// (said once on standard error: nobody can be asked here).
    func file(orDefault keychain: KeychainReference?) throws(KeychainError) -> KeychainFile {
        if let keychain { return try file(keychain) }
        let target = preferences.defaultKeychain()
        let isLogin = target.standardizedFileURL == preferences.loginKeychain().standardizedFileURL
        guard isLogin, !FileManager.default.fileExists(atPath: target.path) else {
            return try file(reference(target))
        }
        let file = try OpenKeychains.shared.file(at: target, configuration: configuration, createWithPassword: nil,
                                                 create: true)
        used.withLock { _ = $0.insert(file.standardizedPath) }
        let first = announcedLogin.withLock { announced in
            defer { announced = true }
            return !announced
        }
        if first {
            FileHandle.standardError.write(
                Data("keychain: created \(target.path) without a password (no way to ask for one)\n".utf8))
        }
        return file
    }

    private func reference(_ url: URL) -> KeychainReference { KeychainReference(path: StandardPath.of(url.path)) }
    private func url(_ keychain: KeychainReference) -> URL { URL(fileURLWithPath: keychain.path) }
}
