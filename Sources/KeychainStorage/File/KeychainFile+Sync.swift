import Foundation
import GRDB
import KeychainCore
import Logging

/// What a synchronizable item looks like to sync: its identity, its generation (which changes with every write) and,
/// when asked for, its whole content (attributes, access, secret) as one record.
public struct SynchronizableItem: Sendable {
    public var id: UUID
    public var generation: Int64
    /// ``KeychainFile/syncRecord(_:)``'s bytes; nil in a listing.
    public var record: SecretBytes?
}

/// A change the server holds that this keychain takes.
public enum IncomingSyncChange: Sendable {
    /// A synchronizable item's content (a record another device made with ``KeychainFile/syncRecords(_:)``).
    case item(id: UUID, record: SecretBytes)
    case deleted(id: UUID)
}

/// What ``KeychainFile/applySync(_:state:)`` did.
public struct SyncApplication: Sendable {
    /// The generation each item written now has here.
    public var generations: [UUID: Int64] = [:]
    /// Items removed here because an item with the same primary key and a lower id arrived (Apple's duplicate rule
    /// meets sync: the lower id wins everywhere).
    public var displaced: [UUID] = []
    /// Incoming items not taken because an item here with the same primary key has a lower id.
    public var refused: [UUID] = []
    /// Incoming records this keychain cannot take (not synchronizable, this-device-only, damaged).
    public var unusable: [UUID] = []
    public var written = 0
    public var deleted = 0
}

extension KeychainFile {
    /// Sync is not use of the keychain: it neither keeps it unlocked (no activity is recorded, so background rounds
    /// cannot defeat the idle lock) nor locks it (keychaind's timer does, and announces it). A keychain whose idle
    /// time is up counts as locked.
    private func syncMayUse() throws(KeychainError) {
        if isIdleExpired { throw lockedError(.whenUnlocked) }
    }

    /// The sync state (the sync engine's own encoding), or nil when this keychain does not sync.
    /// Needs the keychain unlocked once since keychaind started.
    public func syncState() throws(KeychainError) -> SecretBytes? {
        try syncMayUse()
        guard classKey(.afterFirstUnlockThisDeviceOnly) != nil else { throw lockedError(.afterFirstUnlockThisDeviceOnly) }
        return try read { db in try keychaindSecret(.syncState, db: db) }
    }

    /// Removes the sync state: this keychain no longer syncs (its items stay).
    public func removeSyncState() throws(KeychainError) {
        try removeKeychaindSecret(.syncState)
    }

    /// Every item that syncs (synchronizable, and not `…ThisDeviceOnly`: such an item is kept, as Apple's securityd
    /// keeps it, but never leaves the device), by id and generation, without opening anything.
    public func synchronizableItems() throws(KeychainError) -> [SynchronizableItem] {
        try syncMayUse()
        let deviceBound = Accessibility.allCases.filter(\.isThisDeviceOnly).map { "'\($0.rawValue)'" }.joined(separator: ", ")
        return try read { db in
            var out: [SynchronizableItem] = []
            let rows = try Row.fetchCursor(db, sql: "SELECT uuid, gen FROM items WHERE sync = 1 AND class NOT IN (\(deviceBound))")
            while let row = try rows.next() {
                let bytes: Data = row[0]
                guard bytes.count == 16 else { throw KeychainError.decode("an item's identity is damaged") }
                let u = Array(bytes)
                let id = UUID(uuid: (u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
                                     u[13], u[14], u[15]))
                out.append(SynchronizableItem(id: id, generation: row[1], record: nil))
            }
            return out
        }
    }

    /// The records of the synchronizable items `ids` (those still here and still synchronizable), for sending.
    /// Every class they are in must be unlocked.
    public func syncRecords(_ ids: [UUID]) throws(KeychainError) -> [SynchronizableItem] {
        try syncMayUse()
        return try read { db in
            var out: [SynchronizableItem] = []
            let lookup = "SELECT \(ItemRow.columns) FROM items WHERE uuid = ? AND sync = 1"
            for id in ids {
                guard let row = try RawRows.firstItemRow(db.cachedStatement(sql: lookup), [uuidData(id).databaseValue],
                                                         db: db)
                else { continue }
                let (item, cls) = try openMeta(row)
                guard !cls.isThisDeviceOnly else { continue }  // never leaves this device
                guard classKey(cls) != nil else { throw lockedError(cls) }
                let secret = try openSecret(row, item: item, query: nil, grants: AccessGrants())
                var bytes = BackupArchive.encodeItem(item, secret: secret)
                out.append(SynchronizableItem(id: id, generation: row.generation,
                                              record: SecretBytes(consuming: &bytes)))
            }
            return out
        }
    }

    /// Takes what the server holds, and the sync state that goes with it, in one transaction: a kill at any instant
    /// leaves the keychain and the state as they were or both updated. Items with the same primary key and
    /// different ids meet by Apple's duplicate rule made deterministic: the lower id wins on every device.
    ///
    /// `state` makes the sync state to store from what was done (the generations the written items now have).
    public func applySync(_ incoming: [IncomingSyncChange],
                          state: (SyncApplication) throws(KeychainError) -> SecretBytes) throws(KeychainError)
        -> SyncApplication
    {
        try syncMayUse()
        guard classKey(.afterFirstUnlockThisDeviceOnly) != nil else { throw lockedError(.afterFirstUnlockThisDeviceOnly) }
        let now = configuration.clock()
        return try write { db, changes -> SyncApplication in
            var result = SyncApplication()
            for change in incoming {
                switch change {
                case .deleted(let id):
                    guard let row = try RawRows.item(uuid: id, db: db),
                          row.sync == 1, !Self.isDeviceBound(row)
                    else { continue }
                    try db.cachedStatement(sql: "DELETE FROM items WHERE rowid = ?").execute(arguments: [row.rowID])
                    changes.removed.append(contribution(of: row))
                    result.deleted += 1
                case .item(let id, let record):
                    let decoded = Result { () throws(KeychainError) in
                        try record.withUnsafeBytes { bytes throws(KeychainError) in
                            try BackupArchive.decodeItem(Data(bytes))
                        }
                    }
                    guard case .success(let (decodedItem, secret)) = decoded, decodedItem.isSynchronizable,
                          !decodedItem.accessibility.isThisDeviceOnly, decodedItem.accessControl == nil,
                          decodedItem.itemClass != .identity, !Caller.isKeychaindOwn(decodedItem.accessGroup)
                    else {
                        result.unusable.append(id)
                        continue
                    }
                    var item = decodedItem
                    item.uuid = id
                    item.accessModel = .groups
                    let existing = try RawRows.item(uuid: id, db: db)
                    if let existing, existing.sync != 1 || Self.isDeviceBound(existing) {
                        result.unusable.append(id)  // the id names an item here that does not sync
                        continue
                    }
                    // Another item with the same primary key: the lower id stays.
                    let primaryIndex = deviceKeys.primaryIndex(item.primaryKeyBytes)
                    if let twin = try RawRows.item(kind: item.itemClass.rawValue, primaryIndex: primaryIndex, db: db),
                       twin.rowID != existing?.rowID
                    {
                        if twin.sync != 1 || Self.isDeviceBound(twin) {
                            result.unusable.append(id)  // an item of this device alone holds that key: both stay
                            continue
                        }
                        if twin.uuid.lexicographicallyPrecedes(uuidData(id)) {
                            // The lower id here wins; this id's copy here (an update that now collides) goes too,
                            // so that the next send deletes it everywhere instead of sending it again.
                            if let existing {
                                try db.cachedStatement(sql: "DELETE FROM items WHERE rowid = ?")
                                    .execute(arguments: [existing.rowID])
                                changes.removed.append(contribution(of: existing))
                            }
                            result.refused.append(id)
                            continue
                        }
                        try db.cachedStatement(sql: "DELETE FROM items WHERE rowid = ?").execute(arguments: [twin.rowID])
                        changes.removed.append(contribution(of: twin))
                        result.displaced.append(uuid(of: twin))
                    }
                    if let existing {
                        let sealed = try seal(item, secret: secret, generation: existing.generation + 1)
                        changes.removed.append(contribution(of: existing))
                        try replace(rowID: existing.rowID, with: sealed, db: db, changes: &changes)
                        result.generations[id] = sealed.generation
                    } else {
                        let sealed = try seal(item, secret: secret, generation: 1)
                        try insert(sealed, db: db, changes: &changes)
                        result.generations[id] = 1
                    }
                    result.written += 1
                }
            }
            try storeKeychaindSecret(.syncState, state(result), now: now, db: db, changes: &changes)
            return result
        }
    }

    /// Writes the sync state alone (setting up, or a round that only sent).
    public func saveSyncState(_ state: SecretBytes) throws(KeychainError) {
        try syncMayUse()
        guard classKey(.afterFirstUnlockThisDeviceOnly) != nil else { throw lockedError(.afterFirstUnlockThisDeviceOnly) }
        let now = configuration.clock()
        try write { db, changes in try storeKeychaindSecret(.syncState, state, now: now, db: db, changes: &changes) }
    }

    /// A `…ThisDeviceOnly` row: sync never sends, replaces or deletes it.
    static func isDeviceBound(_ row: ItemRow) -> Bool {
        Accessibility(rawValue: row.accessibility)?.isThisDeviceOnly ?? true
    }

    private func uuid(of row: ItemRow) -> UUID {
        let u = Array(row.uuid)
        return UUID(uuid: (u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                           u[14], u[15]))
    }
}
