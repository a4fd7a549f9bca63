import Crypto
import Foundation
import GRDB
import KeychainCore
import Logging
import Synchronization

extension KeychainFile {
    /// How often a write that read its rows outside the transaction (so that slow work, an application password's
    /// KDF, holds no transaction) starts again when
    /// another writer changed them meanwhile. Each retry means another writer made progress, so this bounds the
    /// wait under contention, not correctness.
    static let optimisticAttempts = 8

    // MARK: - The four calls

    /// Adds an item (`SecItemAdd`). Returns what was stored, secret included when the query asks for data.
    public func add(_ query: ItemQuery, caller: Caller, grants: AccessGrants = AccessGrants()) throws(KeychainError)
        -> FoundItem
    {
        applyAutoLock()
        var item = try newItem(query, caller: caller, now: configuration.clock())
        try bindEnrolment(&item)
        if item.accessibility == .whenPasscodeSetThisDeviceOnly && !hasPassword {
            // Apple remaps the underlying errSecDecode to errSecAuthFailed for akpu without a passcode.
            throw KeychainError(.authFailed, "WhenPasscodeSet needs a keychain password")
        }
        let secret = query.valueData ?? SecretBytes(Data())
        let appPassword = try applicationPasswordForWriting(item, query, grants: grants)
        let sealed = try seal(item, secret: secret, generation: 1, applicationPassword: appPassword)
        try write { db, changes in
            try insert(sealed, db: db, changes: &changes)
        }
        AccessTrail.noteAdded(item, keychain: filePath)
        configuration.logger.debug("item.add", metadata: ["item.class": "\(item.itemClass.rawValue)"])
        return FoundItem(item: item, secret: query.returnTypes.contains(.data) ? secret : nil)
    }

    /// Adds the item `query` describes or, when its duplicate (the same primary key: Apple's rule for
    /// errSecDuplicateItem) exists, applies `changes` to that one item; one transaction, so no other process can
    /// slip in between, and only the duplicate itself is touched, never other items a partial query would match.
    ///
    /// A duplicate whose update may need more than the call brings (an ACL, an application password, a program its
    /// trusted list does not name) is found in a snapshot, authorised and sealed outside any transaction (opening an
    /// application password is slow), then committed only if the row is still as it was read (else start again).
    ///
    /// - Returns: true when an item was added, false when the duplicate was updated.
    @discardableResult
    public func addOrUpdate(_ query: ItemQuery, changes: ItemUpdate, caller: Caller,
                            grants: AccessGrants = AccessGrants()) throws(KeychainError) -> Bool {
        applyAutoLock()
        if let group = changes.accessGroup { try AccessEvaluator.checkWritable(group, caller: caller) }
        let now = configuration.clock()
        var item = try newItem(query, caller: caller, now: now)
        try bindEnrolment(&item)
        let newAccessibility = changes.accessControl?.protection ?? changes.accessibility ?? item.accessibility
        if newAccessibility == .whenPasscodeSetThisDeviceOnly && !hasPassword {
            throw KeychainError(.authFailed, "WhenPasscodeSet needs a keychain password")
        }
        let primaryIndex = deviceKeys.primaryIndex(item.primaryKeyBytes)

        /// Whether bringing the duplicate up to date may need more than the call brings: then it is prepared
        /// outside any transaction.
        func mayNeedMore(_ old: Item) -> Bool {
            mayNeedAuthentication(old) || AccessEvaluator.needsConsent(.change, on: old, by: caller, grants: grants)
                || changes.accessControl?.needsApplicationPassword == true
        }
        /// The duplicate's next version.
        func nextVersion(of row: ItemRow, _ old: Item) throws(KeychainError) -> SealedItem {
            // The duplicate is in the group the new item would get, which the caller may write.
            guard try permit(changes.changesAccess ? .changeAccess : .change, old, caller: caller, grants: grants,
                             query: query)
            else { throw KeychainError.duplicateItem() }
            var updated = try ItemRules.applying(changes, to: old, caller: caller, now: now)
            if changes.accessControl != nil { try bindEnrolment(&updated) }
            var secret: SecretBytes
            if let given = changes.valueData { secret = given } else {
                secret = try openSecret(row, item: old, query: query, grants: grants)
            }
            return try seal(updated, secret: secret, generation: row.generation + 1,
                            applicationPassword: applicationPasswordForWriting(updated, query, grants: grants))
        }

        // The new item is sealed first, outside (its application password may be asked for).
        let newItem = try seal(item, secret: query.valueData ?? SecretBytes(Data()), generation: 1,
                               applicationPassword: applicationPasswordForWriting(item, query, grants: grants))
        for _ in 0..<Self.optimisticAttempts {
            // A duplicate that may need more than the call brings is read and prepared with nothing held; one that
            // cannot (the common case) is updated inside the transaction itself, so racing writers always make progress.
            let existing = try read { db in try RawRows.item(kind: item.itemClass.rawValue, primaryIndex: primaryIndex, db: db) }
            var prepared: SealedItem?
            if let row = existing {
                let (old, _) = try openMeta(row)
                if mayNeedMore(old) { prepared = try nextVersion(of: row, old) }
            }
            let added = try write { db, manifestChanges -> Bool? in
                guard let current = try RawRows.item(kind: item.itemClass.rawValue, primaryIndex: primaryIndex, db: db)
                else {
                    try insert(newItem, db: db, changes: &manifestChanges)
                    return true
                }
                let sealed: SealedItem
                if let prepared, current.rowID == existing?.rowID, current.uuid == existing?.uuid,
                    current.generation == existing?.generation
                {
                    sealed = prepared
                } else {
                    let (old, _) = try openMeta(current)
                    guard !mayNeedMore(old) else { return nil }  // changed meanwhile into one that may: again
                    sealed = try nextVersion(of: current, old)
                }
                manifestChanges.removed.append(contribution(of: current))
                try replace(rowID: current.rowID, with: sealed, db: db, changes: &manifestChanges)
                return false
            }
            if let added {
                if added { AccessTrail.noteAdded(item, keychain: filePath) }
                configuration.logger.debug("item.upsert", metadata: ["item.added": "\(added)"])
                return added
            }
        }
        throw KeychainError(.internalComponent, "the item kept changing while it was being stored; try again")
    }

    /// Adds several items in one transaction (an import): all of them, or none if any fails.
    public func addAll(_ queries: [ItemQuery], caller: Caller, grants: AccessGrants = AccessGrants()) throws(KeychainError) {
        applyAutoLock()
        let now = configuration.clock()
        var sealed: [SealedItem] = []
        var items: [Item] = []
        sealed.reserveCapacity(queries.count)
        for query in queries {
            let item = try newItem(query, caller: caller, now: now)
            items.append(item)
            if item.accessibility == .whenPasscodeSetThisDeviceOnly && !hasPassword {
                throw KeychainError(.authFailed, "WhenPasscodeSet needs a keychain password")
            }
            sealed.append(try seal(item, secret: query.valueData ?? SecretBytes(Data()), generation: 1,
                                   applicationPassword: applicationPasswordForWriting(item, query, grants: grants)))
        }
        try write { db, changes in
            for s in sealed { try insert(s, db: db, changes: &changes) }
        }
        for item in items { AccessTrail.noteAdded(item, keychain: filePath) }
    }

    /// Finds items (`SecItemCopyMatching`), in insertion order, up to the query's limit.
    ///
    /// - Throws: `errSecItemNotFound` for no match; `errSecInteractionNotAllowed` when a candidate's class key is
    ///   locked.
    public func search(_ query: ItemQuery, caller: Caller, grants: AccessGrants = AccessGrants()) throws(KeychainError)
        -> [FoundItem]
    {
        try search(query, caller: caller, purpose: .read, grants: grants)
    }

    /// Why a search reads secrets: to hand them to the caller, or to run a private-key operation here.
    public enum ReadPurpose: Sendable {
        /// The secret goes to the caller: a private key that must not leave is refused (errSecKeyIsSensitive).
        case read
        /// The key is used where it lives (signing, decryption, key exchange) and never returned; its access
        /// control is checked for that use (PrivateKeyUsage puts the constraints there instead of on reading).
        case keyUse
    }

    public func search(_ query: ItemQuery, caller: Caller, purpose: ReadPurpose,
                       grants: AccessGrants = AccessGrants()) throws(KeychainError) -> [FoundItem] {
        applyAutoLock()
        if let group = query.accessGroup { try AccessEvaluator.checkReadable(group, caller: caller) }
        if query.limit.count == 0 { throw .itemNotFound() }
        let wantsSecret = query.returnTypes.contains(.data)
        // Two phases: the matches are read in one snapshot, then authorised and decrypted with no transaction held
        // (opening an application password is slow).
        let operation: ItemOperation = purpose == .keyUse ? .useKey : wantsSecret ? .readSecret : .readAttributes
        let matches = try read { db -> [(ItemRow, Item)] in
            var out: [(ItemRow, Item)] = []
            var certain = 0  // matches that need no authentication, so cannot drop out below
            try forEachCandidate(for: query, db: db) { row in
                let (item, _) = try openMeta(row)
                guard ItemRules.matches(item, query, caller: caller) else { return true }
                out.append((row, item))
                if !mayNeedAuthentication(item) && !AccessEvaluator.needsConsent(operation, on: item, by: caller, grants: grants) {
                    certain += 1
                }
                if let limit = query.limit.count, certain >= limit { return false }
                return true
            }
            return out
        }
        var found: [FoundItem] = []
        for (row, item) in matches {
            guard try permit(operation, item, caller: caller, grants: grants, query: query) else { continue }
            var secret: SecretBytes?
            // Apple decrypts an item with access-control constraints even for an attribute-only read, so its
            // application password is needed (semantics §5.3): UI Skip leaves the item out, UI Fail without the
            // password is errSecInteractionNotAllowed, UI Allow asks.
            if wantsSecret || item.accessControl?.needsApplicationPassword == true {
                do throws(KeychainError) {
                    let opened = try openSecret(row, item: item, query: query, grants: grants)
                    if wantsSecret { secret = opened }
                } catch {
                    // Skip leaves out an item whose application password is not given; a locked keychain is no skip.
                    if query.authenticationUI == .skip, error.status == .interactionNotAllowed, error.pending == nil { continue }
                    throw error
                }
            }
            found.append(FoundItem(item: item, secret: secret))
            if let limit = query.limit.count, found.count >= limit { break }
        }
        if found.isEmpty { throw .itemNotFound() }
        return found
    }

    /// Updates every match in one transaction (`SecItemUpdate`); a collision changes nothing.
    @discardableResult
    public func update(_ query: ItemQuery, with update: ItemUpdate, caller: Caller,
                       grants: AccessGrants = AccessGrants()) throws(KeychainError) -> Int {
        applyAutoLock()
        if let group = update.accessGroup { try AccessEvaluator.checkWritable(group, caller: caller) }
        if let group = query.accessGroup { try AccessEvaluator.checkReadable(group, caller: caller) }
        let now = configuration.clock()
        let newAccessibility = update.accessControl?.protection ?? update.accessibility
        if newAccessibility == .whenPasscodeSetThisDeviceOnly && !hasPassword {
            throw KeychainError(.authFailed, "WhenPasscodeSet needs a keychain password")
        }
        // Three phases, so that no slow work (an application password's KDF) holds a transaction: read the
        // matches; authorise them and seal their new versions; then, in one write transaction,
        // replace exactly the rows that were read, unchanged since. If another writer changed one meanwhile, start
        // again (a few times) rather than overwrite what it wrote.
        for _ in 0..<Self.optimisticAttempts {
            let matches = try read { db -> [(ItemRow, Item)] in
                var out: [(ItemRow, Item)] = []
                for row in try candidateRows(for: query, db: db) {
                    let (item, _) = try openMeta(row)
                    if ItemRules.matches(item, query, caller: caller) { out.append((row, item)) }
                }
                return out
            }
            var prepared: [(row: ItemRow, sealed: SealedItem)] = []
            for (row, item) in matches {
                guard try permit(update.changesAccess ? .changeAccess : .change, item, caller: caller, grants: grants,
                                 query: query)
                else { continue }
                var newItem = try ItemRules.applying(update, to: item, caller: caller, now: now)
                if update.accessControl != nil { try bindEnrolment(&newItem) }
                var secret: SecretBytes
                if let given = update.valueData { secret = given } else {
                    secret = try openSecret(row, item: item, query: query, grants: grants)
                }
                let appPassword = try applicationPasswordForWriting(newItem, query, grants: grants)
                prepared.append((row, try seal(newItem, secret: secret, generation: row.generation + 1,
                                               applicationPassword: appPassword)))
            }
            if prepared.isEmpty { throw KeychainError.itemNotFound() }
            let count = try write { db, changes -> Int? in
                // Changed by another writer since it was read: write nothing, start again.
                guard try unchanged(prepared.map(\.row), db: db) else { return nil }
                for (row, sealed) in prepared {
                    changes.removed.append(contribution(of: row))
                    try replace(rowID: row.rowID, with: sealed, db: db, changes: &changes)
                }
                return prepared.count
            }
            if let count {
                configuration.logger.debug("item.update", metadata: ["item.count": "\(count)"])
                return count
            }
        }
        throw KeychainError(.internalComponent, "the items kept changing while they were being updated; try again")
    }

    /// Deletes every match (`SecItemDelete`).
    @discardableResult
    public func delete(_ query: ItemQuery, caller: Caller, grants: AccessGrants = AccessGrants()) throws(KeychainError)
        -> Int
    {
        applyAutoLock()
        if let group = query.accessGroup { try AccessEvaluator.checkReadable(group, caller: caller) }
        for _ in 0..<Self.optimisticAttempts {
            let doomed = try deletableMatches(query, caller: caller, grants: grants)
            if doomed.isEmpty { throw KeychainError.itemNotFound() }
            let count = try write { db, changes -> Int? in
                try delete(doomed, db: db, changes: &changes) ? doomed.count : nil
            }
            if let count {
                configuration.logger.debug("item.delete", metadata: ["item.count": "\(count)"])
                return count
            }
        }
        throw KeychainError(.internalComponent, "the items kept changing while they were being deleted; try again")
    }

    /// Deletes every item `matching` selects, then adds the item `query` describes, in one transaction: a
    /// credential's replacement arrives as the old ones go (docker's store), and a failure keeps the old ones.
    ///
    /// - Returns: how many items were deleted.
    @discardableResult
    public func replaceAll(matching: ItemQuery, with query: ItemQuery, caller: Caller,
                           grants: AccessGrants = AccessGrants()) throws(KeychainError) -> Int {
        applyAutoLock()
        if let group = matching.accessGroup { try AccessEvaluator.checkReadable(group, caller: caller) }
        var item = try newItem(query, caller: caller, now: configuration.clock())
        try bindEnrolment(&item)
        if item.accessibility == .whenPasscodeSetThisDeviceOnly && !hasPassword {
            throw KeychainError(.authFailed, "WhenPasscodeSet needs a keychain password")
        }
        let sealed = try seal(item, secret: query.valueData ?? SecretBytes(Data()), generation: 1,
                              applicationPassword: applicationPasswordForWriting(item, query, grants: grants))
        for _ in 0..<Self.optimisticAttempts {
            let doomed = try deletableMatches(matching, caller: caller, grants: grants)
            let deleted = try write { db, changes -> Int? in
                guard try delete(doomed, db: db, changes: &changes) else { return nil }
                try insert(sealed, db: db, changes: &changes)
                return doomed.count
            }
            if let deleted {
                AccessTrail.noteAdded(item, keychain: filePath)
                configuration.logger.debug("item.replace", metadata: ["item.count": "\(deleted)"])
                return deleted
            }
        }
        throw KeychainError(.internalComponent, "the items kept changing while they were being replaced; try again")
    }

    /// The rows a delete of `query` removes, read in one snapshot and authorised with no transaction held.
    private func deletableMatches(_ query: ItemQuery, caller: Caller, grants: AccessGrants) throws(KeychainError)
        -> [ItemRow]
    {
        let matches = try read { db -> [(ItemRow, Item)] in
            try candidateRows(for: query, db: db).compactMap { row in
                let (item, _) = try openMeta(row)
                return ItemRules.matches(item, query, caller: caller) ? (row, item) : nil
            }
        }
        var doomed: [ItemRow] = []
        for (row, item) in matches where try permit(.delete, item, caller: caller, grants: grants, query: query) {
            doomed.append(row)
        }
        return doomed
    }

    /// Deletes exactly `rows`; false (nothing deleted) when any of them changed since it was read.
    private func delete(_ rows: [ItemRow], db: Database, changes: inout Manifest.Changes) throws -> Bool {
        guard try unchanged(rows, db: db) else { return false }
        for row in rows {
            try db.cachedStatement(sql: "DELETE FROM items WHERE rowid = ?").execute(arguments: [row.rowID])
            changes.removed.append(contribution(of: row))
        }
        return true
    }

    /// Whether every one of `rows` is still in the file as it was read (same rowid, identity and generation).
    /// Checked before anything is written, so a transaction that finds a change writes nothing.
    func unchanged(_ rows: [ItemRow], db: Database) throws -> Bool {
        for row in rows {
            let current = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT uuid, gen FROM items WHERE rowid = ?"), arguments: [row.rowID])
            guard let current, try current.required(at: 0) as Data == row.uuid,
                try current.required(at: 1) as Int64 == row.generation
            else { return false }
        }
        return true
    }

    /// Every item in the file the caller may see (for `dump-keychain`; the keychain's tools see every group);
    /// locked classes are skipped.
    /// Secrets are included only for items the caller's program is trusted by (nobody is asked for a listing).
    public func allItems(includingSecrets: Bool, caller: Caller) throws(KeychainError) -> [FoundItem] {
        applyAutoLock()
        return try read { db in
            var out: [FoundItem] = []
            let all = try db.makeStatement(sql: "SELECT \(ItemRow.columns) FROM items ORDER BY rowid")
            try RawRows.forEachItemRow(all, [], db: db) { row in
                guard let cls = Accessibility(rawValue: row.accessibility), classKey(cls) != nil else { return true }
                let (item, _) = try openMeta(row)
                // Every item the caller may see: for keychaind's own tools, every item of the file.
                guard AccessEvaluator.isVisible(item, to: caller, for: .search) else { return true }
                var secret: SecretBytes?
                let readable = AccessEvaluator.decide(
                    .readSecret, on: item, by: caller, keychain: capabilities, grants: AccessGrants(),
                    circumstances: CallCircumstances(interaction: .fail)) == .allow
                if includingSecrets && readable {
                    secret = try openSecret(row, item: item, query: nil, grants: AccessGrants())
                }
                AccessTrail.note(secret == nil ? .readAttributes : .readSecret, item, keychain: filePath, decision: .allow)
                out.append(FoundItem(item: item, secret: secret))
                return true
            }
            return out
        }
    }

    // MARK: - Rows

    func insert(_ s: SealedItem, db: Database, changes: inout Manifest.Changes) throws {
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
    func replace(rowID: Int64, with s: SealedItem, db: Database, changes: inout Manifest.Changes) throws {
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

    func contribution(of row: ItemRow) -> [UInt8] {
        Manifest.contribution(row.identity, key: deviceKeys.manifestKey)
    }

    /// Each row that may match, until `body` returns false: narrowed in SQL by class, sync flag, blind indexes and
    /// persistent reference.
    private func forEachCandidate(for query: ItemQuery, db: Database, _ body: (ItemRow) throws -> Bool) throws {
        let (sql, arguments) = candidateSQL(for: query)
        try RawRows.forEachItemRow(db.cachedStatement(sql: sql), arguments, db: db, body)
    }

    /// The candidates read in full first, for calls that change rows while going through them.
    private func candidateRows(for query: ItemQuery, db: Database) throws -> [ItemRow] {
        let (sql, arguments) = candidateSQL(for: query)
        return try RawRows.allItemRows(db.cachedStatement(sql: sql), arguments, db: db)
    }

    /// The candidates' select and its arguments. (The arguments stay plain values: GRDB's `StatementArguments`
    /// made from them instantiated a key path at every call, a sixth of an in-process find.)
    private func candidateSQL(for query: ItemQuery) -> (String, [DatabaseValue]) {
        // The select's text depends only on which clauses the query has (a bit each), so it is made once per shape;
        // building and joining it per call was a tenth of a find's database work.
        var shape = 0
        var arguments: [DatabaseValue] = [query.itemClass.rawValue.databaseValue]
        arguments.reserveCapacity(6)
        switch query.sync {
        case .nonSynchronizable: shape |= 1
        case .synchronizable: shape |= 2
        case .any: break
        }
        if let accessibility = query.accessibility {
            shape |= 4
            arguments.append(accessibility.rawValue.databaseValue)
        }
        let kind = query.itemClass.rawValue
        if let group = query.accessGroup {
            shape |= 8
            arguments.append(deviceKeys.groupIndex(group, kind: kind).databaseValue)
        }
        if let code = Self.serviceCode(query.itemClass), let value = query.attributes[code] {
            shape |= 16
            arguments.append(deviceKeys.serviceIndex(indexBytes(value, code: code, cls: query.itemClass), kind: kind)
                .databaseValue)
        }
        if let code = Self.accountCode(query.itemClass), let value = query.attributes[code] {
            shape |= 32
            arguments.append(deviceKeys.accountIndex(indexBytes(value, code: code, cls: query.itemClass), kind: kind)
                .databaseValue)
        }
        if let ref = query.persistentReference {
            switch ref.identifier {
            case .uuid(let u):
                shape |= 64
                arguments.append(uuidData(u).databaseValue)
            case .rowID(let r):
                shape |= 128
                arguments.append(r.databaseValue)
            }
        }
        return (Self.candidateSelects[shape], arguments)
    }

    /// The candidates' select for each shape of ``candidateSQL(for:)``, its clauses in the arguments' order.
    private static let candidateSelects: [String] = (0..<256).map { shape in
        var clauses = ["kind = ?"]
        if shape & 1 != 0 { clauses.append("sync = 0") }
        if shape & 2 != 0 { clauses.append("sync = 1") }
        if shape & 4 != 0 { clauses.append("class = ?") }
        if shape & 8 != 0 { clauses.append("group_index = ?") }
        if shape & 16 != 0 { clauses.append("service_index = ?") }
        if shape & 32 != 0 { clauses.append("account_index = ?") }
        if shape & 64 != 0 { clauses.append("uuid = ?") }
        if shape & 128 != 0 { clauses.append("rowid = ?") }
        return "SELECT \(ItemRow.columns) FROM items WHERE " + clauses.joined(separator: " AND ") + " ORDER BY rowid"
    }
}
