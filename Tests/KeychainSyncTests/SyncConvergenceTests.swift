import Foundation
import KeychainInterface
import KeychainTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Three devices and two server instances on one database, under random adds, updates, deletes and rounds, with
/// keychaind killed mid-round and a server instance killed and started again: at the end every device holds the
/// same items, no write made after the last conflict is lost, and nothing readable is in the database.
@Suite("Sync convergence", .serialized)
struct SyncConvergenceTests {
    /// The HTTP client's pool used to retry a failed connect with a backoff that grew at every failure and outlived
    /// the outage: once the server was back, rounds failed with the outage's "connection refused" for as long as the
    /// backoff had grown (seconds to a minute), each after waiting out its connect timeout.
    @Test("a server that was down is reached at the first round after it is back, and a round while it is down fails at once")
    func serverBackAfterOutage() throws {
        let database = try PostgresCluster()
        defer { database.stop() }
        var server = try SyncServerProcess(database: database)
        let port = server.port
        defer { server.stop() }
        let device = try Device("outage")
        defer { device.cleanUp() }
        #expect(try device.security("sync-setup", "--server", server.url).status == 0)
        #expect(try device.example("set", "outage-key", "acct", stdin: "before").status == 0)
        #expect(try device.security("sync-now").status == 0)

        server.kill()
        for attempt in 0..<6 {
            let began = Date()
            let round = try device.security("sync-now")
            #expect(round.status != 0, "attempt \(attempt): a round with the server down succeeded")
            #expect(round.stderr.contains("cannot be reached"), "attempt \(attempt): \(round.stderr)")
            #expect(Date().timeIntervalSince(began) < 4, "attempt \(attempt) waited for the connect timeout")
        }
        server = try SyncServerProcess(database: database, port: port)
        let back = try device.security("sync-now")
        #expect(back.status == 0, "the first round after the server came back: \(back.stderr)")
    }

    @Test("three devices converge through kills of keychaind and of a server instance")
    func converge() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["SYNC_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max))
        print("sync convergence seed: \(seed) (SYNC_SEED=\(seed) replays it)")
        var random = SplitMix64(seed: seed)
        let database = try PostgresCluster()
        defer { database.stop() }
        let one = try SyncServerProcess(database: database)
        defer { one.stop() }
        var two = try SyncServerProcess(database: database)
        let twoPort = two.port
        defer { two.stop() }
        let devices = try ["a", "b", "c"].map { try Device("conv-\($0)") }
        defer { devices.forEach { $0.cleanUp() } }

        #expect(try devices[0].security("sync-setup", "--server", one.url).status == 0)
        _ = try SyncDevicesTests.join(devices[1], to: devices[0], server: one)
        _ = try SyncDevicesTests.join(devices[2], to: devices[0], server: two)  // the third talks to the other instance

        let keys = (0..<6).map { "conv-key-\($0)" }
        var written: [String: Set<String>] = [:]  // every value ever stored under a key
        var twoIsUp = true
        for step in 0..<40 {
            let device = devices[Int(random.next() % 3)]
            let key = keys[Int(random.next() % UInt64(keys.count))]
            switch random.next() % 10 {
            case 0...3:
                let value = "conv-value-\(step)"
                if try device.example("set", key, "acct", stdin: value).status == 0 { written[key, default: []].insert(value) }
            case 4:
                _ = try device.example("delete", key, "acct")
            case 5...7:
                _ = try device.security("sync-now")
            case 8:
                // keychaind killed at a random instant of a round.
                let child = try ChildProcess.spawn(Built.path("security"), arguments: ["sync-now"],
                                                   environment: device.environment)
                usleep(UInt32(random.next() % 80_000))
                if let pid = device.daemonPID { kill(pid, SIGKILL) }
                _ = child.wait()
            default:
                // The second instance killed, or started again on its port.
                if twoIsUp { two.kill() } else { two = try SyncServerProcess(database: database, port: twoPort) }
                twoIsUp.toggle()
            }
        }
        if !twoIsUp { two = try SyncServerProcess(database: database, port: twoPort) }

        // A write on each device after the storm, to a key no other device touches: none may be lost.
        for (index, device) in devices.enumerated() {
            #expect(try device.example("set", "final-\(index)", "acct", stdin: "final-value-\(index)").status == 0)
        }
        // Rounds on every device in turn until they agree: a conflict of two adds settles within two passes.
        for pass in 0..<4 {
            for device in devices {
                let round = try device.security("sync-now")
                #expect(round.status == 0, "pass \(pass): \(round.stderr) (seed \(seed))")
            }
        }
        for key in keys + (0..<3).map({ "final-\($0)" }) {
            let values = try devices.map { try $0.example("get", key, "acct") }
            let first = values[0]
            #expect(values.allSatisfy { $0.status == first.status && $0.stdout == first.stdout },
                    "\(key): \(values.map { "\($0.status) \($0.stdout)" }) (seed \(seed))")
            if first.status == 0, key.hasPrefix("conv-") {
                #expect(written[key, default: []].contains(first.stdout.trimmingCharacters(in: .newlines)))
            }
        }
        for index in 0..<3 {
            #expect(try devices[0].example("get", "final-\(index)", "acct").stdout == "final-value-\(index)\n")
        }
        let dump = try database.dump()
        for canary in ["conv-value", "final-value", "conv-key"] { #expect(!dump.contains(canary)) }
    }
}
