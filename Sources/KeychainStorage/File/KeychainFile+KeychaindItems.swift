import Foundation
import GRDB
import KeychainCore

/// A secret keychaind keeps for itself in a keychain: the sync state, the access log's private key. Each is a
/// generic password in a group no caller sees or writes (``Caller/isKeychaindOwn(_:)``), bound to this device,
/// sealed like every item (so a password change re-seals it and the file's manifest covers it). Never in a backup.
public struct KeychaindItem: Sendable {
    let group: String
    let service: String
    let label: String

    /// The sync engine's state (docs/SYNC.md).
    public static let syncState = KeychaindItem(group: Caller.syncStateGroup, service: "swift-keychain sync",
                                                label: "Sync state")
    /// The access log's private key (docs/ACCESS-LOG.md).
    public static let accessLogKey = KeychaindItem(group: Caller.accessLogGroup, service: "swift-keychain access log",
                                                   label: "Access log key")

    func item(now: Date, uuid: UUID) -> Item {
        var item = Item(itemClass: .genericPassword, attributes: [
            "svce": .string(service), "acct": .string("state"), "labl": .string(label),
            "agrp": .string(group), "pdmn": .string(Accessibility.afterFirstUnlockThisDeviceOnly.rawValue),
            "sync": .number(0), "cdat": .date(now.timeIntervalSinceReferenceDate),
            "mdat": .date(now.timeIntervalSinceReferenceDate),
        ], uuid: uuid)
        item.accessModel = .groups
        return item
    }
}

extension KeychainFile {
    func keychaindRow(_ which: KeychaindItem, db: Database) throws -> ItemRow? {
        let item = which.item(now: Date(), uuid: UUID())
        let lookup = "SELECT \(ItemRow.columns) FROM items WHERE kind = ? AND primary_index = ?"
        return try Row.fetchCursor(db.cachedStatement(sql: lookup),
                                   arguments: [ItemClass.genericPassword.rawValue,
                                               deviceKeys.primaryIndex(item.primaryKeyBytes)]).nextItemRow()
    }

    func keychaindSecret(_ which: KeychaindItem, db: Database) throws -> SecretBytes? {
        guard let row = try keychaindRow(which, db: db) else { return nil }
        let (item, _) = try openMeta(row)
        return try openSecret(row, item: item, query: nil, grants: AccessGrants())
    }

    func storeKeychaindSecret(_ which: KeychaindItem, _ secret: SecretBytes, now: Date, db: Database,
                              changes: inout Manifest.Changes) throws {
        if let row = try keychaindRow(which, db: db) {
            var (item, _) = try openMeta(row)
            item.attributes["mdat"] = .date(now.timeIntervalSinceReferenceDate)
            let sealed = try seal(item, secret: secret, generation: row.generation + 1)
            changes.removed.append(contribution(of: row))
            try replace(rowID: row.rowID, with: sealed, db: db, changes: &changes)
        } else {
            try insert(seal(which.item(now: now, uuid: UUID()), secret: secret, generation: 1), db: db, changes: &changes)
        }
    }

    func removeKeychaindSecret(_ which: KeychaindItem) throws(KeychainError) {
        try write { db, changes in
            guard let row = try keychaindRow(which, db: db) else { return }
            try db.cachedStatement(sql: "DELETE FROM items WHERE rowid = ?").execute(arguments: [row.rowID])
            changes.removed.append(contribution(of: row))
        }
    }

    /// keychaind's secret `which` in this keychain, nil when there is none. Needs the keychain unlocked once since
    /// keychaind started.
    public func keychaindSecret(_ which: KeychaindItem) throws(KeychainError) -> SecretBytes? {
        guard classKey(.afterFirstUnlockThisDeviceOnly) != nil else { throw lockedError(.afterFirstUnlockThisDeviceOnly) }
        return try read { db in try keychaindSecret(which, db: db) }
    }

    /// Stores keychaind's secret `which` (replacing the one there).
    public func storeKeychaindSecret(_ which: KeychaindItem, _ secret: SecretBytes) throws(KeychainError) {
        guard classKey(.afterFirstUnlockThisDeviceOnly) != nil else { throw lockedError(.afterFirstUnlockThisDeviceOnly) }
        let now = configuration.clock()
        try write { db, changes in try storeKeychaindSecret(which, secret, now: now, db: db, changes: &changes) }
    }
}
