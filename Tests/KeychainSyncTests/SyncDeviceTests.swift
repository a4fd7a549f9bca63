import Foundation
import Testing

/// A device's keychain syncing through keychaind and the real server: the built tools, as a user runs them.
@Suite("Sync, one device", .serialized)
struct SyncDeviceTests {
    static func withDevice(_ body: (PostgresCluster, SyncServerProcess, Device) throws -> Void) throws {
        let database = try PostgresCluster()
        defer { database.stop() }
        let server = try SyncServerProcess(database: database)
        defer { server.stop() }
        let device = try Device("one")
        defer { device.cleanUp() }
        try body(database, server, device)
    }

    @Test("only synchronizable items reach the server, as ciphertext of a size class; updates and deletes follow")
    func synchronizableItemsOnly() throws {
        try Self.withDevice { database, server, device in
            #expect(try device.example("set", "canary-service-s", "canary-account-s", stdin: "canary-secret-s").status == 0)
            #expect(try device.example("set", "canary-service-n", "canary-account-n", synchronizable: false,
                                       stdin: "canary-secret-n").status == 0)
            let setUp = try device.security("sync-setup", "--server", server.url)
            #expect(setUp.status == 0, "\(setUp.stderr)")
            #expect(setUp.stdout.contains("Recovery key"))
            #expect(setUp.stdout.contains("sent 1,"))
            #expect(try database.sql("SELECT count(*), min(length(ciphertext)) FROM items") == "1|1052\n")

            // An update is the next version; a second round with nothing changed sends nothing.
            #expect(try device.example("set", "canary-service-s", "canary-account-s", stdin: "canary-secret-2").status == 0)
            #expect(try device.security("sync-now").stdout.contains("sent 1,"))
            #expect(try database.sql("SELECT version FROM items") == "2\n")
            #expect(try device.security("sync-now").stdout.contains("sent 0,"))

            // Nothing of an item is readable on the server: no secret, service, account or label, old or new.
            let dump = try database.dump()
            for canary in ["canary-secret", "canary-service", "canary-account", "Sync state"] {
                #expect(!dump.contains(canary), "\(canary) is in the server's database")
            }

            // The item is still the program's, and reads back as it was written.
            let read = try device.example("get", "canary-service-s", "canary-account-s")
            #expect(read.stdout == "canary-secret-2\n")

            // A delete leaves a tombstone with the next version: a sealed marker, not the item.
            #expect(try device.example("delete", "canary-service-s", "canary-account-s").status == 0)
            #expect(try device.security("sync-now").stdout.contains("sent 1,"))
            #expect(try database.sql("SELECT version, deleted, length(ciphertext) FROM items") == "3|t|540\n")
            let status = try device.security("sync-status")
            #expect(status.stdout.contains("items:    0"))
        }
    }

    @Test("the sync state is keychaind's alone: no program, not even security, sees or writes it; never in a backup")
    func syncStateIsHidden() throws {
        try Self.withDevice { _, server, device in
            #expect(try device.security("sync-setup", "--server", server.url).status == 0)
            let dump = try device.security("dump-keychain", "-d")
            #expect(!dump.stdout.contains("swift-keychain sync"))
            #expect(!dump.stdout.contains("sync-state"))
            let find = try device.security("find-generic-password", "-s", "swift-keychain sync")
            #expect(find.status == 44)
            let write = try device.security("add-generic-password", "-s", "swift-keychain sync", "-a", "state", "-w", "x")
            #expect(write.status == 0)  // a file-keychain item of its own, beside (not over) keychaind's
            #expect(try device.security("sync-status").status == 0)
            let backup = device.home.appendingPathComponent("backup.kcb").path
            #expect(try device.security("backup-keychain", "-o", backup, "-P", "-", stdin: "pw\n").status == 0)
            #expect(try device.security("sync-leave").status == 0)
            #expect(try device.security("restore-keychain", "-i", backup, "-P", "-", stdin: "pw\n").status == 0)
            // Restoring does not bring the device back into the account: a new device joins.
            #expect(try device.security("sync-status").status == 44)
        }
    }

    @Test("a server that alters, moves or rolls back a ciphertext gets a clear error and the items here stay as they are")
    func alteredServerData() throws {
        try Self.withDevice { database, server, device in
            #expect(try device.example("set", "svc", "acct", stdin: "first").status == 0)
            #expect(try device.security("sync-setup", "--server", server.url).status == 0)
            // A newer version whose ciphertext is the old one: the version is in the associated data.
            _ = try database.sql("""
                UPDATE items SET version = version + 1, seq = 10; UPDATE accounts SET last_seq = 10
                """)
            let replayed = try device.security("sync-now")
            #expect(replayed.status == 93, "\(replayed.stdout) \(replayed.stderr)")
            #expect(replayed.stderr.contains("does not open"))
            #expect(try device.example("get", "svc", "acct").stdout == "first\n")
            // A flipped byte in the ciphertext.
            _ = try database.sql("""
                UPDATE items SET ciphertext = overlay(ciphertext placing '\\x00' from 40 for 1), seq = 11;
                UPDATE accounts SET last_seq = 11
                """)
            #expect(try device.security("sync-now").status == 93)
            #expect(try device.example("get", "svc", "acct").stdout == "first\n")
            // An older version than the device has taken.
            _ = try database.sql("UPDATE items SET version = 0, seq = 12; UPDATE accounts SET last_seq = 12")
            let older = try device.security("sync-now")
            #expect(older.status == 93)
            #expect(older.stderr.contains("older version"))
            #expect(try device.example("get", "svc", "acct").stdout == "first\n")
        }
    }

    @Test("sync needs a keychain that was set up, a server that answers and an https URL")
    func refusals() throws {
        try Self.withDevice { _, server, device in
            #expect(try device.security("sync-now").status == 44)  // not set up
            #expect(try device.security("sync-setup", "--server", "http://example.com").status == 206)
            #expect(try device.security("sync-setup", "--server", "https://user:pw@example.com").status == 206)
            #expect(try device.security("sync-setup", "--server", "http://127.0.0.1:1").status == 204)  // errSecNetworkFailure
            #expect(try device.security("sync-setup").status == 2)
            #expect(try device.security("sync-setup", "--server", server.url).status == 0)
            let again = try device.security("sync-setup", "--server", server.url)
            #expect(again.status == 45)
            #expect(again.stderr.contains("already syncs"))
        }
    }
}
