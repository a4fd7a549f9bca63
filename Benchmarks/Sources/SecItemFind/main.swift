import Foundation
import GRDB
import Security

// Apple-style code in-process (issue 22 §3: the embedded path regressed to 1.6–2.0x the plain-SQLite floor): ITEMS
// generic passwords added with SecItemAdd, then FINDS SecItemCopyMatching calls by service + account returning the
// data, against the same lookups on a plain SQLite table (GRDB, WAL, synchronous FULL, no cryptography), interleaved
// in rounds so that both see the same machine.
//   SecItemFind ITEMS FINDS        (KEYCHAIN_BACKEND=embedded and a scratch XDG home: Benchmarks/daemon/secitem.sh)

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: SecItemFind ITEMS FINDS\n".utf8))
    exit(2)
}
let (itemCount, findCount) = (arguments[0], arguments[1])

func micros(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

// The keychain side: the items, through Apple's API.
let present: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "secitem-bench",
                              kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true]
var existing: CFTypeRef?
let already = SecItemCopyMatching(present as CFDictionary, &existing) == errSecSuccess ? ((existing as? [Any])?.count ?? 0) : 0
for i in already..<itemCount {
    let add: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "secitem-bench",
                              kSecAttrAccount as String: "account-\(i)", kSecValueData as String: Data("password-\(i)".utf8)]
    let status = SecItemAdd(add as CFDictionary, nil)
    guard status == errSecSuccess else {
        FileHandle.standardError.write(Data("SecItemAdd: \(status)\n".utf8))
        exit(1)
    }
}

// The floor.
let floorPath = FileManager.default.temporaryDirectory.appendingPathComponent("secitem-floor-\(UUID().uuidString).sqlite")
defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: floorPath.path + suffix) } }
var configuration = Configuration()
configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
let floor = try DatabaseQueue(path: floorPath.path, configuration: configuration)
try floor.writeWithoutTransaction { db in _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") }
try floor.write { db in
    try db.execute(sql: """
        CREATE TABLE items (rowid INTEGER PRIMARY KEY, service TEXT NOT NULL, account TEXT NOT NULL,
          secret BLOB NOT NULL, UNIQUE (service, account))
        """)
    for i in 0..<itemCount {
        try db.execute(sql: "INSERT INTO items (service, account, secret) VALUES (?, ?, ?)",
                       arguments: ["secitem-bench", "account-\(i)", Data("password-\(i)".utf8)])
    }
}

var keychain: [Double] = []
var plain: [Double] = []
var random: UInt64 = 0x9E37_79B9_7F4A_7C15
let rounds = 10
for round in 0...rounds {  // round 0 warms both and is not counted
    for _ in 0..<(findCount / rounds) {
        random = random &* 6364136223846793005 &+ 1442695040888963407
        let account = "account-\(Int(random >> 33) % max(itemCount, 1))"
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword,
                                    kSecAttrService as String: "secitem-bench", kSecAttrAccount as String: account,
                                    kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitOne]
        var result: CFTypeRef?
        let start = ContinuousClock.now
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        let took = micros(ContinuousClock.now - start)
        guard status == errSecSuccess, result is Data else {
            FileHandle.standardError.write(Data("SecItemCopyMatching: \(status)\n".utf8))
            exit(1)
        }
        if round > 0 { keychain.append(took) }
    }
    for _ in 0..<(findCount / rounds) {
        random = random &* 6364136223846793005 &+ 1442695040888963407
        let account = "account-\(Int(random >> 33) % max(itemCount, 1))"
        let start = ContinuousClock.now
        let secret = try floor.read { db in
            try Data.fetchOne(db, sql: "SELECT secret FROM items WHERE service = ? AND account = ?",
                              arguments: ["secitem-bench", account])
        }
        let took = micros(ContinuousClock.now - start)
        guard secret != nil else { exit(1) }
        if round > 0 { plain.append(took) }
    }
}
let (k50, f50) = (percentile(keychain, 0.5), percentile(plain, 0.5))
print(String(format: "SecItemCopyMatching, %d items, %d finds: p50 %.1f µs, p99 %.1f µs", itemCount, keychain.count, k50,
             percentile(keychain, 0.99)))
print(String(format: "plain SQLite floor:                        p50 %.1f µs, p99 %.1f µs", f50, percentile(plain, 0.99)))
print(String(format: "ratio (p50): %.2fx the floor", k50 / max(f50, 0.001)))
