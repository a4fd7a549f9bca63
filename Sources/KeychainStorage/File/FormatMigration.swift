import Crypto
import Foundation
import GRDB
import KeychainCore
import Synchronization

/// Brings a format-1 file to format 2, in one transaction, with the device key alone (no unlock needed):
/// - the group, account and service indexes get a per-class key (``DeviceKeys/classIndex(_:kind:column:)``),
///   computed from the stored format-1 values;
/// - the manifest covers each row's rowid and index columns, and its MAC covers the format number;
/// - each row records the metadata hash its secret was sealed against (`secret_binding`).
///
/// The format-1 manifest is checked in full first (MAC and every row): re-MACing an unchecked file would bless
/// whatever was done to it. Another process may migrate first; the transaction then finds format 2 and stops.
extension KeychainFile {
    func migrateIfNeeded() throws(KeychainError) {
        let header = self.header.withLock { $0 }
        let keys = deviceKeys
        do {
            try database.write { db in
                guard try Int.fetchOne(db, sql: "SELECT format FROM kc_meta") == 1 else { return }
                var manifest = try Manifest.load(db)
                guard let mac = try Data.fetchOne(db, sql: "SELECT manifest_mac FROM kc_meta"),
                    manifest.verify(mac, key: keys.manifestKey, header: header, format: 1)
                else { throw KeychainError(.decode, "the keychain's manifest does not verify") }
                let v1 = try Self.scanRows(db) { Manifest.contributionV1($0, key: keys.manifestKey) }
                guard v1.digest == manifest.digest, v1.count == manifest.count else {
                    throw KeychainError(.decode, "the keychain's items do not match its manifest")
                }
                try db.execute(sql: FileSchema.secretBindingSQL)
                try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES (?)",
                               arguments: [FileSchema.secretBindingMigration])
                for row in try Row.fetchAll(db, sql: "SELECT rowid, meta FROM items") {
                    let meta: Data = try row.required(at: 1)
                    try db.execute(sql: "UPDATE items SET secret_binding = ? WHERE rowid = ?",
                                   arguments: [Data(SHA256.hash(data: meta)), row[0] as Int64])
                }
                var identities: [RowIdentity] = []
                try RawRows.forEachRow(db.makeStatement(sql: "SELECT \(RowIdentity.columns) FROM items"), [], db: db) {
                    identities.append(try RowIdentity($0))
                    return true
                }
                var digest = [UInt8](repeating: 0, count: 32)
                for var identity in identities {
                    identity.groupIndex = keys.classIndex(identity.groupIndex, kind: identity.kind, column: "group")
                    identity.accountIndex = keys.classIndex(identity.accountIndex, kind: identity.kind, column: "account")
                    identity.serviceIndex = keys.classIndex(identity.serviceIndex, kind: identity.kind, column: "service")
                    try db.execute(
                        sql: "UPDATE items SET group_index = ?, account_index = ?, service_index = ? WHERE rowid = ?",
                        arguments: [identity.groupIndex, identity.accountIndex, identity.serviceIndex, identity.rowID])
                    let c = Manifest.contribution(identity, key: keys.manifestKey)
                    for i in 0..<32 { digest[i] ^= c[i] }
                }
                manifest.digest = Data(digest)
                manifest.epoch += 1
                try db.execute(sql: "UPDATE kc_meta SET format = ?", arguments: [FileSchema.formatVersion])
                try manifest.store(db, mac: manifest.mac(key: keys.manifestKey, header: header))
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw StorageErrors.map(error)
        }
    }
}
