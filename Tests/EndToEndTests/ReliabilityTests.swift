import Foundation
import KeychainClient
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Short versions of the reliability runs: several processes on one keychain file, and writers killed mid-write.
@Suite("Reliability, end to end")
struct ReliabilityTests {
    @Test("four streams of mixed operations on one keychain lose nothing and end equal to a sequential model")
    func concurrentProcesses() async throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        try tool.run("add-generic-password", "-a", "seed", "-s", "seed", "-w", "x")
        let perProcess = Int(ProcessInfo.processInfo.environment["KEYCHAIN_CONCURRENT_OPS"] ?? "") ?? 30
        // Each stream works on accounts of its own, so its expected model does not depend on the interleaving;
        // the file, the WAL, the locks and the manifest are shared by all four.
        let outcomes = try await withThrowingTaskGroup(of: ([String], [String: String]).self) { group in
            for p in 0..<4 {
                group.addTask {
                    var random = SplitMix64(seed: UInt64(p + 1))
                    var model: [String: String] = [:]
                    var failed: [String] = []
                    for i in 0..<perProcess {
                        let account = "p\(p)-\(random.next() % 6)", value = "v\(p)-\(i)"
                        let (arguments, expected): ([String], Int32) = switch random.next() % 4 {
                        case 0: (["add-generic-password", "-a", account, "-s", "conc", "-w", value], model[account] == nil ? 0 : 45)
                        case 1: (["add-generic-password", "-U", "-a", account, "-s", "conc", "-w", value], 0)
                        case 2: (["delete-generic-password", "-a", account, "-s", "conc"], model[account] == nil ? 44 : 0)
                        default: (["find-generic-password", "-a", account, "-s", "conc", "-w"], model[account] == nil ? 44 : 0)
                        }
                        let result = try tool.run(program: Tool.binary, arguments, stdin: nil)
                        if result.status != expected {
                            failed.append("\(arguments.joined(separator: " ")): \(result.status) \(result.stderr)")
                        } else if arguments[0] == "find-generic-password", expected == 0, result.stdout != model[account]! + "\n" {
                            failed.append("find \(account): \(result.stdout) instead of \(model[account]!)")
                        }
                        switch arguments[0] {
                        case "add-generic-password" where expected == 0: model[account] = value
                        case "delete-generic-password": model[account] = nil
                        default: break
                        }
                    }
                    return (failed, model)
                }
            }
            var all: [([String], [String: String])] = []
            for try await outcome in group { all.append(outcome) }
            return all
        }
        let failures = outcomes.flatMap(\.0)
        #expect(failures.isEmpty, "\(failures)")
        let expected = outcomes.reduce(into: [String: String]()) { $0.merge($1.1) { a, _ in a } }
        let dump = try tool.run("dump-keychain", "-d")
        #expect(dump.status == 0)
        #expect(Self.items(inDump: dump.stdout, service: "conc") == expected)
    }

    /// account → password of every item of `service` in a `dump-keychain -d` listing.
    static func items(inDump dump: String, service: String) -> [String: String] {
        var out: [String: String] = [:]
        for entry in dump.components(separatedBy: "keychain: \"").dropFirst() {
            guard entry.contains("\"svce\"<blob>=\"\(service)\"\n"),
                let account = entry.firstMatch(of: /"acct"<blob>="([^"]*)"/)?.1,
                let data = entry.firstMatch(of: /data:\n"([^"]*)"/)?.1
            else { continue }
            out[String(account)] = String(data)
        }
        return out
    }

    @Test("a writer killed at random instants loses no acknowledged write and leaves a keychain that opens")
    func killedWriters() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        try tool.run("add-generic-password", "-a", "seed", "-s", "seed", "-w", "x")
        var acknowledged: [String] = []
        var generator = SystemRandomNumberGenerator()
        let rounds = Int(ProcessInfo.processInfo.environment["KEYCHAIN_KILL_ROUNDS"] ?? "") ?? 25
        var killed = 0
        var unacknowledged: [String] = []
        for round in 0..<rounds {
            let account = "kill-\(round)"
            let writer = try ChildProcess.spawn(
                Tool.binary.path, arguments: ["add-generic-password", "-a", account, "-s", "crash", "-w", "secret-\(round)"],
                environment: tool.environment)
            usleep(UInt32.random(in: 0...60_000, using: &generator))
            writer.send(SIGKILL)
            if writer.wait() == .exited(0) {
                acknowledged.append(account)
            } else {
                killed += 1
                unacknowledged.append(account)
            }
            // The keychain opens and every acknowledged write is there, with its own data.
            let check = try tool.run("dump-keychain", "-d")
            #expect(check.status == 0, "round \(round): \(check.stderr)")
            let present = Self.items(inDump: check.stdout, service: "crash")
            for done in acknowledged {
                #expect(present[done] == "secret-\(done.dropFirst(5))", "round \(round): \(done) missing or wrong")
            }
            // A write killed before it was acknowledged is either wholly there or not there at all.
            for lost in unacknowledged where present[lost] != nil {
                #expect(present[lost] == "secret-\(lost.dropFirst(5))", "round \(round): \(lost) half there")
            }
            #expect(Set(present.keys).isSubset(of: Set(acknowledged + unacknowledged)), "round \(round): unknown items")
        }
        print("killed writers: \(killed) of \(rounds) killed before acknowledging; \(acknowledged.count) acknowledged")
    }
}

/// A small deterministic generator, so that a failing sequence can be replayed.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
