import DaemonBenchmarkSupport
import Foundation
import KeychainClient
import KeychainCore
import KeychainWire
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

// keychaind under load, as issue 22 §3 states it, measured from one process (no process starts):
//   parallel   finds only: one client alone, then CLIENTS clients at once (throughput ratio, p50/p99)
//   disturbed  CLIENTS clients doing finds, quiet, then beside a client that holds a question open, clients that
//              sent half a frame and stopped, and a client that floods oversized and garbage frames (p99 ratios)
//   idle       the daemon's resident memory before, with and after COUNT idle connections
//   steady     the daemon's resident memory after 10,000 and after TOTAL finds (growth)
// With a keychaind serving the XDG directories of the environment (Benchmarks/daemon/scale.sh starts one, with a
// pinentry that never answers).
//   DaemonScale ITEMS parallel CLIENTS REQUESTS | disturbed CLIENTS REQUESTS | idle COUNT | steady TOTAL

let words = Array(CommandLine.arguments.dropFirst())
func usage() -> Never {
    FileHandle.standardError.write(Data("""
        usage: DaemonScale ITEMS parallel CLIENTS REQUESTS | disturbed CLIENTS REQUESTS | idle COUNT | steady TOTAL

        """.utf8))
    exit(2)
}
guard words.count >= 3, let itemCount = Int(words[0]) else { usage() }
let mode = words[1]
let numbers = words.dropFirst(2).compactMap { Int($0) }
let socket = daemonSocket
/// Clients that must never be asked anything (a question would stall the measurement, not keychaind).
let quietEnvironment = ["KEYCHAIN_PROMPTER": "none"]

@Sendable func connect(environment: [String: String] = quietEnvironment) -> RemoteKeychainService {
    connectToDaemon(environment: environment)
}

/// keychaind's resident memory in kB, from its pid in the lock file beside the socket.
func daemonResidentKB() -> Int {
    guard let text = try? String(contentsOfFile: socket.path + ".lock", encoding: .utf8),
        let pid = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)),
        let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return -1 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
}

/// keychaind's CPU time so far (user + system), in clock ticks (100 per second).
func daemonCPUTicks() -> Int {
    guard let text = try? String(contentsOfFile: socket.path + ".lock", encoding: .utf8),
        let pid = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)),
        let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return -1 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)  // fields 14 and 15 of the whole line
}

/// This process's CPU time so far (user + system, every thread), in microseconds.
func processCPUMicros() -> Int64 {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func micros(_ t: timeval) -> Int64 { Int64(t.tv_sec) * 1_000_000 + Int64(t.tv_usec) }
    return micros(usage.ru_utime) + micros(usage.ru_stime)
}

/// What a run of finds measured: every latency, and the wall time from the moment all clients were connected.
struct FindRun {
    var latencies: [Int64]
    var wallMicros: Int64
    var errors: Int
    /// keychaind's CPU time during the run, in clock ticks.
    var daemonTicks: Int
    /// This benchmark's own CPU time during the run (its client threads), in microseconds: on 2 cores the clients'
    /// share is what keychaind cannot have.
    var clientMicros: Int64
    var throughput: Int64 { Int64(latencies.count) * 1_000_000 / max(wallMicros, 1) }
    var summary: String {
        "\(latencies.count) finds, \(errors) errors, \(throughput) finds/s, p50 \(percentile(latencies, 0.5)) µs, "
            + "p99 \(percentile(latencies, 0.99)) µs, keychaind CPU \(daemonTicks * 10_000_000 / max(latencies.count, 1) / 1000) µs/find, "
            + "clients' CPU \(clientMicros / Int64(max(latencies.count, 1))) µs/find"
    }
}

/// `clients` connections, each doing `requests` finds of random items by service + account, started together.
/// With `perSecond` > 0 each client sends at that pace (an open load: latency counts from when the find was due,
/// so a stall is not hidden by the client waiting for it); otherwise as fast as answers come (a closed loop).
func finds(clients: Int, requests: Int, seed: UInt64 = 1, perSecond: Int = 0) -> FindRun {
    let connected = DispatchGroup()
    let go = DispatchSemaphore(value: 0)
    let done = DispatchGroup()
    let results = Mutex<(latencies: [Int64], errors: Int)>(([], 0))
    for c in 0..<clients {
        connected.enter()
        done.enter()
        Thread {
            defer { done.leave() }
            let client = connect()
            defer { client.close() }
            connected.leave()
            go.wait()
            var local: [Int64] = []
            local.reserveCapacity(requests)
            var errors = 0
            var random = (UInt64(c + 1) &+ seed &* 7919) &* 0x9E37_79B9_7F4A_7C15
            let interval = perSecond > 0 ? Duration.seconds(1) / perSecond : .zero
            // Clients start spread over one interval, not all at once.
            var due = ContinuousClock.now + interval * Double(c) / Double(max(clients, 1))
            for _ in 0..<requests {
                random = random &* 6364136223846793005 &+ 1442695040888963407
                let account = "fill-\(Int(random >> 33) % max(itemCount, 1))"
                let wait = due - ContinuousClock.now
                if perSecond > 0, wait > .zero {
                    Thread.sleep(forTimeInterval: Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18)
                }
                let start = perSecond > 0 ? due : ContinuousClock.now
                due += interval
                do {
                    let found = try client.search(["class": "genp", "svce": "scale", "acct": .string(account),
                                                   "r_Data": true], in: keychain)
                    if found.count != 1 { errors += 1 }
                } catch {
                    errors += 1
                }
                local.append(micros(ContinuousClock.now - start))
            }
            results.withLock {
                $0.latencies += local
                $0.errors += errors
            }
        }.start()
    }
    connected.wait()
    let ticks = daemonCPUTicks()
    let ownCPU = processCPUMicros()
    let started = ContinuousClock.now
    for _ in 0..<clients { go.signal() }
    done.wait()
    let wall = micros(ContinuousClock.now - started)
    let daemonTicks = daemonCPUTicks() - ticks
    let clientMicros = processCPUMicros() - ownCPU
    return results.withLock {
        FindRun(latencies: $0.latencies, wallMicros: wall, errors: $0.errors, daemonTicks: daemonTicks,
                clientMicros: clientMicros)
    }
}

/// A raw connection to keychaind that has said hello (what a misbehaving client starts from); -1 when refused.
@Sendable func rawConnection() -> Int32 {
    let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return -1 }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (i, b) in socket.path.utf8.enumerated() { raw[i] = b }
    }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard connected == 0, Framing.send(Framing.hello(), on: fd), (try? Framing.receive(on: fd, limit: 4096)) != nil else {
        close(fd)
        return -1
    }
    return fd
}

/// Sends `bytes` as they are (no framing of ours).
@Sendable func sendRaw(_ bytes: [UInt8], on fd: Int32) -> Bool {
    bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
}

/// `flood`: until killed, connections that greet, then send a frame announcing 2 GiB, or 256 bytes of garbage.
if mode == "spin" {
    var x: UInt64 = 1
    while true { x = x &* 6364136223846793005 &+ 1; if x == 0 { print(x) } }
}
if mode == "flood" {
    var round = 0
    while true {
        let fd = rawConnection()
        if fd < 0 { continue }
        round += 1
        if round % 2 == 0 {
            _ = sendRaw([0x7F, 0xFF, 0xFF, 0xFF], on: fd)
        } else {
            _ = sendRaw([0, 0, 1, 0] + (0..<256).map { UInt8(truncatingIfNeeded: $0 &* 31) }, on: fd)
        }
        close(fd)
    }
}

let setup = connect()
let keychain = setup.resolve("login")
do {
    try setup.createKeychainIfMissing(keychain, password: nil, settings: .never)
    // Filled once per home (the runs below reuse it); a fresh keychain has none (errSecItemNotFound).
    let present = (try? setup.search(["class": "genp", "svce": "scale", "m_Limit": "m_LimitAll"], in: keychain).count) ?? 0
    for i in present..<itemCount {
        _ = try setup.add(["class": "genp", "svce": "scale", "acct": .string("fill-\(i)"),
                           "v_Data": .data(Data("secret-\(i)".utf8))], to: keychain)
    }
} catch {
    FileHandle.standardError.write(Data("DaemonScale: setup failed: \(error.message)\n".utf8))
    exit(1)
}

func ratio(_ a: Int64, _ b: Int64) -> String { String(format: "%.2f", Double(a) / Double(max(b, 1))) }

switch (mode, numbers.count) {
case ("parallel", 2):
    let (clients, requests) = (numbers[0], numbers[1])
    _ = finds(clients: 1, requests: 2_000)  // warm: the file's pages, the daemon's threads
    let alone = finds(clients: 1, requests: requests)
    print("one client, \(itemCount) items: \(alone.summary)")
    let together = finds(clients: clients, requests: max(requests / clients, 200), seed: 2)
    print("\(clients) clients at once: \(together.summary)")
    print("throughput \(clients) clients / one client: \(ratio(together.throughput, alone.throughput))x")
    // Every client always waiting for its next answer makes latency clients / throughput (Little's law); what a
    // user sees is the latency at a load the daemon can carry: each client at a fixed pace, together half of what
    // one client alone gets through.
    let pace = max(alone.throughput / 2 / Int64(clients), 1)
    let paced = finds(clients: clients, requests: Int(pace) * 10, seed: 3, perSecond: Int(pace))
    print("\(clients) clients at \(pace) finds/s each (\(pace * Int64(clients)) finds/s offered): \(paced.summary)")
    exit(alone.errors + together.errors + paced.errors == 0 ? 0 : 1)

case ("disturbed", 2):
    let (clients, requests) = (numbers[0], numbers[1])
    _ = finds(clients: clients, requests: 500)
    // A keychain with a password, locked: a call on it from a client with a display makes keychaind ask for the
    // password through its pinentry, which (in scale.sh) never answers.
    let held = setup.resolve("held")
    do {
        try setup.createKeychainIfMissing(held, password: SecretBytes(utf8: "held-password"), settings: .never)
        try setup.lock(held)
    } catch {
        FileHandle.standardError.write(Data("DaemonScale: cannot make the held keychain: \(error.message)\n".utf8))
        exit(1)
    }
    var disturbers: [(String, () -> Void)] = []
    disturbers.append(("a question held open", {
        Thread {
            let asking = connect(environment: ["DISPLAY": ":scale-bench"])
            _ = try? asking.search(["class": "genp", "m_Limit": "m_LimitAll"], in: held)  // until the end
        }.start()
        Thread.sleep(forTimeInterval: 0.5)  // the question is up
    }))
    disturbers.append(("16 clients that sent half a frame and stopped", {
        for _ in 0..<16 {
            let fd = rawConnection()
            // A header that announces 1 MiB, then 100 bytes, then nothing.
            _ = sendRaw([0, 16, 0, 0] + [UInt8](repeating: 7, count: 100), on: fd)
        }
    }))
    // A control: a process that keeps one core busy and never talks to keychaind. What a flooder costs the others
    // beyond this is keychaind's doing; this much is the machine's (2 cores).
    let spinner = Process()
    disturbers.append(("a process spinning on one core (no keychaind work: the control)", {
        spinner.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        spinner.arguments = [String(itemCount), "spin", "0"]
        try? spinner.run()
        Thread.sleep(forTimeInterval: 0.5)
    }))
    // The flooder is a process of its own (a client is a process; keychaind tells clients apart by process).
    let flooder = Process()
    disturbers.append(("a client process flooding oversized and garbage frames", {
        spinner.terminate()  // in place of the control, not beside it
        spinner.waitUntilExit()
        flooder.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        flooder.arguments = [String(itemCount), "flood", "0"]
        try? flooder.run()
        Thread.sleep(forTimeInterval: 0.5)
    }))
    let quiet = finds(clients: clients, requests: requests, seed: 3)
    print("quiet, \(clients) clients: \(quiet.summary)")
    var worst = 0.0
    for (index, (name, start)) in disturbers.enumerated() {
        start()  // disturbers stay: each run has every one before it too
        let run = finds(clients: clients, requests: requests, seed: UInt64(4 + index))
        let p99Ratio = Double(percentile(run.latencies, 0.99)) / Double(max(percentile(quiet.latencies, 0.99), 1))
        worst = max(worst, p99Ratio)
        print("beside \(name): \(run.summary); p99 / quiet p99 "
              + String(format: "%.2f", p99Ratio))
    }
    flooder.terminate()
    flooder.waitUntilExit()
    print(String(format: "worst p99 ratio %.2f (bar: 1.2)", worst))

case ("idle", 1):
    let count = numbers[0]
    _ = finds(clients: 1, requests: 500)
    Thread.sleep(forTimeInterval: 0.5)
    let before = daemonResidentKB()
    var idle: [RemoteKeychainService] = []
    for _ in 0..<count { idle.append(connect()) }
    // Each has had its session answered; one call each, so that every connection has its service.
    for client in idle { _ = try? client.search(["class": "genp", "svce": "scale", "acct": "fill-0"], in: keychain) }
    Thread.sleep(forTimeInterval: 1)
    let with = daemonResidentKB()
    for client in idle { client.close() }
    idle.removeAll()
    Thread.sleep(forTimeInterval: 2)
    let after = daemonResidentKB()
    print("keychaind resident memory: \(before) kB before, \(with) kB with \(count) idle connections "
          + "(\((with - before) / 1024) MB for them, \((with - before) * 1024 / max(count, 1)) bytes each), "
          + "\(after) kB after they closed")

case ("steady", 1):
    let total = numbers[0]
    let clients = 8
    let first = finds(clients: clients, requests: 10_000 / clients)
    Thread.sleep(forTimeInterval: 0.5)
    let early = daemonResidentKB()
    print("after 10,000 finds: \(first.summary); keychaind resident \(early) kB")
    var done = 10_000
    var errors = first.errors
    while done < total {
        let batch = min(200_000, total - done)
        let run = finds(clients: clients, requests: batch / clients, seed: UInt64(done))
        done += run.latencies.count
        errors += run.errors
        print("after \(done) finds: \(run.summary); keychaind resident \(daemonResidentKB()) kB")
    }
    Thread.sleep(forTimeInterval: 0.5)
    let late = daemonResidentKB()
    print("resident after \(done) finds / after 10,000: \(late) / \(early) kB = "
          + String(format: "%.3f (bar: within 10%%)", Double(late) / Double(max(early, 1))) + ", \(errors) errors")

default:
    usage()
}
setup.close()
