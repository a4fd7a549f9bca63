import Crypto
import Foundation
import GRDB
import KeychainCore
import KeychainThreads
import Logging
import Synchronization

/// One keychain file, opened in this process: the encrypted item store with its lock state.
///
/// Every call is one SQLite transaction; a crash at any instant leaves either the old or the new state.
/// Thread-safe: GRDB serialises writes, and the unlocked keys sit behind a mutex.
public final class KeychainFile: Sendable {
    public struct Configuration: Sendable {
        /// Where the device key and per-keychain state live (`$XDG_STATE_HOME/keychain`).
        public var stateDirectory: URL
        public var kdf: KDFParameters = .standard
        public var clock: @Sendable () -> Date = { Date() }
        public var logger = Logger(label: "keychain.storage")
        /// The biometric sensor; none on a plain Linux machine. Storage only reads whether it can be used; the
        /// Asker of the service layer is what asks through it.
        public var authenticator: any Authenticator = NoBiometrics()
        /// Called after an unlock, a password change or new settings: the keychain's idle deadline may now come
        /// sooner than a scheduler waiting for it thinks (keychaind's LockScheduler). Uses only move it later.
        public var idleDeadlineMayBeSooner: (@Sendable () -> Void)?
        public init(stateDirectory: URL) { self.stateDirectory = stateDirectory }
    }

    /// Auto-lock settings (`SecKeychainSettings`).
    public typealias Settings = KeychainSettings

    public let url: URL
    /// The biometric sensor this keychain's items may be opened with (the Asker asks through it).
    public var authenticator: any Authenticator { configuration.authenticator }
    /// `url`'s standardized path, made once: what the process's handles and a service's used files are keyed by.
    public let standardizedPath: String
    /// `url.path`, made once: Foundation's URL makes it anew at every use, and the access trail names it per item.
    public let filePath: String
    let database: DatabaseQueue
    let configuration: Configuration
    let deviceKey: SymmetricKey
    let header: Mutex<FileHeader>
    let deviceKeys: DeviceKeys
    let keys = Mutex(UnlockedKeys())
    /// Settings as last read or written here (another process's change is seen at the next open).
    let cachedSettings = Mutex<Settings?>(nil)
    /// The newest epoch this process wrote that the device state does not have yet, and when the state was
    /// last written: the state is advanced at most once a second, and when the keychain locks or closes.
    let epochRecord = Mutex<(pending: Int64?, lastWrite: Date)>((nil, .distantPast))
    /// Set by close(); every later call is errSecInvalidKeychain. Held shared by every database call (GRDB
    /// serialises them), exclusively by close(). Not a `Mutex`: held across a whole call, its spinning and
    /// priority-inheritance sleeps under many threads cost more than the calls (``ReadWriteLock``).
    let closed = ReadWriteLock(false)
    var statePath: String {
        configuration.stateDirectory.appendingPathComponent("\(header.withLock { $0.dbUUID }.uuidString).state").path
    }

    struct UnlockedKeys: Sendable {
        /// In locked memory (mlock, MADV_DONTDUMP), zeroed when dropped: see ``LockedMemory``.
        var classKeys = LockedKeyRing()
        var metadataKeys = LockedKeyRing()
        var lastActivity: Date = .distantPast
        /// When the keychain password was last entered correctly (for an authentication context's reuse window).
        var lastPasswordEntry: Date = .distantPast
    }

    private init(url: URL, database: DatabaseQueue, configuration: Configuration, deviceKey: SymmetricKey,
                 header: FileHeader) {
        self.url = url
        self.standardizedPath = url.standardizedFileURL.path
        self.filePath = url.path
        self.database = database
        self.configuration = configuration
        self.deviceKey = deviceKey
        self.header = Mutex(header)
        self.deviceKeys = DeviceKeys(deviceKey: deviceKey, header: header)
    }

    // MARK: - Create, open, delete

    /// Creates a new keychain file. With no password it is a keychain of a device without a passcode.
    public static func create(at url: URL, password: SecretBytes?, settings: Settings = .appleDefault,
                              configuration: Configuration) throws(KeychainError) -> KeychainFile
    {
        if FileManager.default.fileExists(atPath: url.path) {
            throw KeychainError(.duplicateKeychain, url.lastPathComponent)
        }
        try FileSystem.makePrivateDirectory(url.deletingLastPathComponent())
        let deviceKey = try DeviceKey.load(in: configuration.stateDirectory, create: true)
        let hasPassword = !(password?.isEmpty ?? true)
        let header = FileHeader(
            dbUUID: UUID(), dbSalt: Data(SymmetricKey.random().bytes), passwordSalt: Data(SymmetricKey.random().bytes),
            hasPassword: hasPassword, kdf: configuration.kdf, keybagGeneration: 1)
        let passwordKEK = try KeyHierarchy.passwordKEK(
            password: hasPassword ? password : nil, header: header, deviceKey: deviceKey)
        let deviceKeys = DeviceKeys(deviceKey: deviceKey, header: header)

        // Build the whole file under a temporary name, then move it into place: a crash leaves no half keychain.
        let temp = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).new")
        do {
            try FileSystem.writeNewFile(temp.path, bytes: [])
            let database = try openDatabase(temp)
            try FileSchema.migrator().migrate(database)
            try database.write { db in
                let manifest = Manifest(epoch: 1, count: 0, digest: Data(count: 32))
                try db.execute(
                    sql: """
                        INSERT INTO kc_meta (id, format, db_uuid, db_salt, pw_salt, has_password, kdf_id, kdf_n, kdf_r,
                          kdf_p, keybag_gen, epoch, item_count, set_digest, manifest_mac, lock_interval, lock_on_sleep)
                        VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, ?, ?, ?, ?)
                        """,
                    arguments: [
                        FileSchema.formatVersion, uuidData(header.dbUUID), header.dbSalt, header.passwordSalt,
                        hasPassword, header.kdf.id, header.kdf.n, header.kdf.r, header.kdf.p, header.keybagGeneration,
                        manifest.digest, manifest.mac(key: deviceKeys.manifestKey, header: header),
                        settings.lockInterval ?? Int(Int32.max), settings.lockOnSleep,
                    ])
                for cls in KeyHierarchy.classes(hasPassword: hasPassword) {
                    let kek = KeyHierarchy.isDeviceClass(cls) ? deviceKeys.deviceKEK : passwordKEK
                    let blob = try Sealing.seal(
                        SymmetricKey.random().bytes, key: kek,
                        aad: KeyHierarchy.classKeyAAD(cls, keyGeneration: 1, header: header))
                    try db.execute(
                        sql: "INSERT INTO keybag (class, key_gen, wrap, blob) VALUES (?, 1, ?, ?)",
                        arguments: [cls.rawValue, KeyHierarchy.isDeviceClass(cls) ? "dev" : "pw", blob])
                }
            }
            try database.close()
            // The device state exists from the start, so that a missing one later means it was removed.
            var state = DeviceState()
            state.epoch = 1
            try state.save(
                path: configuration.stateDirectory.appendingPathComponent("\(header.dbUUID.uuidString).state").path,
                key: deviceKeys.stateKey, dbUUID: header.dbUUID, sync: true)
            try? FileManager.default.removeItem(atPath: temp.path + "-wal")
            try? FileManager.default.removeItem(atPath: temp.path + "-shm")
            guard link(temp.path, url.path) == 0 else {
                try? FileManager.default.removeItem(at: temp)
                throw KeychainError(.duplicateKeychain, url.lastPathComponent)
            }
            try? FileManager.default.removeItem(at: temp)
        } catch let error as KeychainError {
            try? FileManager.default.removeItem(at: temp)
            throw error
        } catch {
            try? FileManager.default.removeItem(at: temp)
            throw StorageErrors.map(error)
        }
        let file = try open(at: url, configuration: configuration)
        if hasPassword, let password { try file.unlock(password: password) }
        return file
    }

    /// Opens an existing keychain file and checks its manifest. A keychain without a password opens unlocked;
    /// one with a password opens locked, with only its Always classes readable.
    public static func open(at url: URL, configuration: Configuration) throws(KeychainError) -> KeychainFile {
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw KeychainError(.noSuchKeychain, url.lastPathComponent)
        }
        let deviceKey = try DeviceKey.load(in: configuration.stateDirectory, create: false)
        let database: DatabaseQueue
        let header: FileHeader
        let format: Int
        do {
            database = try openDatabase(url)
            (header, format) = try database.read { db -> (FileHeader, Int) in
                guard try db.tableExists("kc_meta"), let row = try Row.fetchOne(db, sql: "SELECT * FROM kc_meta") else {
                    throw KeychainError(.invalidKeychain, "not a keychain file")
                }
                let format: Int = try row.required("format")
                guard FileSchema.readableFormats.contains(format) else {
                    throw KeychainError(.wrongSecVersion, "format \(format)")
                }
                return (try FileHeader(row), format)
            }
        } catch let error as KeychainError {
            throw error
        } catch let error as DatabaseError where error.resultCode == .SQLITE_NOTADB {
            throw KeychainError(.invalidKeychain, "not a keychain file")
        } catch {
            throw StorageErrors.map(error)
        }
        let file = KeychainFile(url: url, database: database, configuration: configuration, deviceKey: deviceKey, header: header)
        // Only an older file pays for the write transaction (the migration checks the format again inside it).
        if format < FileSchema.formatVersion { try file.migrateIfNeeded() }
        try file.verifyManifest()
        try file.loadDeviceClassKeys()
        if !header.hasPassword { try file.unlock(password: nil) }
        return file
    }

    /// Deletes a keychain file and its write-ahead log. Open handles fail afterwards. Anything that is not a
    /// keychain (an ordinary file named by mistake) is left alone: errSecInvalidKeychain.
    public static func delete(at url: URL) throws(KeychainError) {
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw KeychainError(.noSuchKeychain, url.lastPathComponent)
        }
        guard isKeychain(url) else { throw KeychainError(.invalidKeychain, "\(url.lastPathComponent) is not a keychain") }
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
    }

    /// True when `url` is a keychain file: an SQLite database whose `kc_meta` names a keychain format. Read-only,
    /// so looking never changes the file.
    static func isKeychain(_ url: URL) -> Bool {
        // Only through SQLite: a descriptor of our own on a database this process may have open would, when closed,
        // drop SQLite's POSIX locks on it (closing any descriptor of a file drops every POSIX lock the process holds on it). SQLite answers "not a database" for other files.
        var config = GRDB.Configuration()
        config.readonly = true
        guard let database = try? DatabaseQueue(path: url.path, configuration: config) else { return false }
        defer { try? database.close() }
        let format = try? database.read { db in try Int.fetchOne(db, sql: "SELECT format FROM kc_meta") }
        return format != nil
    }

    /// One connection per file and process. A DatabasePool would add concurrent in-process readers, but it resets
    /// `synchronous` to NORMAL (commits not synced), writes a dummy table whenever the WAL is empty, and closes with
    /// a read-only connection that cannot fold the WAL back, so every next process would replay the whole WAL.
    /// Keychain calls are short; serialising them in-process costs little, and other processes still read
    /// concurrently through the WAL.
    static func openDatabase(_ url: URL) throws -> DatabaseQueue {
        var config = GRDB.Configuration()
        config.busyMode = .timeout(30)
        config.journalMode = .default  // WAL is a property of the file, set once below
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        let database = try DatabaseQueue(path: url.path, configuration: config)
        try database.writeWithoutTransaction { db in
            if try String.fetchOne(db, sql: "PRAGMA journal_mode") != "wal" {
                guard try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") == "wal" else {
                    throw KeychainError(.io, "the keychain file cannot use a write-ahead log")
                }
            }
        }
        return database
    }

    // MARK: - State

    public var hasPassword: Bool { header.withLock { $0.hasPassword } }

    /// True when the WhenUnlocked classes are unavailable.
    public var isLocked: Bool {
        lockIfIdle()
        return keys.withLock { $0.classKeys[.whenUnlocked] == nil }
    }

    public func settings() throws(KeychainError) -> Settings {
        if let cached = cachedSettings.withLock({ $0 }) { return cached }
        let settings = try read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT lock_interval, lock_on_sleep FROM kc_meta") else {
                throw KeychainError(.invalidKeychain)
            }
            let interval: Int = try row.required("lock_interval")
            return Settings(lockInterval: interval >= Int(Int32.max) ? nil : interval, lockOnSleep: try row.required("lock_on_sleep"))
        }
        cachedSettings.withLock { $0 = settings }
        return settings
    }

    public func setSettings(_ settings: Settings) throws(KeychainError) {
        try write { db, _ in
            try db.execute(
                sql: "UPDATE kc_meta SET lock_interval = ?, lock_on_sleep = ?",
                arguments: [settings.lockInterval ?? Int(Int32.max), settings.lockOnSleep])
        }
        cachedSettings.withLock { $0 = settings }
        configuration.idleDeadlineMayBeSooner?()
    }

    /// Locks the keychain: forgets the keys of the WhenUnlocked classes. AfterFirstUnlock keys stay until this
    /// process ends; Always keys need no password.
    public func lock() {
        flushEpoch()
        keys.withLock { keys in
            for cls in Accessibility.allCases where cls.protection == .untilLocked {
                keys.classKeys[cls] = nil
                keys.metadataKeys[cls] = nil
            }
        }
        configuration.logger.debug("keychain.lock")
    }

    // MARK: - Transactions

    /// One read transaction: a single snapshot for the whole body. (GRDB's `read` on a queue prepares four
    /// statements on every call, to toggle `query_only` and open and close the transaction; cached ones cost a
    /// third of a find. Those cached ones are stepped straight (``RawRows``): a read transaction needs none of what
    /// GRDB's execution adds, its observers and transaction date, which was a twentieth of a find. GRDB's own
    /// `transactionDate` is therefore not kept for these; nothing here uses it.)
    func read<T>(_ body: (Database) throws -> T) throws(KeychainError) -> T {
        try whileOpen {
            try database.inDatabase { db in
                try RawRows.run(db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION"), db: db)
                do {
                    try noticeKeybagChange(db)
                    let result = try body(db)
                    try RawRows.run(db.cachedStatement(sql: "COMMIT TRANSACTION"), db: db)
                    return result
                } catch {
                    try? db.cachedStatement(sql: "ROLLBACK TRANSACTION").execute()
                    throw error
                }
            }
        }
    }

    /// The connection's durability settings as SQLite reports them (for tests: synchronous 2 = FULL).
    package func durability() throws(KeychainError) -> (synchronous: Int, journalMode: String, secureDelete: Int) {
        try read { db in
            (try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1, try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "",
             try Int.fetchOne(db, sql: "PRAGMA secure_delete") ?? -1)
        }
    }

    /// Runs a database call unless the handle was closed: GRDB stops the process on a closed connection, and the
    /// lock (shared here, exclusive in close()) keeps close() from slipping in between the check and the call.
    private func whileOpen<T>(_ body: () throws -> T) throws(KeychainError) -> T {
        try closed.withReadLock { (closed: Bool) throws(KeychainError) -> T in
            guard !closed else { throw KeychainError(.invalidKeychain, "the keychain was closed") }
            do { return try body() } catch { throw StorageErrors.map(error) }
        }
    }

    /// One write transaction (BEGIN IMMEDIATE) that also advances the manifest and the epoch.
    func write<T>(newHeader: FileHeader? = nil, _ body: (Database, inout Manifest.Changes) throws -> T)
        throws(KeychainError) -> T
    {
        let (result, epoch): (T, Int64) = try whileOpen {
            try database.writeWithoutTransaction { db in
                var output: (T, Int64)?
                try db.inTransaction(.immediate) {
                    if newHeader == nil { try noticeKeybagChange(db) }
                    var changes = Manifest.Changes()
                    let value = try body(db, &changes)
                    var manifest = try Manifest.load(db)
                    // Never re-MAC a manifest that someone else wrote.
                    guard let stored = try Data.fetchOne(db, sql: "SELECT manifest_mac FROM kc_meta"),
                        manifest.verify(stored, key: deviceKeys.manifestKey, header: self.header.withLock { $0 })
                    else { throw KeychainError(.decode, "the keychain's manifest does not verify") }
                    manifest.apply(changes)
                    manifest.epoch += 1
                    let macHeader = newHeader ?? self.header.withLock { $0 }
                    try manifest.store(db, mac: manifest.mac(key: deviceKeys.manifestKey, header: macHeader))
                    output = (value, manifest.epoch)
                    return .commit
                }
                return output!
            }
        }
        recordEpoch(epoch, header: newHeader ?? self.header.withLock { $0 })
        return result
    }

    deinit { flushEpoch() }

    /// Closes the file: checkpoints the WAL into the database and advances the device state's epoch. The handle
    /// is unusable afterwards. One state write at most.
    public func close() {
        let wasOpen = closed.withWriteLock { closed -> Bool in
            guard !closed else { return false }
            closed = true
            // SQLite folds the WAL into the database and deletes it at the last close of the file (unless another
            // process has it open): a WAL left behind would be replayed in full by the next process to open it.
            try? database.close()
            return true
        }
        if wasOpen { flushEpoch() }
    }
}

func uuidData(_ u: UUID) -> Data { withUnsafeBytes(of: u.uuid) { Data($0) } }

func uuid(_ data: Data?) throws -> UUID {
    guard let data, data.count == 16 else { throw KeychainError.decode("uuid") }
    var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    withUnsafeMutableBytes(of: &bytes) { _ = data.copyBytes(to: $0) }  // (no array in between: once per candidate)
    return UUID(uuid: bytes)
}
