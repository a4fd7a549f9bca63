import Foundation
import GRDB
import InMemoryLogging
import KeychainCore
import KeychainStorage
import KeychainTestSupport
import Logging
import Testing

/// The attacks of CRYPTO-DESIGN §6: tampering gives errSecDecode or a refusal, never other data.
@Suite("Tampering with the file")
struct TamperTests {
    func tamper(_ t: TestFile, _ body: (Database) throws -> Void) throws { try t.tamper(body) }

    func twoItems() throws -> TestFile { try TestFile.twoItems() }

    func readBack(_ t: TestFile) -> [String: Int32] {
        var out: [String: Int32] = [:]
        for account in ["a", "b"] {
            do {
                let value = try t.secret(account)
                // Never another item's data.
                #expect(value == "secret-\(account)")
                out[account] = 0
            } catch {
                out[account] = (error as? KeychainError)?.status.rawValue ?? 1
            }
        }
        return out
    }

    @Test("swapping a column between two rows fails to open", arguments: ["secret", "wrapped_key", "meta"])
    func swap(column: String) throws {
        let t = try twoItems()
        try tamper(t) { db in
            let a: Data = try Data.fetchOne(db, sql: "SELECT \(column) FROM items WHERE rowid = 1")!
            let b: Data = try Data.fetchOne(db, sql: "SELECT \(column) FROM items WHERE rowid = 2")!
            try db.execute(sql: "UPDATE items SET \(column) = ? WHERE rowid = 1", arguments: [b])
            try db.execute(sql: "UPDATE items SET \(column) = ? WHERE rowid = 2", arguments: [a])
        }
        try t.file.unlock(password: SecretBytes(utf8: "pw"))
        let results = readBack(t)
        #expect(results["a"] != 0 && results["b"] != 0)
    }

    @Test("changing a clear column (class, sync, kind, generation) is refused", arguments: [
        "UPDATE items SET class = 'dk' WHERE rowid = 1",
        "UPDATE items SET sync = 1 WHERE rowid = 1",
        "UPDATE items SET gen = 7 WHERE rowid = 1",
        "UPDATE items SET kind = 'inet' WHERE rowid = 1",
    ])
    func clearColumns(sql: String) throws {
        let t = try twoItems()
        try tamper(t) { db in try db.execute(sql: sql) }
        // The manifest catches it at open; had it not, the AEAD would.
        #expect(status { try t.reopen() } == -26275)
    }

    @Test("replacing a row with its own older version is refused")
    func rowRollback() throws {
        let t = try twoItems()
        var old: Row?
        try tamper(t) { db in old = try Row.fetchOne(db, sql: "SELECT * FROM items WHERE rowid = 1") }
        try t.file.unlock(password: SecretBytes(utf8: "pw"))
        try t.file.update(
            QueryParser.parse(["class": "genp", "acct": "a"], for: .update),
            with: QueryParser.parseUpdate(["v_Data": .data(Data("newer".utf8))], itemClass: .genericPassword),
            caller: t.caller)
        try tamper(t) { db in
            try db.execute(sql: "DELETE FROM items WHERE rowid = 1")
            try db.execute(
                sql: "INSERT INTO items SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?",
                arguments: StatementArguments(old!.databaseValues))
        }
        #expect(status { try t.reopen() } == -26275)
    }

    @Test("deleting a row is refused")
    func deleteRow() throws {
        let t = try twoItems()
        try tamper(t) { db in try db.execute(sql: "DELETE FROM items WHERE rowid = 2") }
        #expect(status { try t.reopen() } == -26275)
    }

    @Test("replacing the whole file with an older copy is refused (epoch)")
    func fileRollback() throws {
        let t = try twoItems()
        t.file.lock()
        let copy = t.root.appendingPathComponent("old-copy")
        // An older, self-consistent snapshot: checkpointed file with no WAL.
        try tamper(t) { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        try FileManager.default.copyItem(at: t.url, to: copy)
        try t.file.unlock(password: SecretBytes(utf8: "pw"))
        try t.add(["class": "genp", "acct": "c"])
        t.file.lock()  // the newest epoch reaches the device state at lock (or close, or a second later)
        try tamper(t) { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        try FileManager.default.removeItem(at: t.url)
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: t.url.path + suffix) }
        try FileManager.default.copyItem(at: copy, to: t.url)
        #expect(status { try t.reopen() } == -26275)
    }

    @Test("a NULL or mistyped value in any column is an error, not a crash", arguments: [
        "UPDATE kc_meta SET kdf_n = NULL", "UPDATE kc_meta SET format = 'one'", "UPDATE kc_meta SET db_uuid = 7",
        "UPDATE kc_meta SET manifest_mac = NULL", "UPDATE kc_meta SET epoch = x'00'", "UPDATE kc_meta SET lock_interval = NULL",
        "UPDATE keybag SET blob = NULL WHERE rowid = 1", "UPDATE keybag SET key_gen = 'g'",
        "UPDATE keybag SET class = 5 WHERE rowid = 1", "UPDATE items SET gen = NULL WHERE rowid = 1",
        "UPDATE items SET uuid = 'text' WHERE rowid = 1", "UPDATE items SET meta = 12",
        "UPDATE items SET wrapped_key = NULL WHERE rowid = 1", "UPDATE items SET class = NULL WHERE rowid = 1",
        "UPDATE items SET primary_index = 1.5 WHERE rowid = 1", "UPDATE items SET secret = NULL WHERE rowid = 1",
        "UPDATE items SET secret = 'text'", "UPDATE items SET secret_binding = 5",
    ])
    func mistypedColumns(sql: String) throws {
        let t = try twoItems()
        // What a byte editor can do: first drop the NOT NULL constraints that would stop the same edit in SQL.
        try tamper(t) { db in
            try db.execute(sql: "PRAGMA writable_schema = ON")
            try db.execute(sql: "UPDATE sqlite_schema SET sql = replace(sql, 'NOT NULL', '') WHERE type = 'table'")
        }
        try tamper(t) { db in try db.execute(sql: sql) }
        let s = status {
            try t.reopen()
            try t.file.unlock(password: SecretBytes(utf8: "pw"))
            _ = try t.file.settings()
            for account in ["a", "b"] {
                if let value = try t.secret(account) { #expect(value == "secret-\(account)") }
            }
        }
        #expect(s != 0, "\(sql) went unnoticed")
    }

    /// Copies the keychain as it is on disk this instant, with its WAL and its own device state, to a fresh folder.
    func snapshot(_ t: TestFile, into folder: URL) throws -> (URL, KeychainFile.Configuration) {
        let fm = FileManager.default
        try fm.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = folder.appendingPathComponent("copy.keychain-db")
        try fm.copyItem(at: t.url, to: url)
        if fm.fileExists(atPath: t.url.path + "-wal") { try fm.copyItem(atPath: t.url.path + "-wal", toPath: url.path + "-wal") }
        var configuration = t.configuration
        configuration.stateDirectory = folder.appendingPathComponent("state")
        try fm.copyItem(at: t.configuration.stateDirectory, to: configuration.stateDirectory)
        return (url, configuration)
    }

    @Test("random byte flips and truncations of the database and its WAL: the right data or an error, never other data")
    func randomDamage() throws {
        let rounds = Int(ProcessInfo.processInfo.environment["KEYCHAIN_TAMPER_ROUNDS"] ?? "") ?? 40
        let t = try TestFile(password: "pw")
        var expected: [String: String] = [:]
        for i in 0..<16 {
            let secret = "secret-\(i)-" + String(repeating: "x", count: i * 37)
            expected["acct-\(i)"] = secret
            try t.add(["class": "genp", "acct": .string("acct-\(i)"), "svce": "svc", "v_Data": .data(Data(secret.utf8))])
        }
        #expect(((try? FileManager.default.attributesOfItem(atPath: t.url.path + "-wal")[.size]) as? Int ?? 0) > 0)
        // Seeded, and the seed printed, so a failing run can be replayed (KEYCHAIN_TAMPER_SEED).
        let seed = UInt64(ProcessInfo.processInfo.environment["KEYCHAIN_TAMPER_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max)
        print("random damage: seed \(seed)")
        var generator = SplitMix64(seed: seed)
        var outcomes: [String: Int] = [:]
        var errors = 0, opened = 0, skipped = 0
        for round in 0..<rounds {
            let (url, configuration) = try snapshot(t, into: t.root.appendingPathComponent("trial-\(round)"))
            let target = Bool.random(using: &generator) ? url.path : url.path + "-wal"
            var bytes = fileBytes(target)
            guard !bytes.isEmpty else {
                skipped += 1
                continue
            }
            let damage: String
            if Bool.random(using: &generator) {
                bytes.removeLast(Int.random(in: 1...bytes.count, using: &generator))
                damage = "truncate"
            } else {
                for _ in 0..<Int.random(in: 1...8, using: &generator) {
                    bytes[Int.random(in: 0..<bytes.count, using: &generator)] ^= UInt8.random(in: 1...255, using: &generator)
                }
                damage = "flip"
            }
            try Data(bytes).write(to: URL(fileURLWithPath: target))
            var readable = 0
            let s = status {
                let file = try KeychainFile.open(at: url, configuration: configuration)
                try file.unlock(password: SecretBytes(utf8: "pw"))
                let all = try file.search(
                    QueryParser.parse(["class": "genp", "m_Limit": "m_LimitAll", "r_Attributes": true, "r_Data": true],
                                      for: .search), caller: t.caller)
                for found in all {
                    let account = found.item.attributes["acct"]?.stringValue ?? "?"
                    // Never another item's data, nor data under a name that was never stored.
                    #expect(found.secret?.unprotectedString() == expected[account], "round \(round): \(account)")
                    readable += 1
                }
            }
            outcomes["\(damage) \(target.hasSuffix("-wal") ? "wal" : "db"): \(s == 0 ? "opened, \(readable == 16 ? "all" : "some") items" : "error \(s)")", default: 0] += 1
            if s == 0 { opened += 1 } else {
                errors += 1
                // Damage is reported with a keychain status, never as an unknown error.
                #expect(s != 1, "round \(round): a failure without a keychain status")
            }
        }
        print("random damage over \(rounds) rounds (seed \(seed)):",
              outcomes.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: "; "))
        #expect(errors + opened + skipped == rounds)
        // Damage must be noticed: with tens of rounds of flips and truncations, some opens have to fail.
        #expect(errors > 0)
    }

    /// Reopens `t` with a logger and reports how many rows the open read against the manifest.
    func reopenScannedRows(_ t: TestFile) throws -> Int? {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in handler })
        logger.logLevel = .debug
        t.configuration.logger = logger
        try t.reopen()
        let entry = handler.entries.first { $0.message.description == "keychain.open.verified" }
        return entry?.metadata["rows"].flatMap { Int($0.description) }
    }

    @Test("every open reads every row, also after this device's own clean close; a deletion after it is caught")
    func everyOpenScans() throws {
        let t = try twoItems()
        #expect(try reopenScannedRows(t) == 2)
        t.file.close()
        #expect(try reopenScannedRows(t) == 2)  // closed by us, untouched since: still read
        try t.file.unlock(password: SecretBytes(utf8: "pw"))
        try t.add(["class": "genp", "acct": "c", "svce": "s"])
        t.file.close()
        #expect(try reopenScannedRows(t) == 3)
        t.file.close()
        try tamper(t) { db in try db.execute(sql: "DELETE FROM items WHERE rowid = 2") }
        #expect(status { try t.reopen() } == -26275)
    }

    @Test("every commit is synced: WAL with synchronous FULL and secure_delete, also after reopening")
    func durability() throws {
        let t = try twoItems()
        for _ in 0..<2 {
            let d = try t.file.durability()
            #expect(d.synchronous == 2 && d.journalMode == "wal" && d.secureDelete == 1, "\(d)")
            t.file.close()
            try t.reopen()
        }
    }

    @Test("a closed handle refuses further calls with an error")
    func closedHandle() throws {
        let t = try twoItems()
        t.file.close()
        #expect(status { _ = try t.secret("a") } == -25295)
        #expect(status { try t.add(["class": "genp", "acct": "z"]) } == -25295)
        t.file.close()  // twice is harmless
    }

    @Test("weakening the KDF parameters or changing the salt makes the password fail, not the KDF run weaker")
    func kdfDowngrade() throws {
        let t = try twoItems()
        // The parameters are in every class key's associated data, so the keybag no longer opens.
        try tamper(t) { db in try db.execute(sql: "UPDATE kc_meta SET kdf_n = 1024") }
        #expect(status { try t.reopen(); try t.file.unlock(password: SecretBytes(utf8: "pw")) } == -26275)
        let u = try twoItems()
        try tamper(u) { db in try db.execute(sql: "UPDATE kc_meta SET pw_salt = zeroblob(32)") }
        #expect(status { try u.reopen(); try u.file.unlock(password: SecretBytes(utf8: "pw")) } == -26275)
    }

    @Test("flipping any byte of a row's ciphertexts never yields data", arguments: ["secret", "wrapped_key", "meta"])
    func flips(column: String) throws {
        let t = try TestFile()
        try t.add(["class": "genp", "acct": "a", "svce": "s", "v_Data": .data(Data("secret-a".utf8))])
        var original = Data()
        try tamper(t) { db in original = try Data.fetchOne(db, sql: "SELECT \(column) FROM items WHERE rowid = 1")! }
        for index in 0..<original.count {
            var altered = original
            altered[index] ^= 0x01
            try tamper(t) { db in
                try db.execute(sql: "UPDATE items SET \(column) = ? WHERE rowid = 1", arguments: [altered])
            }
            let s = status { _ = try t.secret("a") }
            #expect(s == -26275, "byte \(index)")
        }
    }
}

@Suite("Nothing readable on disk")
struct CanaryTests {
    @Test("no secret and no attribute value appears in the database, its WAL or shared memory")
    func canaries() throws {
        let t = try TestFile(password: "pw")
        let canaries = ["CANARYSECRET1", "CANARYACCOUNT", "CANARYSERVICE", "CANARYLABEL", "CANARYCOMMENT", "CANARYSERVER"]
        try t.add([
            "class": "genp", "acct": "CANARYACCOUNT", "svce": "CANARYSERVICE", "labl": "CANARYLABEL",
            "icmt": "CANARYCOMMENT", "v_Data": .data(Data("CANARYSECRET1".utf8)),
        ])
        try t.add(["class": "inet", "srvr": "CANARYSERVER", "acct": "CANARYACCOUNT", "v_Data": .data(Data("CANARYSECRET1".utf8))])
        try t.file.update(
            QueryParser.parse(["class": "genp", "acct": "CANARYACCOUNT"], for: .update),
            with: QueryParser.parseUpdate(["labl": "CANARYLABEL"], itemClass: .genericPassword), caller: t.caller)
        for suffix in ["", "-wal", "-shm"] {
            let bytes = fileBytes(t.url.path + suffix)
            for canary in canaries {
                #expect(!contains(bytes, canary), "\(canary) in \(suffix)")
            }
        }
        for name in try FileManager.default.contentsOfDirectory(atPath: t.configuration.stateDirectory.path) {
            let bytes = fileBytes(t.configuration.stateDirectory.appendingPathComponent(name).path)
            for canary in canaries { #expect(!contains(bytes, canary)) }
        }
    }

    @Test("the file and its directory are private")
    func permissions() throws {
        let t = try TestFile()
        try t.add(["class": "genp", "acct": "a"])
        let attributes = try FileManager.default.attributesOfItem(atPath: t.url.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let dir = try FileManager.default.attributesOfItem(atPath: t.url.deletingLastPathComponent().path)
        #expect((dir[.posixPermissions] as? Int) == 0o700)
        let key = try FileManager.default.attributesOfItem(
            atPath: t.configuration.stateDirectory.appendingPathComponent("device.key").path)
        #expect((key[.posixPermissions] as? Int) == 0o600)
    }
}

@Suite("Nonce hygiene")
struct NonceTests {
    @Test("no AES-GCM nonce repeats across thousands of writes, and every item key is fresh")
    func uniqueNonces() throws {
        let t = try TestFile()
        let queries = try (0..<3000).map { i in
            try QueryParser.parse(["class": "genp", "acct": .string("a\(i)"), "v_Data": .data(Data("same".utf8))], for: .add)
        }
        try t.file.addAll(queries, caller: t.caller)
        // Updates re-encrypt with a new item key and new nonces.
        for i in 0..<200 {
            try t.file.update(
                QueryParser.parse(["class": "genp", "acct": .string("a\(i)")], for: .update),
                with: QueryParser.parseUpdate(["v_Data": .data(Data("same".utf8))], itemClass: .genericPassword),
                caller: t.caller)
        }
        var nonces = Set<Data>()
        var secrets = Set<Data>()
        let queue = try DatabaseQueue(path: t.url.path)
        try queue.read { db in
            for row in try Row.fetchAll(db, sql: "SELECT meta, wrapped_key, secret FROM items") {
                for column in ["meta", "wrapped_key", "secret"] {
                    let blob: Data = row[column]
                    #expect(nonces.insert(blob.prefix(12)).inserted)
                }
                let secret: Data = row["secret"]
                secrets.insert(secret)
            }
        }
        #expect(nonces.count == 9000)
        #expect(secrets.count == 3000)  // the same plaintext never gives the same ciphertext
    }
}
