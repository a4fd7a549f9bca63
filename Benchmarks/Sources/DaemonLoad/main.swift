import DaemonBenchmarkSupport
import Foundation
import KeychainClient
import KeychainCore
import Synchronization

// keychaind under load, measured from inside one process (no process starts): the in-process round trip of a find,
// then CLIENTS connections each sending REQUESTS calls at once (MIX: "mixed", the default, or "finds" only), then
// keychaind's CPU time per call of that second part and its resident memory.
//   DaemonLoad ITEMS CLIENTS REQUESTS [MIX]  (with a keychaind serving the XDG directories of the environment;
//                                             Benchmarks/daemon/load.sh starts one in a scratch home)

let arguments = CommandLine.arguments.dropFirst().prefix(3).compactMap { Int($0) }
let mix = CommandLine.arguments.count > 4 ? CommandLine.arguments[4] : "mixed"
guard arguments.count == 3, CommandLine.arguments.count <= 5, mix == "mixed" || mix == "finds" else {
    FileHandle.standardError.write(Data("usage: DaemonLoad ITEMS CLIENTS REQUESTS [mixed|finds]\n".utf8))
    exit(2)
}
let (itemCount, clientCount, requestCount) = (arguments[0], arguments[1], arguments[2])
let findsOnly = mix == "finds"

/// keychaind's CPU time so far (utime + stime of every thread, /proc/PID/stat), in µs; its pid is in the socket's
/// lock file.
func keychaindCPU() -> Int64? {
    guard let pid = try? String(contentsOfFile: daemonSocket.path + ".lock", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines),
          let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")")
    else { return nil }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Int64(fields[11]), let system = Int64(fields[12]) else { return nil }
    return (user + system) * 1_000_000 / Int64(sysconf(Int32(_SC_CLK_TCK)))
}
@Sendable func connect() -> RemoteKeychainService { connectToDaemon() }

let setup = connect()
let keychain = setup.resolve("load")
do {
    // A login keychain, as every user has: keychaind keeps the access log's key in it (without one it would look
    // for it after every call).
    try? setup.createKeychain(setup.resolve("login"), password: nil, settings: .never)
    try setup.createKeychain(keychain, password: nil, settings: .never)
    // Prefilled in batches through one connection (each add is one synced transaction in the daemon).
    for i in 0..<itemCount {
        _ = try setup.add(["class": "genp", "svce": "load", "acct": .string("fill-\(i)"),
                           "v_Data": .data(Data("secret-\(i)".utf8))], to: keychain)
    }
} catch {
    FileHandle.standardError.write(Data("DaemonLoad: setup failed: \(error.message)\n".utf8))
    exit(1)
}

// 1. One client, finds only: the round trip through the socket, the daemon's dispatch and the engine's find.
var roundTrips: [Int64] = []
for i in 0..<2_000 {
    let account = "fill-\((i * 7919) % max(itemCount, 1))"
    let start = ContinuousClock.now
    _ = try? setup.search(["class": "genp", "svce": "load", "acct": .string(account), "r_Data": true], in: keychain)
    roundTrips.append(micros(ContinuousClock.now - start))
}
print("find round trip, one client, \(itemCount) items, 2000 finds: p50 \(percentile(roundTrips, 0.5)) µs, "
      + "p99 \(percentile(roundTrips, 0.99)) µs")

// 2. CLIENTS connections at once, REQUESTS each: 60% finds of shared items, 20% adds, 10% updates and 10% deletes
// of the client's own items. Every call must succeed (finds of own items that were deleted expect not-found).
let errors = Atomic(0)
let cpuBefore = keychaindCPU()
let latencies = Mutex<[String: [Int64]]>([:])
let started = ContinuousClock.now
let done = DispatchGroup()
for c in 0..<clientCount {
    done.enter()
    Thread {
        defer { done.leave() }
        let client = connect()
        defer { client.close() }
        var own: [Int] = []
        var next = 0
        var local: [String: [Int64]] = [:]
        var random = UInt64(c + 1) &* 0x9E37_79B9_7F4A_7C15
        for _ in 0..<requestCount {
            random = random &* 6364136223846793005 &+ 1442695040888963407
            let roll = Int(random >> 33) % 100
            let start = ContinuousClock.now
            let kind: String
            do {
                if findsOnly || roll < 60 || own.isEmpty && roll >= 80 {
                    kind = "find"
                    let account = "fill-\(Int(random >> 20) % max(itemCount, 1))"
                    _ = try client.search(["class": "genp", "svce": "load", "acct": .string(account), "r_Data": true],
                                          in: keychain)
                } else if roll < 80 {
                    kind = "add"
                    _ = try client.add(["class": "genp", "svce": .string("load-\(c)"), "acct": .string("own-\(next)"),
                                        "v_Data": .data(Data("v".utf8))], to: keychain)
                    own.append(next)
                    next += 1
                } else if roll < 90 {
                    kind = "update"
                    let account = own[Int(random >> 24) % own.count]
                    _ = try client.update(["class": "genp", "svce": .string("load-\(c)"), "acct": .string("own-\(account)")],
                                          with: ["v_Data": .data(Data("w".utf8))], in: keychain)
                } else {
                    kind = "delete"
                    let index = Int(random >> 24) % own.count
                    _ = try client.delete(["class": "genp", "svce": .string("load-\(c)"),
                                           "acct": .string("own-\(own[index])")], in: keychain)
                    own.remove(at: index)
                }
            } catch {
                errors.add(1, ordering: .relaxed)
                FileHandle.standardError.write(Data("client \(c): \((error as? KeychainError)?.message ?? "\(error)")\n".utf8))
                continue
            }
            local[kind, default: []].append(micros(ContinuousClock.now - start))
        }
        latencies.withLock { all in for (k, v) in local { all[k, default: []] += v } }
    }.start()
}
done.wait()
let wall = micros(ContinuousClock.now - started)
let cpuAfter = keychaindCPU()
let all = latencies.withLock { $0 }
let total = all.values.reduce(0) { $0 + $1.count }
print("\(clientCount) clients × \(requestCount) \(mix) requests: \(total) done, \(errors.load(ordering: .relaxed)) errors, "
      + "\(wall / 1000) ms wall, \(Int64(total) * 1_000_000 / max(wall, 1)) requests/s")
if let cpuBefore, let cpuAfter {
    print("  keychaind CPU time: \(cpuAfter - cpuBefore) µs, \((cpuAfter - cpuBefore) / Int64(max(total, 1))) µs per request")
}
for kind in ["find", "add", "update", "delete"] {
    let values = all[kind] ?? []
    print("  \(kind): \(values.count), p50 \(percentile(values, 0.5)) µs, p99 \(percentile(values, 0.99)) µs")
}
setup.close()
exit(errors.load(ordering: .relaxed) == 0 ? 0 : 1)
