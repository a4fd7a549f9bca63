import Crypto
import Foundation
import GRDB
import KeychainCore
import Logging
import Synchronization

/// Lock state: unlocking, the one guarded door for the keychain password (with its back-off), the class keys, and
/// the idle auto-lock.
extension KeychainFile {
    /// Unlocks with the keychain's password (nil or empty for a keychain without one).
    ///
    /// - Throws: `errSecAuthFailed` for a wrong password, or while a back-off after repeated failures runs.
    public func unlock(password: SecretBytes?) throws(KeychainError) {
        try unlock(password: password, db: nil)
    }

    /// Unlocks, reading the keybag through `db` when called inside a transaction (GRDB is not reentrant).
    func unlock(password: SecretBytes?, db: Database?) throws(KeychainError) {
        // The header as the file has it now: another process may have changed the password (salt, KDF).
        let header = try refreshHeader(db: db)
        let now = configuration.clock()
        if !header.hasPassword {
            if let password, !password.isEmpty { throw KeychainError(.authFailed) }
            let kek = try KeyHierarchy.passwordKEK(password: nil, header: header, deviceKey: deviceKey)
            try loadClassKeys(kek: kek, header: header, now: now, db: db)
            return
        }
        guard try checkPassword(password, header: header, now: now, db: db) else { throw KeychainError(.authFailed) }
    }

    /// The one door for the keychain password: unlocking, proving the owner's presence (an item's UserPresence or
    /// DevicePasscode, LAContext), and changing the password all pass here. The back-off is checked before the
    /// KDF, and the attempt is counted before the KDF runs, under the state's lock: parallel guesses and guesses
    /// whose process is killed mid-way all count. A right password loads the class keys and clears the count.
    ///
    /// - Returns: false for a wrong password.
    /// - Throws: `errSecAuthFailed` while a back-off after repeated failures runs (the password is not tried).
    func checkPassword(_ password: SecretBytes?, header: FileHeader, now: Date, db: Database?)
        throws(KeychainError) -> Bool
    {
        try checkedClassKeys(password, header: header, now: now, db: db) != nil
    }

    /// ``checkPassword(_:header:now:db:)`` that also hands back the class keys it unwrapped (nil for a wrong
    /// password): a caller that needs them (a password change) holds them even if the keychain locks meanwhile.
    func checkedClassKeys(_ password: SecretBytes?, header: FileHeader, now: Date, db: Database?)
        throws(KeychainError) -> [Accessibility: SymmetricKey]?
    {
        let path = statePath
        let key = deviceKeys.stateKey
        try DeviceState.withLock(path: path) { () throws(KeychainError) in
            guard var state = try DeviceState.loadIfPresent(path: path, key: key, dbUUID: header.dbUUID) else {
                // Written when the keychain was made, so a missing state was removed: that must not give five
                // free guesses again. The back-off starts engaged, as after five wrong passwords.
                var engaged = DeviceState()
                if let db {
                    do { engaged.epoch = try Manifest.load(db).epoch } catch { throw StorageErrors.map(error) }
                } else {
                    engaged.epoch = try read { db in try Manifest.load(db).epoch }
                }
                engaged.failedAttempts = DeviceState.freeAttempts
                engaged.nextAttemptAt = now.timeIntervalSince1970 + DeviceState.delay(afterFailures: DeviceState.freeAttempts)
                try engaged.save(path: path, key: key, dbUUID: header.dbUUID, sync: true)
                configuration.logger.warning("keychain.state.missing")
                throw KeychainError(.authFailed, "the keychain's device state was removed; try again in "
                                    + "\(Int(DeviceState.delay(afterFailures: DeviceState.freeAttempts))) s")
            }
            if state.failedAttempts >= DeviceState.hardLimit {
                throw KeychainError(.authFailed, "too many failed attempts; the keychain is locked out")
            }
            if state.nextAttemptAt > now.timeIntervalSince1970 {
                let wait = Int((state.nextAttemptAt - now.timeIntervalSince1970).rounded(.up))
                throw KeychainError(.authFailed, "too many failed attempts; try again in \(wait) s")
            }
            state.failedAttempts += 1
            state.nextAttemptAt = now.timeIntervalSince1970 + DeviceState.delay(afterFailures: state.failedAttempts)
            try state.save(path: path, key: key, dbUUID: header.dbUUID, sync: true)
        }
        let kek = try KeyHierarchy.passwordKEK(password: password, header: header, deviceKey: deviceKey)
        let unwrapped: [Accessibility: SymmetricKey]
        do {
            unwrapped = try loadClassKeys(kek: kek, header: header, now: now, db: db)
        } catch {
            configuration.logger.warning("keychain.password.wrong")
            return nil
        }
        keys.withLock { $0.lastPasswordEntry = now }
        try DeviceState.withLock(path: path) { () throws(KeychainError) in
            var state = try DeviceState.load(path: path, key: key, dbUUID: header.dbUUID)
            guard state.failedAttempts != 0 || state.nextAttemptAt != 0 else { return }
            state.failedAttempts = 0
            state.nextAttemptAt = 0
            try state.save(path: path, key: key, dbUUID: header.dbUUID, sync: true)
        }
        return unwrapped
    }

    /// Checks the keychain password as proof of the owner's presence (an item's UserPresence or DevicePasscode).
    /// A right password also unlocks. Wrong answers count toward the same back-off as unlocking: every door to
    /// the password is one door.
    public func verifyOwnerPassword(_ password: SecretBytes) throws(KeychainError) {
        try verifyOwner(password: password, db: nil)
    }

    func verifyOwner(password: SecretBytes, db: Database?) throws(KeychainError) {
        guard try ownerPasswordMatches(password, db: db) else { throw KeychainError(.authFailed) }
    }

    /// Checks the keychain password for `context` (LAContext's device-owner policies) and, when it is right, marks
    /// the context authenticated: the only way a context becomes so, besides the engine's own prompts.
    ///
    /// - Returns: false for a wrong password (counted toward the back-off).
    /// - Throws: `errSecAuthFailed` while the back-off refuses to try one.
    package func authenticateOwner(_ password: SecretBytes, for context: AuthenticationContext) throws(KeychainError)
        -> Bool
    {
        guard try ownerPasswordMatches(password, db: nil) else { return false }
        context.markOwnerAuthenticated()
        return true
    }

    /// False for a wrong password (counted); throws while the back-off refuses to try one.
    func ownerPasswordMatches(_ password: SecretBytes, db: Database?) throws(KeychainError) -> Bool {
        let header = try refreshHeader(db: db)
        guard header.hasPassword else { throw KeychainError(.authFailed, "the keychain has no password") }
        return try checkPassword(password, header: header, now: configuration.clock(), db: db)
    }

    /// Unwraps every password-class key with `kek`; one failure (a wrong password) unwraps none.
    @discardableResult
    func loadClassKeys(kek: SymmetricKey, header: FileHeader, now: Date, db: Database?) throws(KeychainError)
        -> [Accessibility: SymmetricKey]
    {
        let sql = "SELECT class, key_gen, wrap, blob FROM keybag"
        let rows: [Row]
        if let db {
            do { rows = try Row.fetchAll(db, sql: sql) } catch { throw StorageErrors.map(error) }
        } else {
            rows = try read { db in try Row.fetchAll(db, sql: sql) }
        }
        var unwrapped: [Accessibility: SymmetricKey] = [:]
        for row in rows {
            guard let cls = Accessibility(rawValue: try row.required("class")) else { throw KeychainError.decode("keybag") }
            let wrap: String = try row.required("wrap")
            guard wrap == (KeyHierarchy.isDeviceClass(cls) ? "dev" : "pw") else { throw KeychainError.decode("keybag") }
            let key = wrap == "dev" ? deviceKeys.deviceKEK : kek
            var raw = try Sealing.open(
                try row.required("blob"), key: key, aad: KeyHierarchy.classKeyAAD(cls, keyGeneration: try row.required("key_gen"), header: header))
            unwrapped[cls] = SymmetricKey(data: raw)
            raw.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } }
        }
        // The idle interval counts from when the keys are in memory, not from before the password's KDF (which can
        // take longer than a short interval): else a keychain could lock as it is unlocked.
        let unlocked = configuration.clock()
        keys.withLock { keys in
            for (cls, key) in unwrapped {
                keys.classKeys[cls] = key
                keys.metadataKeys[cls] = KeyHierarchy.metadataKey(classKey: key, header: header)
            }
            keys.lastActivity = max(now, unlocked)
        }
        configuration.idleDeadlineMayBeSooner?()
        return unwrapped
    }

    func loadDeviceClassKeys() throws(KeychainError) {
        let header = self.header.withLock { $0 }
        let rows = try read { db in try Row.fetchAll(db, sql: "SELECT class, key_gen, blob FROM keybag WHERE wrap = 'dev'") }
        for row in rows {
            guard let cls = Accessibility(rawValue: try row.required("class")), KeyHierarchy.isDeviceClass(cls) else {
                throw KeychainError.decode("keybag")
            }
            var raw = try Sealing.open(
                try row.required("blob"), key: deviceKeys.deviceKEK,
                aad: KeyHierarchy.classKeyAAD(cls, keyGeneration: try row.required("key_gen"), header: header))
            let key = SymmetricKey(data: raw)
            raw.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } }
            keys.withLock {
                $0.classKeys[cls] = key
                $0.metadataKeys[cls] = KeyHierarchy.metadataKey(classKey: key, header: header)
            }
        }
    }

    /// Before a use: locks if the idle interval has passed since the last use, then counts this call as one.
    func applyAutoLock() {
        lockIfIdle()
        let now = configuration.clock()
        keys.withLock { $0.lastActivity = now }
    }

    /// Tells whoever schedules idle locks (``Configuration/idleDeadlineMayBeSooner``) to look at this keychain's
    /// deadline: its host calls this once the handle is in the host's list (a keychain created here was unlocked
    /// before the list had it, so the scheduler looking then did not see it).
    public func announceIdleDeadline() { configuration.idleDeadlineMayBeSooner?() }

    /// When an idle lock is due if nobody uses the keychain before (it locks once the interval has passed, as
    /// ``isIdleExpired`` says); nil when it is locked, has no password or no interval.
    public var idleLockDeadline: Date? {
        guard hasPassword, let interval = (try? settings().lockInterval) ?? nil else { return nil }
        return keys.withLock { keys -> Date? in
            keys.classKeys[.whenUnlocked] != nil ? keys.lastActivity.addingTimeInterval(Double(interval)) : nil
        }
    }

    /// Whether the keychain has been unlocked and idle longer than its interval: it locks at the next use or tick.
    /// Reading this changes nothing.
    public var isIdleExpired: Bool {
        guard let deadline = idleLockDeadline else { return false }
        return configuration.clock() > deadline
    }

    /// Locks if the keychain has been idle longer than its interval (a password keychain only). Asking is not
    /// using: this never refreshes the idle timer, so polling the state (or a daemon's timer) cannot keep a
    /// keychain unlocked.
    /// - Returns: true when it locked the keychain now.
    @discardableResult
    public func lockIfIdle() -> Bool {
        let expired = isIdleExpired
        if expired {
            lock()
            configuration.logger.debug("keychain.lock.idle")
        }
        return expired
    }

    /// After the machine slept: locks the keychain if its settings say lock-on-sleep (`set-keychain-settings -l`)
    /// and it has a password and is unlocked. - Returns: true when it locked the keychain now.
    @discardableResult
    public func lockForSleep() -> Bool {
        guard hasPassword, (try? settings().lockOnSleep) == true else { return false }
        let unlocked = keys.withLock { $0.classKeys[.whenUnlocked] != nil }
        guard unlocked else { return false }
        lock()
        configuration.logger.debug("keychain.lock.sleep")
        return true
    }
}
