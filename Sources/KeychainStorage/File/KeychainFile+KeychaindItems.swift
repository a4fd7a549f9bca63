import Foundation
import GRDB
import KeychainCore

/// A secret keychaind keeps in a keychain, for itself or for a program it vouches for: a generic password in a group
/// no caller writes (``Caller/isKeychaindWritten(_:)``), sealed like every item (so a password change re-seals it and
/// the file's manifest covers it).
///
/// - keychaind's own (the sync state, the access log's private key): in a group no caller sees either, bound to
///   this device, never in a backup.
/// - A sandboxed application's secret (the Secret portal): seen in listings as what it is, trusted to no program
///   (any program that reads it is asked about), backed up like any item, so that an application's data encrypted
///   with it can be restored.
public struct KeychaindItem: Sendable {
    let group: String
    let service: String
    let account: String
    let label: String
    let accessibility: Accessibility
    /// nil for keychaind's own items; the programs trusted with an application's secret (none).
    let applicationAccess: ApplicationAccess?

    /// The sync engine's state (docs/SYNC.md).
    public static let syncState = KeychaindItem(group: Caller.syncStateGroup, service: "swift-keychain sync",
                                                account: "state", label: "Sync state",
                                                accessibility: .afterFirstUnlockThisDeviceOnly, applicationAccess: nil)
    /// The access log's private key (docs/ACCESS-LOG.md).
    public static let accessLogKey = KeychaindItem(group: Caller.accessLogGroup, service: "swift-keychain access log",
                                                   account: "state", label: "Access log key",
                                                   accessibility: .afterFirstUnlockThisDeviceOnly, applicationAccess: nil)

    /// The Secret portal's secret of the application `appID` (docs/SECRET-SERVICE.md "Sandboxed applications").
    public static func portalSecret(appID: String) -> KeychaindItem {
        KeychaindItem(group: Caller.portalSecretGroup, service: Caller.portalSecretGroup, account: appID,
                      label: "\(appID) (Secret portal)", accessibility: .afterFirstUnlock, applicationAccess: .trusted([]))
    }

    func item(now: Date, uuid: UUID) -> Item {
        var item = Item(itemClass: .genericPassword, attributes: [
            "svce": .string(service), "acct": .string(account), "labl": .string(label),
            "agrp": .string(group), "pdmn": .string(accessibility.rawValue),
            "sync": .number(0), "cdat": .date(now.timeIntervalSinceReferenceDate),
            "mdat": .date(now.timeIntervalSinceReferenceDate),
        ], applicationAccess: applicationAccess, uuid: uuid)
        item.accessModel = .groups
        return item
    }
}

extension KeychainFile {
    func keychaindRow(_ which: KeychaindItem, db: Database) throws -> ItemRow? {
        let item = which.item(now: Date(), uuid: UUID())
        return try RawRows.item(kind: ItemClass.genericPassword.rawValue,
                                primaryIndex: deviceKeys.primaryIndex(item.primaryKeyBytes), db: db)
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
        guard classKey(which.accessibility) != nil else { throw lockedError(which.accessibility) }
        return try read { db in try keychaindSecret(which, db: db) }
    }

    /// Stores keychaind's secret `which` (replacing the one there).
    public func storeKeychaindSecret(_ which: KeychaindItem, _ secret: SecretBytes) throws(KeychainError) {
        guard classKey(which.accessibility) != nil else { throw lockedError(which.accessibility) }
        let now = configuration.clock()
        try write { db, changes in try storeKeychaindSecret(which, secret, now: now, db: db, changes: &changes) }
    }

    /// The secret `which` holds, made with `make` and stored first when there is none yet, in one transaction (two
    /// callers at once get the same secret). Returns it with its item, and whether it was made now.
    public func keychaindSecret(_ which: KeychaindItem, makingIfMissing make: () -> SecretBytes)
        throws(KeychainError) -> (secret: SecretBytes, item: Item, made: Bool)
    {
        guard classKey(which.accessibility) != nil else { throw lockedError(which.accessibility) }
        let now = configuration.clock()
        return try write { db, changes in
            if let row = try keychaindRow(which, db: db) {
                let (item, _) = try openMeta(row)
                return (try openSecret(row, item: item, query: nil, grants: AccessGrants()), item, false)
            }
            let secret = make()
            let item = which.item(now: now, uuid: UUID())
            try insert(seal(item, secret: secret, generation: 1), db: db, changes: &changes)
            return (secret, item, true)
        }
    }
}
