import Foundation
import GRDB
import KeychainCore
import Testing
@testable import KeychainStorage

/// What the keychain file gives sync and takes from it (docs/SYNC.md).
@Suite("Sync storage")
struct SyncStorageTests {
    @Test("only synchronizable items that may leave the device are offered: …ThisDeviceOnly ones stay, as on Apple's")
    func thisDeviceOnlyNeverLeaves() throws {
        let t = try TestFile(password: "pw")
        for cls in ["ak", "ck", "dk", "aku", "cku", "dku"] {
            try t.add(["class": "genp", "acct": .string(cls), "svce": "sync", "pdmn": .string(cls), "sync": true,
                       "v_Data": .data(Data("secret \(cls)".utf8))])
        }
        try t.add(["class": "genp", "acct": "local", "svce": "sync", "v_Data": .data(Data("not synchronizable".utf8))])
        let offered = try t.file.synchronizableItems()
        #expect(offered.count == 3)
        let records = try t.file.syncRecords(offered.map(\.id))
        #expect(records.count == 3)
        // What a record holds opens again as the item it was made from.
        for record in records {
            let (item, secret) = try record.record!.withUnsafeBytes { bytes throws(KeychainError) in
                try BackupArchive.decodeItem(Data(bytes))
            }
            #expect(["ak", "ck", "dk"].contains(item.attributes["acct"]?.stringValue ?? ""))
            #expect(secret.unprotectedString()?.hasPrefix("secret ") == true)
            #expect(item.isSynchronizable)
        }
    }

    @Test("an incoming record that is not synchronizable, is …ThisDeviceOnly or aims at keychaind's own group is not taken")
    func unusableRecordsRefused() throws {
        let source = try TestFile(password: "pw")
        try source.add(["class": "genp", "acct": "ok", "svce": "s", "sync": true, "v_Data": .data(Data("fine".utf8))])
        try source.add(["class": "genp", "acct": "local", "svce": "s", "v_Data": .data(Data("x".utf8))])
        try source.add(["class": "genp", "acct": "bound", "svce": "s", "sync": true, "pdmn": "aku",
                        "v_Data": .data(Data("x".utf8))])
        // Records made from every row, as a misbehaving device could send them.
        let rows = try source.file.read { db in try Data.fetchAll(db, sql: "SELECT uuid FROM items") }
        var incoming: [IncomingSyncChange] = []
        for row in rows {
            let id = UUID(uuid: Array(row).withUnsafeBytes { $0.load(as: uuid_t.self) })
            let (item, secret) = try source.file.read { db in
                let r = try RawRows.firstItemRow(
                    db.makeStatement(sql: "SELECT \(ItemRow.columns) FROM items WHERE uuid = ?"), [row.databaseValue], db: db)!
                let (item, _) = try source.file.openMeta(r)
                return (item, try source.file.openSecret(r, item: item, query: nil, grants: AccessGrants()))
            }
            var bytes = BackupArchive.encodeItem(item, secret: secret)
            incoming.append(.item(id: id, record: SecretBytes(consuming: &bytes)))
        }
        let target = try TestFile(password: "other")
        let applied = try target.file.applySync(incoming) { _ throws(KeychainError) in SecretBytes(utf8: "{}") }
        #expect(applied.written == 1)
        #expect(applied.unusable.count == 2)
        #expect(try target.file.synchronizableItems().count == 1)
    }

    @Test("sync is not use: it keeps no keychain unlocked, and leaves the idle lock to keychaind's timer (which announces it)")
    func syncIsNotUse() throws {
        let clock = ManualClock()
        let t = try TestFile(password: "pw", clock: clock.read)
        try t.file.setSettings(KeychainSettings(lockInterval: 60, lockOnSleep: false))
        try t.file.unlock(password: SecretBytes(utf8: "pw"))
        try t.add(["class": "genp", "acct": "a", "svce": "s", "sync": true])  // a use, at the start
        for _ in 0..<5 {
            clock.now += 10
            _ = try t.file.synchronizableItems()
            _ = try t.file.syncState()
        }
        clock.now += 11
        // Idle for 61 s whatever sync read meanwhile; sync calls it locked but does not lock it itself...
        #expect(throws: KeychainError(.interactionNotAllowed)) { try t.file.synchronizableItems() }
        // ...so the timer's own check is the one that locks it (and keychaind announces that).
        #expect(t.file.lockIfIdle())
    }
}
