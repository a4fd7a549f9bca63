import Foundation
import KeychainTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Several devices of one account, each a home with its own keychaind, through one real server.
@Suite("Sync, several devices", .serialized)
struct SyncDevicesTests {
    static func withAccount(_ body: (PostgresCluster, SyncServerProcess, Device, Device) throws -> Void) throws {
        let database = try PostgresCluster()
        defer { database.stop() }
        let server = try SyncServerProcess(database: database)
        defer { server.stop() }
        let first = try Device("first"), second = try Device("second")
        defer {
            first.cleanUp()
            second.cleanUp()
        }
        try body(database, server, first, second)
    }

    /// The join code `sync-join` printed.
    static func code(in output: String) -> String? {
        output.split(separator: "\n").first { $0.contains("security sync-approve ") }
            .map { String($0.split(separator: " ").last ?? "") }
    }

    static func words(in output: String) -> String? {
        output.split(separator: "\n").first { $0.hasPrefix("Words: ") }.map { String($0.dropFirst(7)) }
    }

    /// Joins `second` to `first`'s account, the user allowing it on `first`.
    static func join(_ second: Device, to first: Device, server: SyncServerProcess) throws -> (words: String, output: Ran) {
        let asked = try second.security("sync-join", "--server", server.url, "--no-wait")
        let code = try #require(Self.code(in: asked.stdout), "\(asked.stdout) \(asked.stderr)")
        let approved = try first.security("sync-approve", code)
        #expect(approved.status == 0, "\(approved.stderr)")
        let joined = try second.security("sync-join", "--no-wait")
        #expect(joined.status == 0, "\(joined.stdout) \(joined.stderr)")
        return (Self.words(in: joined.stdout) ?? "", joined)
    }

    @Test("a new device joins when the words match; items, updates and deletes reach every copy")
    func joinAndConverge() throws {
        try Self.withAccount { database, server, first, second in
            #expect(try first.example("set", "canary-svc-a", "acct", stdin: "canary-secret-a").status == 0)
            #expect(try first.security("sync-setup", "--server", server.url).status == 0)
            #expect(try second.example("set", "canary-svc-b", "acct", stdin: "canary-secret-b").status == 0)

            let (words, joined) = try Self.join(second, to: first, server: server)
            // The same six words on both: the new device printed them; the trusted one asked its user with them.
            #expect(words.split(separator: " ").count == 6)
            #expect(first.questions.contains(words), "\(first.questions) vs \(words)")
            #expect(joined.stdout.contains("2 devices"))
            // The new device has the account's items; its own went up in its first round.
            #expect(try second.example("get", "canary-svc-a", "acct").stdout == "canary-secret-a\n")
            #expect(try first.security("sync-now").status == 0)
            #expect(try first.example("get", "canary-svc-b", "acct").stdout == "canary-secret-b\n")

            // An update on one device reaches the other; so does a delete.
            #expect(try first.example("set", "canary-svc-a", "acct", stdin: "canary-secret-a2").status == 0)
            #expect(try first.security("sync-now").status == 0)
            #expect(try second.security("sync-now").stdout.contains("received 1"))
            #expect(try second.example("get", "canary-svc-a", "acct").stdout == "canary-secret-a2\n")
            #expect(try second.example("delete", "canary-svc-b", "acct").status == 0)
            #expect(try second.security("sync-now").status == 0)
            #expect(try first.security("sync-now").stdout.contains("deleted here 1"))
            #expect(try first.example("get", "canary-svc-b", "acct").status == 44)

            // Both see the same account, devices and items.
            let a = try first.security("sync-status").stdout, b = try second.security("sync-status").stdout
            for field in ["account:", "devices:  2", "items:    1"] {
                #expect(a.contains(field) && b.contains(field), "\(a)\n\(b)")
            }
            let dump = try database.dump()
            for canary in ["canary-secret", "canary-svc"] { #expect(!dump.contains(canary)) }
        }
    }

    @Test("conflicts end the same on every device: the first write to reach the server wins; of two adds, the lower id")
    func conflicts() throws {
        try Self.withAccount { _, server, first, second in
            #expect(try first.example("set", "shared", "acct", stdin: "v0").status == 0)
            #expect(try first.security("sync-setup", "--server", server.url).status == 0)
            _ = try Self.join(second, to: first, server: server)

            // Both change the same item while apart; the first to reach the server wins, the other takes its copy
            // (its own change never reached the server, so nothing of it is left anywhere).
            #expect(try first.example("set", "shared", "acct", stdin: "from-first").status == 0)
            #expect(try second.example("set", "shared", "acct", stdin: "from-second").status == 0)
            #expect(try first.security("sync-now").status == 0)
            let lost = try second.security("sync-now")
            #expect(lost.stdout.contains("received 1,") && lost.stdout.contains("sent 0,"), "\(lost.stdout)")
            #expect(try second.example("get", "shared", "acct").stdout == "from-first\n")
            #expect(try first.security("sync-now").stdout.contains("received 0,"))
            #expect(try first.example("get", "shared", "acct").stdout == "from-first\n")

            // Both add the same item (same primary key, different ids) while apart.
            #expect(try first.example("set", "twin", "acct", stdin: "twin-first").status == 0)
            #expect(try second.example("set", "twin", "acct", stdin: "twin-second").status == 0)
            for _ in 0..<2 {
                #expect(try first.security("sync-now").status == 0)
                #expect(try second.security("sync-now").status == 0)
            }
            let onFirst = try first.example("get", "twin", "acct").stdout
            let onSecond = try second.example("get", "twin", "acct").stdout
            #expect(onFirst == onSecond)
            #expect(["twin-first\n", "twin-second\n"].contains(onFirst))
            let a = try first.security("sync-status").stdout, b = try second.security("sync-status").stdout
            #expect(a.contains("items:    2") && b.contains("items:    2"), "\(a)\n\(b)")
        }
    }

    @Test("no device joins without the user's yes on a trusted device, nor with keys the server swapped")
    func refusedJoins() throws {
        try Self.withAccount { database, server, first, second in
            #expect(try first.security("sync-setup", "--server", server.url).status == 0)
            // Deny on the trusted device: 51, and the new device is still waiting.
            try "deny\n".write(to: first.answers, atomically: true, encoding: .utf8)
            let asked = try second.security("sync-join", "--server", server.url, "--no-wait")
            let code = try #require(Self.code(in: asked.stdout))
            #expect(try first.security("sync-approve", code).status == 51)
            let waiting = try second.security("sync-join", "--no-wait")
            #expect(waiting.stdout.contains("Not approved yet"))
            #expect(try second.security("sync-now").status == 36)  // still joining: errSecInteractionNotAllowed

            // The user says no on the new device (the words did not match what the trusted one showed): 51, and it
            // took no key.
            let other = try Device("other")
            defer { other.cleanUp() }
            try "deny\n".write(to: other.answers, atomically: true, encoding: .utf8)
            let otherAsked = try other.security("sync-join", "--server", server.url, "--no-wait")
            let otherCode = try #require(Self.code(in: otherAsked.stdout))
            #expect(try first.security("sync-approve", otherCode).status == 0)
            #expect(try other.security("sync-join", "--no-wait").status == 51)
            #expect(other.questions.contains("other device showed these words"))
            #expect(try other.security("sync-now").status == 36)

            // The server puts keys of its own in place of the new device's: the trusted device's words are not the
            // new device's, and the new device refuses the join whatever the user answered.
            let attacker = String(repeating: "ab", count: 32)
            _ = try database.sql("UPDATE joins SET agreement_key = '\\x\(attacker)' WHERE code = '\(code)'")
            #expect(try first.security("sync-approve", code).status == 0)
            let refused = try second.security("sync-join", "--no-wait")
            #expect(refused.status == 93, "\(refused.stdout) \(refused.stderr)")
            #expect(refused.stderr.contains("changed this device's keys"))
        }
    }
}

extension SyncDevicesTests {
    static func deviceID(of device: Device) throws -> String {
        let status = try device.security("sync-status").stdout
        return try #require(status.split(separator: "\n").first { $0.hasPrefix("device:") }?
            .split(separator: " ").last.map(String.init))
    }

    static func recoveryKey(in output: String) -> String? {
        let lines = output.split(separator: "\n")
        guard let index = lines.firstIndex(where: { $0.hasPrefix("Recovery key") }), index + 1 < lines.count else {
            return nil
        }
        return lines[index + 1].trimmingCharacters(in: .whitespaces)
    }

    @Test("removing a device starts a new epoch: the others get its key, and the removed device reads nothing written after, even with the server's help")
    func removeDeviceNewEpoch() throws {
        try Self.withAccount { database, server, first, second in
            let third = try Device("third")
            defer { third.cleanUp() }
            #expect(try first.example("set", "before", "acct", stdin: "before-removal").status == 0)
            let setUp = try first.security("sync-setup", "--server", server.url)
            let recovery = try #require(Self.recoveryKey(in: setUp.stdout))
            _ = try Self.join(second, to: first, server: server)
            _ = try Self.join(third, to: first, server: server)
            #expect(try first.security("sync-devices").stdout.split(separator: "\n").count == 3)
            let removed = try Self.deviceID(of: second)

            let removal = try first.security("sync-remove-device", removed)
            #expect(removal.status == 0, "\(removal.stderr)")
            #expect(removal.stdout.contains("epoch 2"))
            // Every live item on the server is sealed under the new epoch's key.
            #expect(try database.sql("SELECT DISTINCT epoch FROM items WHERE NOT deleted") == "2\n")
            #expect(try first.example("set", "after", "acct", stdin: "after-removal").status == 0)
            #expect(try first.security("sync-now").status == 0)

            // The device that stays takes the new key from a share its log vouches for.
            #expect(try third.security("sync-now").status == 0)
            #expect(try third.example("get", "after", "acct").stdout == "after-removal\n")
            #expect(try third.security("sync-status").stdout.contains("epoch:    2"))

            // The removed device is refused...
            let refused = try second.security("sync-now")
            #expect(refused.status == 51)
            #expect(refused.stderr.contains("removed"))
            // ...and a server that takes it back and hides its removal still gives it nothing it can open.
            _ = try database.sql("UPDATE devices SET revoked = false WHERE id = '\\x\(removed)'")
            _ = try database.sql("DELETE FROM device_log WHERE seq = (SELECT max(seq) FROM device_log)")
            let colluding = try second.security("sync-now")
            #expect(colluding.status == 93, "\(colluding.stdout) \(colluding.stderr)")
            #expect(colluding.stderr.contains("epoch"))
            #expect(try second.example("get", "after", "acct").status == 44)
            _ = recovery
        }
    }

    @Test("with every device lost, the recovery key brings the account and its items to a new device")
    func recovery() throws {
        try Self.withAccount { _, server, first, second in
            #expect(try first.example("set", "kept", "acct", stdin: "kept-secret").status == 0)
            let setUp = try first.security("sync-setup", "--server", server.url)
            let key = try #require(Self.recoveryKey(in: setUp.stdout))
            #expect(key.split(separator: "-").count == 12)
            first.cleanUp()  // the only device is gone

            #expect(try second.security("sync-recover", "--server", server.url, "-P", "not-from-argv").status == 206)
            #expect(try second.security("sync-recover", "--server", server.url, "-P", "-", stdin: "abc\n").status == 206)
            let wrong = String(repeating: "0123abcd-", count: 12).dropLast()
            #expect(try second.security("sync-recover", "--server", server.url, "-P", "-", stdin: "\(wrong)\n").status == 51)

            let recovered = try second.security("sync-recover", "--server", server.url, "-P", "-", stdin: key + "\n")
            #expect(recovered.status == 0, "\(recovered.stderr)")
            #expect(try second.example("get", "kept", "acct").stdout == "kept-secret\n")
            let devices = try second.security("sync-devices").stdout
            #expect(devices.contains("added by recovery") && devices.contains("(this device)"), "\(devices)")
        }
    }
}

extension SyncDevicesTests {
    /// Polls `condition` every 100 ms for up to `seconds`; how long it took, or nil.
    static func within(_ seconds: Double, _ condition: () throws -> Bool) rethrows -> Double? {
        let start = Date()
        while Date().timeIntervalSince(start) < seconds {
            if try condition() { return Date().timeIntervalSince(start) }
            usleep(100_000)
        }
        return nil
    }

    @Test("keychaind syncs in the background: a write goes up at once, and the server's push brings it to the other device long before its timer")
    func backgroundRounds() throws {
        let database = try PostgresCluster()
        defer { database.stop() }
        let server = try SyncServerProcess(database: database)
        defer { server.stop() }
        var first = try Device("bg-first"), second = try Device("bg-second")
        // A timer far longer than the waits below: what arrives, arrives by the server's push.
        first.syncInterval = "120"
        second.syncInterval = "120"
        defer {
            first.cleanUp()
            second.cleanUp()
        }
        #expect(try first.security("sync-setup", "--server", server.url).status == 0)
        _ = try Self.join(second, to: first, server: server)
        // The second device's keychaind starts afresh and a command that changes nothing opens the keychain: it is
        // watched from then on, not from keychaind's timer (it once watched only what was open when it started).
        let pid = try #require(second.daemonPID)
        kill(pid, SIGTERM)
        #expect(Self.within(10) { kill(pid, 0) != 0 || isZombie(pid) } != nil)
        #expect(try second.security("sync-status").status == 0)

        #expect(try first.example("set", "background", "acct", stdin: "no-sync-now").status == 0)
        let arrived = try Self.within(15) { try second.example("get", "background", "acct").stdout == "no-sync-now\n" }
        #expect(arrived != nil)
        #expect(try second.example("delete", "background", "acct").status == 0)
        let gone = try Self.within(15) { try first.example("get", "background", "acct").status == 44 }
        #expect(gone != nil)
    }
}
