import Benchmark
import BenchmarkFixtures
import Foundation
import GRDB
import KeychainCore
import KeychainStorage
import Synchronization

// The keychain engine against the floor: the same workload on plain SQLite through GRDB, with the same
// durability (WAL, synchronous FULL) and no cryptography. Stores are built once per size under the temp directory.

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput], timeUnits: .microseconds, warmupIterations: 10,
        maxDuration: .seconds(3), maxIterations: 5_000)

    for size in [1_000, 10_000, 100_000] {
        Benchmark("keychain find by service+account, \(size) items") { benchmark in
            let file = try Stores.keychain(size)
            let queries = try (0..<64).map { i in
                try QueryParser.parse(
                    ["class": "genp", "svce": "bench", "acct": .string("account-\((i * 7919) % size)"), "r_Data": true],
                    for: .search)
            }
            benchmark.startMeasurement()
            for i in benchmark.scaledIterations {
                blackHole(try file.search(queries[i % queries.count], caller: Stores.caller))
            }
        }
        Benchmark("sqlite find by service+account, \(size) items") { benchmark in
            let pool = try Stores.sqlite(size)
            benchmark.startMeasurement()
            for i in benchmark.scaledIterations {
                let account = "account-\((i * 7919) % size)"
                blackHole(try pool.read { db in
                    try Data.fetchOne(db, sql: "SELECT secret FROM items WHERE service = ? AND account = ?",
                                      arguments: ["bench", account])
                })
            }
        }
    }

    for size in [1_000, 10_000] {
        Benchmark("keychain find-all attributes, \(size) items", configuration: .init(maxIterations: 50)) { benchmark in
            let file = try Stores.keychain(size)
            let query = try QueryParser.parse(
                ["class": "genp", "r_Attributes": true, "m_Limit": "m_LimitAll"], for: .search)
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { blackHole(try file.search(query, caller: Stores.caller)) }
        }
        Benchmark("sqlite find-all attributes, \(size) items", configuration: .init(maxIterations: 50)) { benchmark in
            let pool = try Stores.sqlite(size)
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                blackHole(try pool.read { db in try Row.fetchAll(db, sql: "SELECT * FROM items") })
            }
        }
    }

    let writeSize = 10_000
    Benchmark("keychain add, \(writeSize) items", configuration: .init(maxIterations: 500)) { benchmark in
        let file = try Stores.keychain(writeSize, copy: "add")
        let base = Stores.counter.add(1, ordering: .relaxed).newValue * 1_000_000
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            blackHole(try file.add(
                QueryParser.parse(["class": "genp", "svce": "bench", "acct": .string("new-\(base + i)"),
                                   "v_Data": .data(Data("password-\(i)".utf8))], for: .add),
                caller: Stores.caller))
        }
    }
    Benchmark("sqlite add, \(writeSize) items", configuration: .init(maxIterations: 500)) { benchmark in
        let pool = try Stores.sqlite(writeSize, copy: "add")
        let base = Stores.counter.add(1, ordering: .relaxed).newValue * 1_000_000
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            try pool.write { db in
                try db.execute(sql: "INSERT INTO items (service, account, secret) VALUES (?, ?, ?)",
                               arguments: ["bench", "new-\(base + i)", Data("password-\(i)".utf8)])
            }
        }
    }
    Benchmark("keychain update, \(writeSize) items", configuration: .init(maxIterations: 500)) { benchmark in
        let file = try Stores.keychain(writeSize, copy: "update")
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            blackHole(try file.update(
                QueryParser.parse(["class": "genp", "svce": "bench", "acct": .string("account-\((i * 7919) % writeSize)")], for: .update),
                with: QueryParser.parseUpdate(["v_Data": .data(Data("changed-\(i)".utf8))], itemClass: .genericPassword),
                caller: Stores.caller))
        }
    }
    Benchmark("sqlite update, \(writeSize) items", configuration: .init(maxIterations: 500)) { benchmark in
        let pool = try Stores.sqlite(writeSize, copy: "update")
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            try pool.write { db in
                try db.execute(sql: "UPDATE items SET secret = ? WHERE service = ? AND account = ?",
                               arguments: [Data("changed-\(i)".utf8), "bench", "account-\((i * 7919) % writeSize)"])
            }
        }
    }
    Benchmark("keychain delete, \(writeSize) items", configuration: .init(maxIterations: 500)) { benchmark in
        let file = try Stores.keychain(writeSize, copy: "delete")
        let base = Stores.counter.add(1, ordering: .relaxed).newValue * 1_000_000
        try file.addAll(benchmark.scaledIterations.map { i in
            try QueryParser.parse(["class": "genp", "svce": "bench", "acct": .string("gone-\(base + i)")], for: .add)
        }, caller: Stores.caller)
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            blackHole(try file.delete(
                QueryParser.parse(["class": "genp", "svce": "bench", "acct": .string("gone-\(base + i)")], for: .delete),
                caller: Stores.caller))
        }
    }
    Benchmark("sqlite delete, \(writeSize) items", configuration: .init(maxIterations: 500)) { benchmark in
        let pool = try Stores.sqlite(writeSize, copy: "delete")
        let base = Stores.counter.add(1, ordering: .relaxed).newValue * 1_000_000
        try pool.write { db in
            for i in benchmark.scaledIterations {
                try db.execute(sql: "INSERT INTO items (service, account, secret) VALUES (?, ?, ?)",
                               arguments: ["bench", "gone-\(base + i)", Data("x".utf8)])
            }
        }
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            try pool.write { db in
                try db.execute(sql: "DELETE FROM items WHERE service = ? AND account = ?", arguments: ["bench", "gone-\(base + i)"])
            }
        }
    }

    Benchmark("keychain unlock (scrypt N=2^17)", configuration: .init(maxDuration: .seconds(10), maxIterations: 10)) { benchmark in
        let file = try Stores.keychain(1_000)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            file.lock()
            try file.unlock(password: Stores.password)
        }
    }
}

/// Builds and caches the stores the benchmarks read.
enum Stores {
    static let caller = BenchmarkStore.caller
    static let password = BenchmarkStore.password
    static let counter = Atomic<Int>(0)
    static let root = BenchmarkStore.root
    private static let opened = Mutex<[String: KeychainFile]>([:])
    private static let pools = Mutex<[String: DatabaseQueue]>([:])

    static func configuration() -> KeychainFile.Configuration { BenchmarkStore.configuration() }

    /// A keychain with `size` generic passwords (service "bench", accounts account-0...), unlocked.
    static func keychain(_ size: Int, copy: String? = nil) throws -> KeychainFile {
        let key = "\(size)-\(copy ?? "base")"
        if let file = opened.withLock({ $0[key] }) { return file }
        let base = try BenchmarkStore.url(size: size)
        var url = base
        var config = configuration()
        if let copy {
            // A copy is the same keychain (same id), so it gets its own device state, with the same device key.
            let dir = root.appendingPathComponent("copies/\(size)-\(copy)-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir.appendingPathComponent("state"), withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                at: config.stateDirectory.appendingPathComponent("device.key"),
                to: dir.appendingPathComponent("state/device.key"))
            url = dir.appendingPathComponent("copy.keychain-db")
            try FileManager.default.copyItem(at: base, to: url)
            for suffix in ["-wal"] where FileManager.default.fileExists(atPath: base.path + suffix) {
                try FileManager.default.copyItem(atPath: base.path + suffix, toPath: url.path + suffix)
            }
            config.stateDirectory = dir.appendingPathComponent("state")
        }
        let file = try KeychainFile.open(at: url, configuration: config)
        try file.unlock(password: password)
        opened.withLock { $0[key] = file }
        return file
    }

    /// The floor: the same rows in a plain table, no cryptography, same durability.
    static func sqlite(_ size: Int, copy: String? = nil) throws -> DatabaseQueue {
        let key = "\(size)-\(copy ?? "base")"
        if let pool = pools.withLock({ $0[key] }) { return pool }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let path = root.appendingPathComponent("plain-\(size)-\(copy ?? "base")-\(UUID().uuidString).sqlite").path
        // One connection, as the keychain has (a DatabasePool would reset synchronous to NORMAL).
        var config = Configuration()
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        let pool = try DatabaseQueue(path: path, configuration: config)
        try pool.writeWithoutTransaction { db in _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") }
        try pool.write { db in
            try db.execute(sql: """
                CREATE TABLE items (rowid INTEGER PRIMARY KEY, service TEXT NOT NULL, account TEXT NOT NULL,
                  label TEXT, secret BLOB NOT NULL, UNIQUE (service, account))
                """)
            for i in 0..<size {
                try db.execute(sql: "INSERT INTO items (service, account, label, secret) VALUES (?, ?, ?, ?)",
                               arguments: ["bench", "account-\(i)", "label \(i)", Data("password-\(i)".utf8)])
            }
        }
        pools.withLock { $0[key] = pool }
        return pool
    }
}
