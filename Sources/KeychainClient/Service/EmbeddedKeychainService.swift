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
    /// The default keychain's handle as ``file(orDefault:)`` last worked it out, with the directory watch's stamp
    /// and the open handles' change count then: while neither has moved, neither the preferences nor the file's
    /// presence nor the handle can have changed, and one `read(2)` stands for the whole lookup.
    private let defaultFile = Mutex<KeptDefault?>(nil)
    private struct KeptDefault {
        var stamp: UInt64
        var opened: UInt64
        /// Weak: a handle closed or forgotten (its keychain deleted) is not kept alive here, with its keys.
        weak var file: KeychainFile?
    }

    /// Who asks this service's user, and how (for keychaind: pinentry where the client's session can be asked).
    public let asker: Asker
    /// The sync engine, where one runs (keychaind); nil in-process.
    private let syncing: (any KeychainSyncing)?
    /// The access log, where one is kept (keychaind); nil in-process.
    private let accessLog: (any AccessLogKeeping)?
    /// Where a word to the user goes (a login keychain created without a password): standard error, or the host's
    /// log (keychaind's, which has no terminal).
    private let notice: @Sendable (String) -> Void
    /// The open keychain files of this service's host.
    public let keychains: OpenKeychains

    /// - Parameters:
    ///   - caller: the access groups this process may use (default: its ``ApplicationIdentity``).
    ///   - asker: asks this client's user when a call allows it (unlock a locked keychain, authenticate for a
    ///     protected item, allow a program); nil: the process's default (the terminal, or pinentry).
    ///   - baseConfiguration: the file configuration to start from (default: ``OpenKeychains/standardConfiguration``,
    ///     which reads the environment; keychaind makes it once, not per connection).
    ///   - keychains: the open files this service shares with the others of its host (default: the process's).
    ///   - preferences: the default keychain and search list of `locations`, made once by a host that makes a
    ///     service per client (keychaind); nil: made here.
    ///   - configure: adjusts the file configuration (tests: a fast KDF, a clock).
    ///   - notice: where a word to the user goes (default: standard error; keychaind: its log).
    public init(locations: KeychainLocations = .current(), caller: Caller? = nil, asker: Asker? = nil,
                baseConfiguration: KeychainFile.Configuration? = nil, syncing: (any KeychainSyncing)? = nil,
                accessLog: (any AccessLogKeeping)? = nil, keychains: OpenKeychains = .shared,
                preferences: KeychainPreferences? = nil,
                configure: (inout KeychainFile.Configuration) -> Void = { _ in },
                notice: @escaping @Sendable (String) -> Void = EmbeddedKeychainService.standardErrorNotice) {
        self.keychains = keychains
        self.syncing = syncing
        self.accessLog = accessLog
        self.notice = notice
        self.locations = locations
        self.caller = caller ?? Caller(accessGroups: ApplicationIdentity.current().accessGroups)
        // A host that makes a service per client (keychaind) passes the one it made: the files' URLs are worked
        // out once, not per connection.
        assert(preferences == nil || preferences?.locations == locations, "the preferences of other locations")
        self.preferences = preferences ?? KeychainPreferences(locations: locations)
        var configuration = baseConfiguration ?? OpenKeychains.standardConfiguration(locations: locations)
        configure(&configuration)
        self.configuration = configuration
        self.asker = asker ?? Asker(prompter: DefaultPrompter.make())
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
        keychains.adopt(file)
        used.withLock { _ = $0.insert(file.standardizedPath) }
    }

    public func deleteKeychain(_ keychain: KeychainReference) throws(KeychainError) {
        let target = url(keychain)
        try preferences.deleteKeychain(target)
        keychains.forget(target)
    }

    public func lock(_ keychain: KeychainReference) throws(KeychainError) { try file(keychain).lock() }

    public func lockAll() { for file in keychains.all { file.lock() } }

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
    public func add(_ item: ItemQuery, to keychain: KeychainReference?) throws(KeychainError) -> FoundItem {
        let query = try item.checked()
        guard query.operation == .add else { throw .param("an add needs an add request") }
        let file = try file(orDefault: keychain)
        return try asking(query, file) { grants throws(KeychainError) in
            try file.add(query, caller: caller, grants: grants)
        }
    }

    public func search(_ query: ItemQuery, in keychain: KeychainReference?) throws(KeychainError) -> [FoundItem] {
        try search(query, in: keychain, grants: AccessGrants())
    }

    /// A search with what was granted already (the Secret Service: what its prompt's Allow gave this connection).
    public func search(_ query: ItemQuery, in keychain: KeychainReference?, grants: AccessGrants)
        throws(KeychainError) -> [FoundItem]
    {
        let parsed = try query.checked()
        guard parsed.operation == .search else { throw .param("a search needs a search request") }
        let file = try file(orDefault: keychain)
        return try asking(parsed, file, grants: grants) { grants throws(KeychainError) in
            try file.search(parsed, caller: caller, grants: grants)
        }
    }

    /// A search whose secrets stay here, for a private-key operation (EmbeddedKeychainService+Keys.swift).
    func searchForKeyUse(_ query: ItemQuery, in keychain: KeychainReference?) throws(KeychainError) -> [FoundItem] {
        let file = try file(orDefault: keychain)
        return try asking(query, file) { grants throws(KeychainError) in
            try file.search(query, caller: caller, purpose: .keyUse, grants: grants)
        }
    }

    @discardableResult
    public func update(_ query: ItemQuery, with changes: ItemUpdate, in keychain: KeychainReference?)
        throws(KeychainError) -> Int
    {
        try update(query, with: changes, in: keychain, grants: AccessGrants())
    }

    /// An update with what was granted already (the Secret Service: a prompt's answer about this item).
    @discardableResult
    public func update(_ query: ItemQuery, with changes: ItemUpdate, in keychain: KeychainReference?,
                       grants: AccessGrants) throws(KeychainError) -> Int
    {
        let parsed = try query.checked()
        guard parsed.operation == .update else { throw .param("an update needs an update request") }
        let changes = try changes.checked(for: parsed.itemClass)
        let file = try file(orDefault: keychain)
        return try asking(parsed, file, grants: grants) { grants throws(KeychainError) in
            try file.update(parsed, with: changes, caller: caller, grants: grants)
        }
    }

    @discardableResult
    public func delete(_ query: ItemQuery, in keychain: KeychainReference?) throws(KeychainError) -> Int {
        try delete(query, in: keychain, grants: AccessGrants())
    }

    /// A delete with what was granted already (the Secret Service: a prompt's answer about this item).
    @discardableResult
    public func delete(_ query: ItemQuery, in keychain: KeychainReference?, grants: AccessGrants)
        throws(KeychainError) -> Int
    {
        let parsed = try query.checked()
        guard parsed.operation == .delete else { throw .param("a delete needs a delete request") }
        let file = try file(orDefault: keychain)
        return try asking(parsed, file, grants: grants) { grants throws(KeychainError) in
            try file.delete(parsed, caller: caller, grants: grants)
        }
    }

    public func upsert(_ item: ItemQuery, changes: ItemUpdate, in keychain: KeychainReference?) throws(KeychainError) {
        let parsed = try item.checked()
        guard parsed.operation == .add else { throw .param("an upsert needs an add request") }
        guard changes.valueData == nil else { throw .param("an upsert's secret is the item's, given once") }
        var changes = try changes.checked(for: parsed.itemClass)
        changes.valueData = parsed.valueData
        let file = try file(orDefault: keychain)
        _ = try asking(parsed, file) { grants throws(KeychainError) in
            try file.addOrUpdate(parsed, changes: changes, caller: caller, grants: grants)
        }
    }

    @discardableResult
    public func replaceAll(matching: ItemQuery, with item: ItemQuery, in keychain: KeychainReference?)
        throws(KeychainError) -> Int
    {
        let matching = try matching.checked()
        let parsed = try item.checked()
        guard matching.operation == .delete, parsed.operation == .add else {
            throw .param("a replacement needs a delete request and an add request")
        }
        let file = try file(orDefault: keychain)
        return try asking(parsed, file) { grants throws(KeychainError) in
            try file.replaceAll(matching: matching, with: parsed, caller: caller, grants: grants)
        }
    }

    /// Always Allow, given in a question asked elsewhere (a Secret Service prompt): the calling program joins the
    /// item's trusted applications.
    public func trust(item id: UUID, in keychain: KeychainReference) throws(KeychainError) {
        guard let application = caller.application else { return }
        try file(keychain).trust(application, item: id)
    }

    public func allItems(in keychain: KeychainReference, includingSecrets: Bool) throws(KeychainError)
        -> [FoundItem]
    {
        try file(keychain).allItems(includingSecrets: includingSecrets, caller: caller)
    }

    // MARK: - Backup

    public func backUp(_ keychain: KeychainReference, to path: String, password: SecretBytes) throws(KeychainError)
        -> BackupReport
    {
        let file = try ownersFile(keychain, doing: "back up")
        let report = try asker.run(Asker.Call(program: caller.application?.path), gate: FileGate(file: file)) {
            _ throws(KeychainError) in try file.writeBackup(to: path, password: password)
        }
        AccessTrail.noteKeychainAct(.backUp, keychain: file.url.path)
        return report
    }

    public func restore(from path: String, password: SecretBytes, into keychain: KeychainReference)
        throws(KeychainError) -> BackupReport
    {
        let file = try ownersFile(keychain, doing: "restore a backup into")
        let report = try asker.run(Asker.Call(program: caller.application?.path), gate: FileGate(file: file)) {
            _ throws(KeychainError) in try file.restoreBackup(from: path, password: password)
        }
        AccessTrail.noteKeychainAct(.restore, keychain: file.url.path)
        return report
    }

    // MARK: - Sync

    public func sync(_ request: SyncRequest, keychain: KeychainReference) throws(KeychainError) -> SyncReport {
        guard let syncing else {
            throw KeychainError(.notAvailable, "sync runs in keychaind (KEYCHAIN_BACKEND=daemon or auto)")
        }
        let file: KeychainFile
        switch request {
        // Joining an account or leaving it is the owner's decision: the keychain password, as for a backup.
        case .setUp, .join, .recover: file = try ownersFile(keychain, doing: "sync")
        case .removeDevice: file = try ownersFile(keychain, doing: "remove a device from the sync of")
        case .approve: file = try ownersFile(keychain, doing: "let another device sync")
        case .leave: file = try ownersFile(keychain, doing: "stop syncing")
        case .now, .status, .joinStatus:
            guard AccessEvaluator.mayActOnWholeKeychain(caller) else {
                throw KeychainError(.authFailed, "only the keychain's own security command may sync a whole keychain")
            }
            file = try self.file(keychain)
        }
        return try asker.run(Asker.Call(program: caller.application?.path), gate: FileGate(file: file)) {
            _ throws(KeychainError) in try syncing.perform(request, on: file) { asker.confirm($0) }
        }
    }

    // MARK: - Access log

    /// The access log's records, or its check (docs/ACCESS-LOG.md). What programs used reveals what the user has:
    /// only the keychain's own `security`, after the login keychain's password (as for a backup), which also
    /// opens the log's private key.
    public func accessLog(_ request: AccessLogRequest) throws(KeychainError) -> AccessLogReport {
        guard let accessLog else {
            throw KeychainError(.notAvailable, "the access log is kept by keychaind (KEYCHAIN_BACKEND=daemon or auto)")
        }
        // The login keychain at its standard place, not the user's preference: a program of the user could point
        // the preference at a keychain of its own, with a log key of its own.
        let file = try ownersFile(reference(locations.loginKeychain), doing: "read the access log of")
        let key = try asker.run(Asker.Call(program: caller.application?.path), gate: FileGate(file: file)) {
            _ throws(KeychainError) -> SecretBytes in
            accessLog.keyReady(in: file)
            guard let key = try file.keychaindSecret(.accessLogKey) else {
                throw KeychainError(.notAvailable, "the access log's key is not in the login keychain")
            }
            return key
        }
        AccessTrail.noteKeychainAct(.readAccessLog, keychain: file.url.path)
        return try accessLog.report(request, secrets: key)
    }

    // MARK: - Moving in

    public func importSecrets(_ request: SecretImport, into keychain: KeychainReference?) throws(KeychainError)
        -> ImportReport
    {
        let entries: [ImportedSecret]
        var report = ImportReport()
        switch request.source {
        case .entries(let list): entries = list
        case .gnomeKeyringFile(let file, let password):
            let keyring = try GnomeKeyringFile(file, password: password)
            entries = keyring.secrets()
            report.failures = keyring.unstorable.map {
                .init(name: $0, status: .param, message: "its attributes hold control characters (U+001E, U+001F)")
            }
        }
        for entry in entries {
            let kind = entry.attributes["class"].flatMap { if case .string(let s) = $0 { s } else { nil } } ?? "genp"
            if request.dryRun {
                report.added[kind, default: 0] += 1
                continue
            }
            var dictionary = entry.attributes
            dictionary["v_Data"] = .secret(entry.secret)
            switch Result<FoundItem, KeychainError>(catching: { () throws(KeychainError) in try add(dictionary, to: keychain) }) {
            case .success: report.added[kind, default: 0] += 1
            case .failure(let error) where error.status == .duplicateItem:
                // A Secret Service may hold several items with one attribute set (gnome-keyring does): the same
                // label and secret is this item, already here; another is one more item, kept apart as
                // CreateItem without Replace keeps it.
                guard case .string(let hint)? = entry.attributes["vwht"],
                    let attributes = SecretItemMapping.attributes(encoded: hint),
                    !hasSecretServiceTwin(entry, attributes: attributes, in: keychain)
                else {
                    report.alreadyThere += 1
                    continue
                }
                dictionary["vwht"] = .string(SecretItemMapping.encode(attributes, distinct: UUID()))
                switch Result<FoundItem, KeychainError>(catching: { () throws(KeychainError) in try add(dictionary, to: keychain) }) {
                case .success: report.added[kind, default: 0] += 1
                case .failure(let error):
                    report.failures.append(.init(name: entry.name, status: error.status, message: error.message))
                }
            case .failure(let error):
                report.failures.append(.init(name: entry.name, status: error.status, message: error.message))
            }
        }
        return report
    }

    /// Whether the keychain holds an item with exactly these Secret Service attributes, `entry`'s label and its
    /// secret.
    private func hasSecretServiceTwin(_ entry: ImportedSecret, attributes: [String: String],
                                      in keychain: KeychainReference?) -> Bool {
        let label = entry.attributes["labl"].flatMap { if case .string(let s) = $0 { s } else { nil } }
        // Attributes first; only the items with these very attributes and label have their secret read.
        let candidates = ((try? search(SecretItemMapping.query(for: attributes), in: keychain)) ?? []).filter {
            SecretItemMapping.attributes(of: $0.item) == attributes && $0.item.attributes["labl"]?.stringValue == label
        }
        return candidates.contains { candidate in
            let read = ItemQuery.item(candidate.item.persistentReference, for: .search, returning: .data)
            return (try? search(read, in: keychain))?.first?.secret == entry.secret
        }
    }

    /// A keychain for an act on all of it: only for the keychain's own `security` (the evaluator's rule), and
    /// only after its owner gave its password (asked where passwords are asked; a program that merely runs
    /// `security` does not know it). A keychain without a password has nothing more to ask.
    private func ownersFile(_ keychain: KeychainReference, doing act: String) throws(KeychainError) -> KeychainFile {
        guard AccessEvaluator.mayActOnWholeKeychain(caller) else {
            throw KeychainError(.authFailed, "only the keychain's own security command may \(act) a whole keychain")
        }
        let file = try file(keychain)
        guard file.hasPassword else { return file }
        let gate = OwnerGate(file: file)
        guard let prompter = asker.prompter else {
            throw .interactionNotAllowed("no way to ask for the keychain password")
        }
        let question = "security wants to \(act) every item of the keychain \u{201C}\(gate.keychainName)\u{201D}."
        try asker.askOwnerPassword(call: Asker.Call(program: caller.application?.path, operationPrompt: question),
                                   gate: gate, prompter: prompter, fallback: question)
        return file
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
        for path in used.withLock({ $0 }) { keychains.close(URL(fileURLWithPath: path)) }
    }

    // MARK: - Asking the user

    /// Runs an item call through this service's Asker: what the call needs from the user (the keychain's password,
    /// the owner's authentication, an application password, a yes for this program) is asked for with nothing
    /// held, and the call runs again with it.
    private func asking<T>(_ query: ItemQuery, _ file: KeychainFile, grants: AccessGrants = AccessGrants(),
                           _ body: (AccessGrants) throws(KeychainError) -> T) throws(KeychainError) -> T {
        try asker.run(Asker.Call(query, program: caller.application?.path), gate: FileGate(file: file),
                      grants: grants, body)
    }

    // MARK: - Files

    /// The open handle of an existing keychain.
    func file(_ keychain: KeychainReference) throws(KeychainError) -> KeychainFile {
        let file = try keychains.file(atPath: keychain.path, configuration: configuration, createWithPassword: nil,
                                      create: false)
        used.withLock { _ = $0.insert(file.standardizedPath) }
        return file
    }

    /// The named keychain, or the default one; a missing default `login` keychain is created without a password
    /// (said once on standard error: nobody can be asked here).
    func file(orDefault keychain: KeychainReference?) throws(KeychainError) -> KeychainFile {
        if let keychain { return try file(keychain) }
        if let kept = defaultFile.withLock({ $0 }), let file = kept.file, kept.opened == keychains.changeCount,
           let stamp = DirectoryWatch.shared.stamp(), stamp == kept.stamp
        {
            return file  // (in `used` since it was kept)
        }
        // The preferences as worked-out paths (read again only when a preference file changed): this runs at every
        // call that names no keychain, and URLs standardized per call were half of an in-process find.
        let opened = keychains.changeCount
        let (paths, pathsStamp) = preferences.watchedPaths()
        let target = paths.defaultKeychain
        if let (open, openStamp) = keychains.watchedOpenFile(atPath: target) {
            used.withLock { _ = $0.insert(open.standardizedPath) }
            // Kept only when both were known at one stamp (no change in between) through the watch.
            if let pathsStamp, openStamp == pathsStamp {
                defaultFile.withLock { $0 = KeptDefault(stamp: pathsStamp, opened: opened, file: open) }
            }
            return open
        }
        guard target == paths.loginKeychain, !StandardPath.exists(target) else {
            return try file(KeychainReference(path: target))
        }
        let file = try keychains.file(atPath: target, configuration: configuration, createWithPassword: nil,
                                      create: true)
        used.withLock { _ = $0.insert(file.standardizedPath) }
        let first = announcedLogin.withLock { announced in
            defer { announced = true }
            return !announced
        }
        if first { notice("created \(target) without a password (no way to ask for one)") }
        return file
    }

    /// A word to the user on standard error, as `keychain: …`.
    public static let standardErrorNotice: @Sendable (String) -> Void = { text in
        FileHandle.standardError.write(Data("keychain: \(text)\n".utf8))
    }

    private func reference(_ url: URL) -> KeychainReference { KeychainReference(path: StandardPath.of(url.path)) }
    private func url(_ keychain: KeychainReference) -> URL { URL(fileURLWithPath: keychain.path) }
}
