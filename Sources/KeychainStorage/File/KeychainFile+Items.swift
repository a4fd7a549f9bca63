import Crypto
import Foundation
import GRDB
import KeychainCore
import Logging
import Synchronization

extension KeychainFile {
    // MARK: - The four calls

    /// Adds an item (`SecItemAdd`). Returns what was stored, secret included when the query asks for data.
    public func add(_ query: ItemQuery, caller: Caller) throws(KeychainError) -> FoundItem {
        applyAutoLock()
        var item = try ItemRules.newItem(from: query, caller: caller, now: configuration.clock())
        try bindEnrolment(&item)
        if item.accessibility == .whenPasscodeSetThisDeviceOnly && !hasPassword {
            // Apple remaps the underlying errSecDecode to errSecAuthFailed for akpu without a passcode.
            throw KeychainError(.authFailed, "WhenPasscodeSet needs a keychain password")
        }
        let secret = query.valueData ?? SecretBytes(Data())
        let appPassword = try applicationPasswordForWriting(item, query)
        let sealed = try seal(item, secret: secret, generation: 1, applicationPassword: appPassword)
        try write { db, changes in
            try insert(sealed, db: db, changes: &changes)
        }
        configuration.logger.debug("item.add", metadata: ["item.class": "\(item.itemClass.rawValue)"])
        return FoundItem(item: item, secret: query.returnTypes.contains(.data) ? secret : nil)
    }

    /// Adds the item `query` describes or, when its duplicate (the same primary key: Apple's rule for
    /// errSecDuplicateItem) exists, applies `changes` to that one item; one transaction, so no other process can
    /// slip in between, and only the duplicate itself is touched, never other items a partial query would match.
    ///
    /// - Returns: true when an item was added, false when the duplicate was updated.
    @discardableResult
    public func addOrUpdate(_ query: ItemQuery, changes: ItemUpdate, caller: Caller) throws(KeychainError) -> Bool {
        applyAutoLock()
        if let group = changes.accessGroup { try caller.checkWritable(group) }
        let now = configuration.clock()
        var item = try ItemRules.newItem(from: query, caller: caller, now: now)
        try bindEnrolment(&item)
        let newAccessibility = changes.accessControl?.protection ?? changes.accessibility ?? item.accessibility
        if newAccessibility == .whenPasscodeSetThisDeviceOnly && !hasPassword {
            throw KeychainError(.authFailed, "WhenPasscodeSet needs a keychain password")
        }
        let primaryIndex = deviceKeys.primaryIndex(item.primaryKeyBytes)
        let added = try write { db, manifestChanges -> Bool in
            let existing = try Row.fetchCursor(
                db.cachedStatement(sql: "SELECT \(ItemRow.columns) FROM items WHERE primary_index = ?"),
                arguments: [primaryIndex]
            ).nextItemRow()
            guard let row = existing else {
                let sealed = try seal(item, secret: query.valueData ?? SecretBytes(Data()), generation: 1,
                                      applicationPassword: applicationPasswordForWriting(item, query))
                try insert(sealed, db: db, changes: &manifestChanges)
                return true
            }
            let (old, _) = try openMeta(row)
            // The duplicate is in the group the new item would get, which the caller may write.
            guard try authorize(old, query, db: db) else { throw KeychainError.duplicateItem() }
            var updated = try ItemRules.applying(changes, to: old, caller: caller, now: now)
            if changes.accessControl != nil { try bindEnrolment(&updated) }
            let secret = try changes.valueData ?? openSecret(row, item: old, query: query)
            let sealed = try seal(updated, secret: secret, generation: row.generation + 1,
                                  applicationPassword: applicationPasswordForWriting(updated, query))
            manifestChanges.removed.append(contribution(of: row))
            try replace(rowID: row.rowID, with: sealed, db: db, changes: &manifestChanges)
            return false
        }
        configuration.logger.debug("item.upsert", metadata: ["item.added": "\(added)"])
        return added
    }

    /// Adds several items in one transaction (an import): all of them, or none if any fails.
    public func addAll(_ queries: [ItemQuery], caller: Caller) throws(KeychainError) {
        applyAutoLock()
        let now = configuration.clock()
        var sealed: [SealedItem] = []
        sealed.reserveCapacity(queries.count)
        for query in queries {
            let item = try ItemRules.newItem(from: query, caller: caller, now: now)
            if item.accessibility == .whenPasscodeSetThisDeviceOnly && !hasPassword {
                throw KeychainError(.authFailed, "WhenPasscodeSet needs a keychain password")
            }
            sealed.append(try seal(item, secret: query.valueData ?? SecretBytes(Data()), generation: 1,
                                   applicationPassword: applicationPasswordForWriting(item, query)))
        }
        try write { db, changes in
            for s in sealed { try insert(s, db: db, changes: &changes) }
        }
    }

    /// Finds items (`SecItemCopyMatching`), in insertion order, up to the query's limit.
    ///
    /// - Throws: `errSecItemNotFound` for no match; `errSecInteractionNotAllowed` when a candidate's class key is
    ///   locked.
    public func search(_ query: ItemQuery, caller: Caller) throws(KeychainError) -> [FoundItem] {
        applyAutoLock()
        if let group = query.accessGroup { try caller.checkReadable(group) }
        if query.limit.count == 0 { throw .itemNotFound() }
        let wantsSecret = query.returnTypes.contains(.data)
        let found = try read { db -> [FoundItem] in
            var out: [FoundItem] = []
            let cursor = try candidates(for: query, db: db)
            while let row = try cursor.nextItemRow() {
                let (item, _) = try openMeta(row)
                guard ItemRules.matches(item, query, caller: caller) else { continue }
                if try !authorize(item, query, db: db) { continue }
                var secret: SecretBytes?
                if wantsSecret {
                    secret = try openSecret(row, item: item, query: query)
                } else if item.accessControl?.needsApplicationPassword == true {
                    // Apple decrypts an item with access-control constraints even for an attribute-only read, so
                    // its application password is needed (semantics §5.3): UI Skip leaves the item out, UI Fail
                    // without the password is errSecInteractionNotAllowed, UI Allow asks.
                    do {
                        _ = try openSecret(row, item: item, query: query)
                    } catch KeychainStatus.interactionNotAllowed where query.authenticationUI == .skip {
                        continue
                    }
                }
                out.append(FoundItem(item: item, secret: secret))
                if let limit = query.limit.count, out.count >= limit { break }
            }
            return out
        }
        if found.isEmpty { throw .itemNotFound() }
        return found
    }

    /// Updates every match in one transaction (`SecItemUpdate`); a collision changes nothing.
    @discardableResult
    public func update(_ query: ItemQuery, with update: ItemUpdate, caller: Caller) throws(KeychainError) -> Int {
        applyAutoLock()
        if let group = update.accessGroup { try caller.checkWritable(group) }
        if let group = query.accessGroup { try caller.checkReadable(group) }
        let now = configuration.clock()
        let newAccessibility = update.accessControl?.protection ?? update.accessibility
        if newAccessibility == .whenPasscodeSetThisDeviceOnly && !hasPassword {
            throw KeychainError(.authFailed, "WhenPasscodeSet needs a keychain password")
        }
        let count = try write { db, changes -> Int in
            let rows = try candidateRows(for: query, db: db)
            var updated = 0
            for row in rows {
                let (item, _) = try openMeta(row)
                guard ItemRules.matches(item, query, caller: caller) else { continue }
                guard try authorize(item, query, db: db) else { continue }
                var newItem = try ItemRules.applying(update, to: item, caller: caller, now: now)
                if update.accessControl != nil { try bindEnrolment(&newItem) }
                let secret = try update.valueData ?? openSecret(row, item: item, query: query)
                let appPassword = try applicationPasswordForWriting(newItem, query)
                let sealed = try seal(newItem, secret: secret, generation: row.generation + 1, applicationPassword: appPassword)
                changes.removed.append(contribution(of: row))
                try replace(rowID: row.rowID, with: sealed, db: db, changes: &changes)
                updated += 1
            }
            if updated == 0 { throw KeychainError.itemNotFound() }
            return updated
        }
        configuration.logger.debug("item.update", metadata: ["item.count": "\(count)"])
        return count
    }

    /// Deletes every match (`SecItemDelete`).
    @discardableResult
    public func delete(_ query: ItemQuery, caller: Caller) throws(KeychainError) -> Int {
        applyAutoLock()
        if let group = query.accessGroup { try caller.checkReadable(group) }
        let count = try write { db, changes -> Int in
            let deleted = try deleteMatches(query, caller: caller, db: db, changes: &changes)
            if deleted == 0 { throw KeychainError.itemNotFound() }
            return deleted
        }
        configuration.logger.debug("item.delete", metadata: ["item.count": "\(count)"])
        return count
    }

    /// Deletes every item `matching` selects, then adds the item `query` describes, in one transaction: a
    /// credential's replacement arrives as the old ones go (docker's store), and a failure keeps the old ones.
    ///
    /// - Returns: how many items were deleted.
    @discardableResult
    public func replaceAll(matching: ItemQuery, with query: ItemQuery, caller: Caller) throws(KeychainError) -> Int {
        applyAutoLock()
        if let group = matching.accessGroup { try caller.checkReadable(group) }
        var item = try ItemRules.newItem(from: query, caller: caller, now: configuration.clock())
        try bindEnrolment(&item)
        if item.accessibility == .whenPasscodeSetThisDeviceOnly && !hasPassword {
            throw KeychainError(.authFailed, "WhenPasscodeSet needs a keychain password")
        }
        let sealed = try seal(item, secret: query.valueData ?? SecretBytes(Data()), generation: 1,
                              applicationPassword: applicationPasswordForWriting(item, query))
        let deleted = try write { db, changes -> Int in
            let deleted = try deleteMatches(matching, caller: caller, db: db, changes: &changes)
            try insert(sealed, db: db, changes: &changes)
            return deleted
        }
        configuration.logger.debug("item.replace", metadata: ["item.count": "\(deleted)"])
        return deleted
    }

    private func deleteMatches(_ query: ItemQuery, caller: Caller, db: Database, changes: inout Manifest.Changes)
        throws -> Int
    {
        var deleted = 0
        for row in try candidateRows(for: query, db: db) {
            let (item, _) = try openMeta(row)
            guard ItemRules.matches(item, query, caller: caller) else { continue }
            // The ACL map decides: made from flags, `odel` is true (Apple), so no authentication is asked.
            if case .requires = item.accessControl?.constraint(for: .delete) {
                guard try authorize(item, query, db: db) else { continue }
            }
            try db.cachedStatement(sql: "DELETE FROM items WHERE rowid = ?").execute(arguments: [row.rowID])
            changes.removed.append(contribution(of: row))
            deleted += 1
        }
        return deleted
    }

    /// Every item in the file, whatever its group (for `dump-keychain`); locked classes are skipped.
    public func allItems(includingSecrets: Bool) throws(KeychainError) -> [FoundItem] {
        applyAutoLock()
        return try read { db in
            var out: [FoundItem] = []
            let cursor = try Row.fetchCursor(db, sql: "SELECT \(ItemRow.columns) FROM items ORDER BY rowid")
            while let row = try cursor.nextItemRow() {
                guard let cls = Accessibility(rawValue: row.accessibility), classKey(cls) != nil else { continue }
                let (item, _) = try openMeta(row)
                var secret: SecretBytes?
                if includingSecrets && item.accessControl == nil { secret = try openSecret(row, item: item, query: nil) }
                out.append(FoundItem(item: item, secret: secret))
            }
            return out
        }
    }

    // MARK: - Rows

    struct SealedItem {
        var uuid: Data
        var kind: String
        var accessibility: String
        var sync: Int64
        var generation: Int64
        var primaryIndex: Data
        var groupIndex: Data
        var accountIndex: Data
        var serviceIndex: Data
        var meta: Data
        var wrappedKey: Data
        var secret: Data

        func identity(rowID: Int64) -> RowIdentity {
            RowIdentity(rowID: rowID, uuid: uuid, kind: kind, accessibility: accessibility, sync: sync,
                        generation: generation, primaryIndex: primaryIndex, groupIndex: groupIndex,
                        accountIndex: accountIndex, serviceIndex: serviceIndex)
        }
    }

    /// Decides whether a protected item may be read (Apple's `od` operation), asking the user when the call allows
    /// it. Returns false when the item is to be left out (UI Skip).
    ///
    /// UserPresence and DevicePasscode are met by the keychain password (the device passcode here); biometry and a
    /// companion device are not available on this machine, as on a Mac without a sensor.
    func authorize(_ item: Item, _ query: ItemQuery, db: Database) throws(KeychainError) -> Bool {
        guard let ac = item.accessControl else { return true }
        let constraints = ac.readConstraints
        if constraints.isEmpty { return true }
        let context = query.authenticationContext
        if context?.isInvalidated == true { throw KeychainError(.authFailed, "the authentication context was invalidated") }
        if context?.isOwnerAuthenticated == true { return true }
        if let context, context.reuseDuration > 0 {
            let last = keys.withLock { $0.lastPasswordEntry }
            if configuration.clock().timeIntervalSince(last) <= context.reuseDuration {
                context.markOwnerAuthenticated()
                return true
            }
        }
        // UI Skip leaves out every item that would need authentication, whatever could satisfy it.
        if query.authenticationUI == .skip { return false }

        // What can meet each constraint here: biometry needs a sensor (and, for CurrentSet, the enrolment the item
        // was bound to); the device passcode is the keychain password; user presence is either; no companion.
        let authenticator = configuration.authenticator
        let enrolmentIntact = ac.boundEnrolment != nil && authenticator.enrolmentFingerprint == ac.boundEnrolment
        let individual: [AccessControl.Flags] = [.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .companion]
            .filter { constraints.contains($0) }
        func meetable(_ flag: AccessControl.Flags) -> Bool {
            switch flag {
            case .biometryAny: authenticator.isAvailable
            case .biometryCurrentSet: authenticator.isAvailable && enrolmentIntact
            case .devicePasscode: hasPassword
            case .userPresence: authenticator.isAvailable || hasPassword
            default: false
            }
        }
        let possible = ac.anyConstraintSuffices ? individual.contains(where: meetable) : individual.allSatisfy(meetable)
        guard possible else {
            throw KeychainError(.authFailed, hasPassword ? "biometry or a companion device is needed and not available"
                                                          : "the keychain has no password (no passcode set)")
        }
        if query.authenticationUI == .fail || context?.interactionNotAllowed == true {
            throw KeychainError.interactionNotAllowed("the item needs authentication")
        }

        var biometryPassed = false
        var passwordPassed = false
        func biometry() throws(KeychainError) -> Bool {
            if biometryPassed { return true }
            switch authenticator.authenticate(reason: promptText(query, fallback: "Authenticate to use a protected item.")) {
            case .success: biometryPassed = true
            case .cancelled: throw KeychainError(.userCanceled)
            case .failure: break
            }
            return biometryPassed
        }
        func password() throws(KeychainError) -> Bool {
            if passwordPassed { return true }
            guard let prompter = try interaction(query) else { return false }
            _ = try ask(prompter, kind: .keychainPassword, query: query,
                    fallback: "An application wants to use a protected keychain item.") { typed throws(KeychainError) in
                // A wrong answer asks again; the back-off (shared with unlocking) ends the prompt at once.
                try ownerPasswordMatches(typed, db: db) ? true : nil
            }
            passwordPassed = true
            return true
        }
        func satisfy(_ flag: AccessControl.Flags) throws(KeychainError) -> Bool {
            switch flag {
            case .biometryAny, .biometryCurrentSet: return try biometry()
            case .devicePasscode: return try password()
            case .userPresence:
                if authenticator.isAvailable, try biometry() { return true }
                return hasPassword ? try password() : false
            default: return false
            }
        }
        if ac.anyConstraintSuffices {
            for flag in individual where meetable(flag) {
                if try satisfy(flag) {
                    context?.markOwnerAuthenticated()
                    return true
                }
            }
            throw KeychainError(.authFailed)
        }
        for flag in individual {
            guard try satisfy(flag) else { throw KeychainError(.authFailed) }
        }
        context?.markOwnerAuthenticated()
        return true
    }

    /// Binds a BiometryCurrentSet item to the enrolment current now (nothing enrolled: nothing to bind).
    private func bindEnrolment(_ item: inout Item) throws(KeychainError) {
        guard var ac = item.accessControl, ac.flags.contains(.biometryCurrentSet) else { return }
        ac.boundEnrolment = configuration.authenticator.enrolmentFingerprint
        item.accessControl = ac
    }

    /// The prompter a call may use: nil means leave the item out (UI Skip); no way to ask is an error.
    private func interaction(_ query: ItemQuery) throws(KeychainError) -> (any Prompter)? {
        if query.authenticationUI == .skip { return nil }
        if query.authenticationUI == .fail || query.authenticationContext?.interactionNotAllowed == true {
            throw KeychainError.interactionNotAllowed("the item needs authentication")
        }
        guard let prompter = query.authenticationContext?.prompter ?? configuration.prompter else {
            throw KeychainError.interactionNotAllowed("the item needs authentication and nobody can be asked")
        }
        return prompter
    }

    private func promptText(_ query: ItemQuery?, fallback: String) -> String {
        if let prompt = query?.operationPrompt, !prompt.isEmpty { return prompt }
        if let reason = query?.authenticationContext?.localizedReason, !reason.isEmpty { return reason }
        return fallback
    }

    /// The application password an item needs to be written, from the context or, if allowed, asked for.
    private func applicationPasswordForWriting(_ item: Item, _ query: ItemQuery) throws(KeychainError) -> SecretBytes? {
        guard item.accessControl?.needsApplicationPassword == true else { return nil }
        if let password = query.authenticationContext?.applicationPassword { return password }
        guard let prompter = try interaction(query) else { throw KeychainError.interactionNotAllowed() }
        let request = PasswordRequest(
            kind: .applicationPassword, description: promptText(query, fallback: "Choose the item's application password."),
            prompt: "Application password:")
        switch prompter.requestPassword(request) {
        case .entered(let password):
            query.authenticationContext?.setApplicationPassword(password)
            return password
        case .cancelled: throw KeychainError(.userCanceled)
        case .unavailable: throw KeychainError.interactionNotAllowed("no way to ask for the application password")
        }
    }

    private func insert(_ s: SealedItem, db: Database, changes: inout Manifest.Changes) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO items (rowid, uuid, kind, class, sync, gen, primary_index, group_index, account_index,
                  service_index, meta, wrapped_key, secret) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
                nil as Int64?, s.uuid, s.kind, s.accessibility, s.sync, s.generation, s.primaryIndex, s.groupIndex,
                s.accountIndex, s.serviceIndex, s.meta, s.wrappedKey, s.secret,
            ])
        changes.added.append(Manifest.contribution(s.identity(rowID: db.lastInsertedRowID), key: deviceKeys.manifestKey))
    }

    /// Rewrites a row in place (one UPDATE: only the indexes whose values change are touched).
    private func replace(rowID: Int64, with s: SealedItem, db: Database, changes: inout Manifest.Changes) throws {
        try db.cachedStatement(
            sql: """
                UPDATE items SET uuid = ?, kind = ?, class = ?, sync = ?, gen = ?, primary_index = ?, group_index = ?,
                  account_index = ?, service_index = ?, meta = ?, wrapped_key = ?, secret = ?, secret_binding = NULL
                  WHERE rowid = ?
                """
        ).execute(arguments: [
            s.uuid, s.kind, s.accessibility, s.sync, s.generation, s.primaryIndex, s.groupIndex, s.accountIndex,
            s.serviceIndex, s.meta, s.wrappedKey, s.secret, rowID,
        ])
        changes.added.append(Manifest.contribution(s.identity(rowID: rowID), key: deviceKeys.manifestKey))
    }

    private func contribution(of row: ItemRow) -> [UInt8] {
        Manifest.contribution(row.identity, key: deviceKeys.manifestKey)
    }

    func classKey(_ cls: Accessibility) -> (SymmetricKey, SymmetricKey)? {
        keys.withLock { keys in
            guard let ck = keys.classKeys[cls], let mk = keys.metadataKeys[cls] else { return nil }
            return (ck, mk)
        }
    }

    private func lockedError(_ cls: Accessibility) -> KeychainError {
        .interactionNotAllowed("the keychain is locked")
    }

    /// The attribute whose blind index sits in `service_index` for each class.
    static func serviceCode(_ cls: ItemClass) -> String? {
        switch cls {
        case .genericPassword: "svce"
        case .internetPassword: "srvr"
        case .key: "atag"
        case .certificate: "slnr"
        case .identity: nil
        }
    }

    static func accountCode(_ cls: ItemClass) -> String? {
        switch cls {
        case .genericPassword, .internetPassword: "acct"
        case .key: "klbl"
        case .certificate: "issr"
        case .identity: nil
        }
    }

    private func indexBytes(_ value: AttributeValue?, code: String, cls: ItemClass) -> [UInt8] {
        let kind = Schema.attributes(of: cls)[code]?.kind ?? .blob
        return (value ?? kind.defaultValue).matchKey(for: kind)
    }

    func seal(_ item: Item, secret: SecretBytes, generation: Int64, applicationPassword: SecretBytes? = nil)
        throws(KeychainError) -> SealedItem
    {
        let header = self.header.withLock { $0 }
        let cls = item.accessibility
        guard let (classKey, metaKey) = classKey(cls) else { throw lockedError(cls) }
        let uuid = uuidData(item.uuid)
        let kind = item.itemClass.rawValue
        let sync: Int64 = item.isSynchronizable ? 1 : 0
        let primaryIndex = deviceKeys.primaryIndex(item.primaryKeyBytes)
        let accountCode = Self.accountCode(item.itemClass) ?? "acct"
        let serviceCode = Self.serviceCode(item.itemClass) ?? "svce"
        do {
            var metaAAD = AAD("kc1/meta")
            metaAAD.append(header.dbUUID); metaAAD.append(uuid); metaAAD.append(kind); metaAAD.append(cls.rawValue)
            metaAAD.append(sync); metaAAD.append(generation)
            let meta = try Sealing.seal(ItemCodec.encode(item), key: metaKey, aad: metaAAD.bytes)

            let itemKey = SymmetricKey.random()
            let secretAAD = Self.secretAAD(header: header, uuid: uuid, kind: kind, cls: cls, generation: generation,
                                           binding: nil)
            var padded = SecretPadding.pad(secret)
            defer { padded.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
            let sealedSecret = try Sealing.seal(padded, key: itemKey, aad: secretAAD)

            var keyBytes = itemKey.bytes
            defer { keyBytes.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
            if item.accessControl?.needsApplicationPassword == true {
                guard let applicationPassword else { throw KeychainError.interactionNotAllowed() }
                // A second wrap under a key only the application password yields (CRYPTO-DESIGN §5 APP-PW).
                keyBytes = try ApplicationPasswordLayer.wrap(
                    keyBytes, password: applicationPassword, kdf: header.kdf,
                    aad: ApplicationPasswordLayer.aad(header: header, uuid: uuid, generation: generation))
            }
            let wrappedKey = try Sealing.seal(
                keyBytes, key: classKey,
                aad: itemKeyAAD(header: header, uuid: uuid, cls: cls, generation: generation, primaryIndex: primaryIndex))
            return SealedItem(
                uuid: uuid, kind: kind, accessibility: cls.rawValue, sync: sync, generation: generation,
                primaryIndex: primaryIndex,
                groupIndex: deviceKeys.groupIndex(item.accessGroup, kind: kind),
                accountIndex: deviceKeys.accountIndex(
                    indexBytes(item.effectiveValue(accountCode), code: accountCode, cls: item.itemClass), kind: kind),
                serviceIndex: deviceKeys.serviceIndex(
                    indexBytes(item.effectiveValue(serviceCode), code: serviceCode, cls: item.itemClass), kind: kind),
                meta: meta, wrappedKey: wrappedKey, secret: sealedSecret)
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.internalComponent, "sealing failed")
        }
    }

    private func itemKeyAAD(header: FileHeader, uuid: Data, cls: Accessibility, generation: Int64, primaryIndex: Data)
        -> [UInt8]
    {
        var aad = AAD("kc1/ik")
        aad.append(header.dbUUID); aad.append(uuid); aad.append(cls.rawValue); aad.append(Int64(1))
        aad.append(generation); aad.append(primaryIndex)
        return aad.bytes
    }

    /// Decrypts a row's metadata; its class key must be available.
    func openMeta(_ row: ItemRow) throws(KeychainError) -> (Item, Accessibility) {
        let header = self.header.withLock { $0 }
        guard let cls = Accessibility(rawValue: row.accessibility), let itemClass = ItemClass(rawValue: row.kind) else {
            throw KeychainError.decode("row")
        }
        guard let (_, metaKey) = classKey(cls) else { throw lockedError(cls) }
        var aad = AAD("kc1/meta")
        aad.append(header.dbUUID); aad.append(row.uuid); aad.append(row.kind); aad.append(cls.rawValue)
        aad.append(row.sync); aad.append(row.generation)
        let plain = try Sealing.open(row.meta, key: metaKey, aad: aad.bytes)
        let item: Item
        do { item = try ItemCodec.decode(plain, itemClass: itemClass, uuid: try uuid(row.uuid)) } catch {
            throw KeychainError.decode("metadata")
        }
        // The clear columns must agree with what the sealed metadata says.
        guard item.accessibility == cls, (item.isSynchronizable ? 1 : 0) == row.sync else {
            throw KeychainError.decode("row does not match its metadata")
        }
        return (item, cls)
    }

    /// Decrypts a row's secret: unwrap the item key with the class key, then open the secret.
    func openSecret(_ row: ItemRow, item: Item, query: ItemQuery?) throws(KeychainError) -> SecretBytes {
        let header = self.header.withLock { $0 }
        let cls = item.accessibility
        guard let (classKey, _) = classKey(cls) else { throw lockedError(cls) }
        let uuidBytes = row.uuid
        let generation = row.generation
        var rawKey = try Sealing.open(
            row.wrappedKey, key: classKey,
            aad: itemKeyAAD(header: header, uuid: uuidBytes, cls: cls, generation: generation,
                            primaryIndex: row.primaryIndex))
        defer { rawKey.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        var keyData = Data()
        defer { keyData.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        if item.accessControl?.needsApplicationPassword == true {
            keyData = try unwrapApplicationLayer(rawKey, item: item, query: query, header: header, uuid: uuidBytes,
                                                 generation: generation)
        }
        // The item key lives on only inside SymmetricKey, which wipes itself; the decrypted copies above are wiped.
        let itemKey = SymmetricKey(data: keyData.isEmpty ? rawKey : keyData)
        let aad = Self.secretAAD(header: header, uuid: uuidBytes, kind: item.itemClass.rawValue, cls: cls,
                                 generation: generation, binding: row.secretBinding)
        var padded = try Sealing.open(row.secret, key: itemKey, aad: aad)
        return try SecretPadding.unpad(&padded)
    }

    /// What a secret is sealed against: the item's identity, class and generation. Rows written by format 1 were
    /// also bound to their metadata ciphertext's hash, kept in `secret_binding` since (so the metadata can be sealed
    /// again without the secret).
    static func secretAAD(header: FileHeader, uuid: Data, kind: String, cls: Accessibility, generation: Int64,
                          binding: Data?) -> [UInt8] {
        var aad = AAD(binding == nil ? "kc2/sec" : "kc1/sec")
        aad.append(header.dbUUID); aad.append(uuid); aad.append(kind)
        aad.append(cls.rawValue); aad.append(generation)
        if let binding { aad.append(binding) }
        return aad.bytes
    }

    /// Moves a row from an old class key to a new one (a password change): the item-key blob is wrapped again and
    /// the metadata sealed again under the new metadata key. The secret is untouched: it is sealed under its own
    /// item key (behind an application password too, for such items), which the new wrap carries.
    func rewrap(_ row: ItemRow, from oldKey: SymmetricKey, to newKey: SymmetricKey, header: FileHeader, db: Database)
        throws
    {
        guard let cls = Accessibility(rawValue: row.accessibility) else { throw KeychainError.decode("row") }
        let keyAAD = itemKeyAAD(header: header, uuid: row.uuid, cls: cls, generation: row.generation,
                                primaryIndex: row.primaryIndex)
        var keyBlob = try Sealing.open(row.wrappedKey, key: oldKey, aad: keyAAD)
        defer { keyBlob.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        let wrappedKey = try Sealing.seal(keyBlob, key: newKey, aad: keyAAD)
        var metaAAD = AAD("kc1/meta")
        metaAAD.append(header.dbUUID); metaAAD.append(row.uuid); metaAAD.append(row.kind); metaAAD.append(cls.rawValue)
        metaAAD.append(row.sync); metaAAD.append(row.generation)
        var plain = try Sealing.open(row.meta, key: KeyHierarchy.metadataKey(classKey: oldKey, header: header),
                                     aad: metaAAD.bytes)
        defer { plain.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        let meta = try Sealing.seal(plain, key: KeyHierarchy.metadataKey(classKey: newKey, header: header),
                                    aad: metaAAD.bytes)
        // A format-1 row keeps its binding; a format-2 row has none (its secret is not bound to the metadata).
        try db.cachedStatement(sql: "UPDATE items SET wrapped_key = ?, meta = ? WHERE rowid = ?")
            .execute(arguments: [wrappedKey, meta, row.rowID])
    }

    /// Opens the application-password layer with the context's password, or asks (five tries).
    private func unwrapApplicationLayer(_ inner: Data, item: Item, query: ItemQuery?, header: FileHeader, uuid: Data,
                                        generation: Int64) throws(KeychainError) -> Data {
        let aad = ApplicationPasswordLayer.aad(header: header, uuid: uuid, generation: generation)
        let context = query?.authenticationContext
        if let password = context?.applicationPassword {
            if let key = try? ApplicationPasswordLayer.unwrap(inner, password: password, aad: aad) { return key }
            // A wrong password is dropped from the context and the user is asked again (Apple's retry loop).
            context?.setApplicationPassword(nil)
        }
        guard let query, let prompter = try interaction(query) else { throw KeychainError.interactionNotAllowed() }
        return try ask(prompter, kind: .applicationPassword, query: query,
                       fallback: "An application wants to use an item protected by its own password.") { typed in
            guard let key = try? ApplicationPasswordLayer.unwrap(inner, password: typed, aad: aad) else { return nil }
            context?.setApplicationPassword(typed)
            return key
        }
    }

    /// Asks for a password up to five times; `check` returns nil for a wrong one. Cancel is errSecUserCanceled, no
    /// way to ask errSecInteractionNotAllowed, five wrong answers errSecAuthFailed (and nothing lasting).
    private func ask<T>(_ prompter: any Prompter, kind: PasswordRequest.Kind, query: ItemQuery, fallback: String,
                        check: (SecretBytes) throws(KeychainError) -> T?) throws(KeychainError) -> T {
        var error: String?
        for _ in 0..<5 {
            let request = PasswordRequest(
                kind: kind, description: promptText(query, fallback: fallback),
                prompt: kind == .keychainPassword ? "Keychain password:" : "Application password:", error: error)
            switch prompter.requestPassword(request) {
            case .cancelled: throw KeychainError(.userCanceled)
            case .unavailable: throw KeychainError.interactionNotAllowed("no way to ask for the password")
            case .entered(let typed):
                if let value = try check(typed) { return value }
                error = "Wrong password, try again."
            }
        }
        throw KeychainError(.authFailed)
    }

    /// The rows that may match: narrowed in SQL by class, sync flag, blind indexes and persistent reference.
    private func candidates(for query: ItemQuery, db: Database) throws -> RowCursor {
        let (sql, arguments) = candidateSQL(for: query)
        return try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
    }

    /// The candidates read in full first, for calls that change rows while going through them.
    private func candidateRows(for query: ItemQuery, db: Database) throws -> [ItemRow] {
        let (sql, arguments) = candidateSQL(for: query)
        let cursor = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
        var rows: [ItemRow] = []
        while let row = try cursor.nextItemRow() { rows.append(row) }
        return rows
    }

    private func candidateSQL(for query: ItemQuery) -> (String, StatementArguments) {
        var clauses = ["kind = ?"]
        var arguments: [any DatabaseValueConvertible] = [query.itemClass.rawValue]
        switch query.sync {
        case .nonSynchronizable: clauses.append("sync = 0")
        case .synchronizable: clauses.append("sync = 1")
        case .any: break
        }
        if let accessibility = query.accessibility {
            clauses.append("class = ?")
            arguments.append(accessibility.rawValue)
        }
        let kind = query.itemClass.rawValue
        if let group = query.accessGroup {
            clauses.append("group_index = ?")
            arguments.append(deviceKeys.groupIndex(group, kind: kind))
        }
        if let code = Self.serviceCode(query.itemClass), let value = query.attributes[code] {
            clauses.append("service_index = ?")
            arguments.append(deviceKeys.serviceIndex(indexBytes(value, code: code, cls: query.itemClass), kind: kind))
        }
        if let code = Self.accountCode(query.itemClass), let value = query.attributes[code] {
            clauses.append("account_index = ?")
            arguments.append(deviceKeys.accountIndex(indexBytes(value, code: code, cls: query.itemClass), kind: kind))
        }
        if let ref = query.persistentReference {
            switch ref.identifier {
            case .uuid(let u):
                clauses.append("uuid = ?")
                arguments.append(uuidData(u))
            case .rowID(let r):
                clauses.append("rowid = ?")
                arguments.append(r)
            }
        }
        let sql = "SELECT \(ItemRow.columns) FROM items WHERE " + clauses.joined(separator: " AND ") + " ORDER BY rowid"
        return (sql, StatementArguments(arguments))
    }
}
