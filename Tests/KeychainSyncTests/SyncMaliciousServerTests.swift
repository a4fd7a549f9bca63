import Foundation
import Testing

/// The server as an attacker: it edits its own database between rounds. Every case must end in a clear sync error
/// (errSecDecode, exit 93) with the device's items untouched, never in wrong data; undone, sync goes on.
@Suite("Sync against a malicious server", .serialized)
struct SyncMaliciousServerTests {
    /// Runs `attack` (SQL), expects the next round to fail with a reason containing `reason`, checks that the
    /// device's items read as before, then runs `undo` and expects rounds to work again.
    static func expectRefused(_ device: Device, _ database: PostgresCluster, attack: String, undo: String,
                              reason: String, items: [(String, String)],
                              sourceLocation: SourceLocation = #_sourceLocation) throws {
        _ = try database.sql(attack)
        let round = try device.security("sync-now")
        #expect(round.status == 93, "\(round.stdout) \(round.stderr)", sourceLocation: sourceLocation)
        #expect(round.stderr.contains(reason), "\(round.stderr)", sourceLocation: sourceLocation)
        for (service, secret) in items {
            #expect(try device.example("get", service, "acct").stdout == secret + "\n", sourceLocation: sourceLocation)
        }
        _ = try database.sql(undo)
        let again = try device.security("sync-now")
        #expect(again.status == 0, "\(again.stderr)", sourceLocation: sourceLocation)
    }

    @Test("swapped, cut and re-epoched ciphertexts, and replays of them, are refused")
    func ciphertexts() throws {
        try SyncDevicesTests.withAccount { database, server, first, second in
            #expect(try first.example("set", "one", "acct", stdin: "secret-one").status == 0)
            #expect(try first.example("set", "two", "acct", stdin: "secret-two").status == 0)
            #expect(try first.security("sync-setup", "--server", server.url).status == 0)
            _ = try SyncDevicesTests.join(second, to: first, server: server)
            let items = [("one", "secret-one"), ("two", "secret-two")]
            // Both rows made newer (as if another device wrote), so the second device looks at them.
            let bump = "UPDATE items SET version = version + 1, seq = seq + 100; UPDATE accounts SET last_seq = last_seq + 100;"
            let unbump = "UPDATE items SET version = version - 1, seq = seq - 100; UPDATE accounts SET last_seq = last_seq - 100;"
            _ = try database.sql("CREATE TABLE saved AS SELECT id, ciphertext, epoch FROM items")
            let restore = "UPDATE items i SET ciphertext = s.ciphertext, epoch = s.epoch FROM saved s WHERE s.id = i.id;"

            // Each item's ciphertext under the other's id.
            try Self.expectRefused(second, database, attack: """
                \(bump) UPDATE items i SET ciphertext = (SELECT s.ciphertext FROM saved s WHERE s.id <> i.id LIMIT 1)
                """, undo: restore + unbump, reason: "does not open", items: items)
            // Cut short.
            try Self.expectRefused(second, database, attack: """
                \(bump) UPDATE items SET ciphertext = substring(ciphertext from 1 for length(ciphertext) - 17)
                """, undo: restore + unbump, reason: "does not open", items: items)
            // Moved to another epoch (one no device has a key for).
            try Self.expectRefused(second, database, attack: "\(bump) UPDATE items SET epoch = 7",
                                   undo: restore + unbump, reason: "epoch", items: items)
            // A deletion the server makes up: a newer version marked deleted, with the item's own ciphertext.
            try Self.expectRefused(second, database, attack: "\(bump) UPDATE items SET deleted = true",
                                   undo: "UPDATE items SET deleted = false; " + restore + unbump,
                                   reason: "deletion", items: items)
            // The same ciphertext sent again under a newer version (a replay).
            try Self.expectRefused(second, database, attack: bump, undo: unbump, reason: "does not open", items: items)
        }
    }

    @Test("an injected device, a rolled-back or edited device log, and a key share from outside the account are refused")
    func deviceLog() throws {
        try SyncDevicesTests.withAccount { database, server, first, second in
            #expect(try first.example("set", "one", "acct", stdin: "secret-one").status == 0)
            #expect(try first.security("sync-setup", "--server", server.url).status == 0)
            _ = try SyncDevicesTests.join(second, to: first, server: server)
            let items = [("one", "secret-one")]
            _ = try database.sql("CREATE TABLE saved_log AS SELECT * FROM device_log")
            let restore = "DELETE FROM device_log; INSERT INTO device_log SELECT * FROM saved_log;"

            // A device the server adds on its own: its entry is signed by no device of the account.
            let forged = String(repeating: "ee", count: 64)
            try Self.expectRefused(first, database, attack: """
                INSERT INTO device_log SELECT account, seq + 1, entry, signer, '\\x\(forged)' FROM device_log
                WHERE seq = (SELECT max(seq) FROM device_log)
                """, undo: restore, reason: "device log", items: items)
            // The log rolled back to before the second device joined.
            try Self.expectRefused(first, database, attack: "DELETE FROM device_log WHERE seq > 0",
                                   undo: restore, reason: "does not extend", items: items)
            // An entry's bytes edited (its signature no longer matches).
            try Self.expectRefused(first, database, attack: """
                UPDATE device_log SET entry = overlay(entry placing '\\xff' from 70 for 1) WHERE seq = 1
                """, undo: restore, reason: "device log", items: items)

            // A third device joins, and the server replaces the key share it gets with one that says it comes from
            // a device outside the account.
            let third = try Device("third")
            defer { third.cleanUp() }
            let asked = try third.security("sync-join", "--server", server.url, "--no-wait")
            let code = try #require(SyncDevicesTests.code(in: asked.stdout))
            #expect(try first.security("sync-approve", code).status == 0)
            _ = try database.sql("""
                UPDATE key_shares SET share = convert_to(replace(convert_from(share, 'UTF8'),
                    encode(device, 'base64'), encode(device, 'base64')), 'UTF8');
                UPDATE key_shares SET share = convert_to(regexp_replace(convert_from(share, 'UTF8'),
                    '"signer":"[^"]*"', '"signer":"7u7u7u7u7u7u7u7u7u7u7g=="'), 'UTF8')
                WHERE device = (SELECT id FROM devices ORDER BY created DESC LIMIT 1)
                """)
            let refused = try third.security("sync-join", "--no-wait")
            #expect(refused.status == 93, "\(refused.stdout) \(refused.stderr)")
            #expect(refused.stderr.contains("key share"))
            #expect(try third.example("get", "one", "acct").status == 44)
        }
    }

    @Test("a deleted item does not come back: not as its old version, nor by a full resync the server forces")
    func deletedStaysDeleted() throws {
        try SyncDevicesTests.withAccount { database, server, first, second in
            #expect(try first.example("set", "gone", "acct", stdin: "old-secret").status == 0)
            #expect(try first.example("set", "kept", "acct", stdin: "kept-secret").status == 0)
            #expect(try first.security("sync-setup", "--server", server.url).status == 0)
            _ = try SyncDevicesTests.join(second, to: first, server: server)
            _ = try database.sql("CREATE TABLE before_delete AS SELECT * FROM items")
            #expect(try first.example("delete", "gone", "acct").status == 0)
            #expect(try first.security("sync-now").status == 0)
            #expect(try second.security("sync-now").stdout.contains("deleted here 1"))
            // The server puts the deleted item's old row back, as a newer change.
            _ = try database.sql("""
                UPDATE items i SET deleted = false, ciphertext = b.ciphertext, version = b.version,
                    seq = (SELECT last_seq + 1 FROM accounts) FROM before_delete b WHERE b.id = i.id AND i.deleted;
                UPDATE accounts SET last_seq = last_seq + 1
                """)
            let back = try second.security("sync-now")
            #expect(back.status == 93, "\(back.stdout) \(back.stderr)")
            #expect(back.stderr.contains("older version"))
            #expect(try second.example("get", "gone", "acct").status == 44)
        }
    }
}
