import Foundation
import KeychainClient
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Short versions of the reliability runs: several processes on one keychain file, and writers killed mid-write.
@Suite("Reliability, end to end")
struct ReliabilityTests {
    @Test("four processes adding and reading concurrently lose nothing and see no internal errors")
    func concurrentProcesses() async throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        try tool.run("add-generic-password", "-a", "seed", "-s", "seed", "-w", "x")
        let perProcess = Int(ProcessInfo.processInfo.environment["KEYCHAIN_CONCURRENT_OPS"] ?? "") ?? 15
        let failures = try await withThrowingTaskGroup(of: [String].self) { group in
            for p in 0..<4 {
                group.addTask {
                    var failed: [String] = []
                    for i in 0..<perProcess {
                        let add = try tool.run("add-generic-password", "-a", "p\(p)-\(i)", "-s", "conc", "-w", "v\(p)-\(i)")
                        if add.status != 0 { failed.append("add p\(p)-\(i): \(add.status) \(add.stderr)") }
                        let find = try tool.run("find-generic-password", "-a", "p\(p)-\(i)", "-s", "conc", "-w")
                        if find.stdout != "v\(p)-\(i)\n" { failed.append("find p\(p)-\(i): \(find.status) \(find.stderr)") }
                    }
                    return failed
                }
            }
            var all: [String] = []
            for try await f in group { all += f }
            return all
        }
        #expect(failures.isEmpty, "\(failures)")
        let dump = try tool.run("dump-keychain")
        #expect(dump.stdout.components(separatedBy: "\"svce\"<blob>=\"conc\"").count - 1 == 4 * perProcess)
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
            // The keychain opens and every acknowledged write is there, with its data.
            let check = try tool.run("dump-keychain", "-d")
            #expect(check.status == 0, "round \(round): \(check.stderr)")
            for done in acknowledged {
                #expect(check.stdout.contains("\"acct\"<blob>=\"\(done)\"\n"), "round \(round): \(done) missing")
                #expect(check.stdout.contains("data:\n\"secret-\(done.dropFirst(5))\"\n"), "round \(round): \(done) data")
            }
            // A write killed before it was acknowledged is either wholly there or not there at all.
            for lost in unacknowledged where check.stdout.contains("\"acct\"<blob>=\"\(lost)\"\n") {
                #expect(check.stdout.contains("data:\n\"secret-\(lost.dropFirst(5))\"\n"), "round \(round): \(lost) half there")
            }
        }
        print("killed writers: \(killed) of \(rounds) killed before acknowledging; \(acknowledged.count) acknowledged")
    }
}
