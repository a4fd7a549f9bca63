import Foundation
import KeychainCore
import KeychainInterface
import KeychainTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// keychaind's runtime (issue 22 §1): services under one ServiceGroup, messages through one logger, locking on
/// timers rather than a look once a second.
@Suite("keychaind's runtime")
struct DaemonRuntimeTests {
    typealias DaemonHome = DaemonTests.DaemonHome

    /// Voluntary context switches of each of `pid`'s threads whose name begins with keychaind (its own threads, not
    /// the Swift runtime's), by thread id.
    static func ownThreadWakeUps(_ pid: pid_t) -> [String: Int] {
        var counts: [String: Int] = [:]
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for task in tasks {
            let name = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)) ?? ""
            guard name.hasPrefix("keychaind") else { continue }
            let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") }
            let value = line.flatMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") }
            counts["\(task) \(name.trimmingCharacters(in: .newlines))"] = value ?? 0
        }
        return counts
    }

    @Test("an idle keychaind sleeps: with an unlocked keychain whose timeout is far away, none of its threads wakes")
    func idleDaemonSleeps() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("security", "create-keychain", "-p", "pw", "work").status == 0)
        #expect(try home.run("security", "set-keychain-settings", "-t", "600", "work").status == 0)
        let pid = try #require(home.daemonPID)
        // The last client's connection has ended and what it freed was given back (at most a second later).
        usleep(2_000_000)
        let before = Self.ownThreadWakeUps(pid)
        #expect(!before.isEmpty)
        usleep(3_500_000)
        let after = Self.ownThreadWakeUps(pid)
        // A look once a second would have woken at least three times by now.
        let woken = after.filter { thread, count in count > (before[thread] ?? 0) }
        #expect(woken.isEmpty, "threads that woke while nothing was due: \(woken.keys.sorted())")
        // And the keychain is still unlocked: a search finds nothing (errSecItemNotFound) instead of asking.
        #expect(try home.run("security", "find-generic-password", "-s", "none", "work").status == 44)
    }

    @Test("a keychain created unlocked by a client that stays connected still locks on its idle timer, announced by the daemon")
    func createdKeychainLocksOnTime() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("security", "list-keychains").status == 0)  // starts keychaind
        let socket = KeychainLocations.current(environment: home.environment).daemonSocket
        let listener = try #require(try RemoteKeychainService.connect(to: socket))
        defer { listener.close() }
        let heard = Mutex<[KeychainEvent]>([])
        let subscription = try #require(try listener.subscribe { event in heard.withLock { $0.append(event) } })
        defer { subscription.cancel() }
        // One connection that creates the keychain and stays: no connection ends to wake the scheduler.
        let creator = try #require(try RemoteKeychainService.connect(to: socket))
        defer { creator.close() }
        let keychain = creator.resolve("made-here")
        try creator.createKeychain(keychain, password: SecretBytes(utf8: "pw"),
                                   settings: KeychainSettings(lockInterval: 1, lockOnSleep: false))
        var locked = false
        for _ in 0..<100 where !locked {
            usleep(100_000)
            locked = heard.withLock { $0.contains { $0.kind == .lock && $0.keychain == keychain.path } }
        }
        #expect(locked, "no lock event for \(keychain.path) within 10 s")
        #expect(try creator.state(of: keychain).isLocked)
    }

    @Test("a program that outlives its keychaind goes on: after a SIGKILL its next read and its next write are answered by a keychaind started again; a closed connection stays closed")
    func callsOutliveKeychaind() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        let environment = home.environment
        guard case .remote(let service) = try KeychainBackend.choose(locations: .current(environment: environment),
                                                                     environment: environment)
        else {
            Issue.record("KEYCHAIN_BACKEND=daemon gave no keychaind")
            return
        }
        let keychain = service.resolve("outlived")
        try service.createKeychain(keychain, password: nil, settings: KeychainSettings(lockInterval: nil, lockOnSleep: false))
        try service.add(["class": "genp", "svce": "outlived", "acct": "first", "v_Data": .data(Data("one".utf8))], to: keychain)

        func killDaemon() throws -> pid_t {
            let pid = try #require(home.daemonPID)
            kill(pid, SIGKILL)
            // Gone before the next call, every thread of it (``isZombie(_:)``): a write sent to a keychaind still
            // on its way out reaches its socket, and is then rightly not sent again. A loaded machine takes seconds.
            let deadline = ContinuousClock.now + .seconds(60)
            while kill(pid, 0) == 0 && !isZombie(pid) && ContinuousClock.now < deadline { usleep(10_000) }
            #expect(kill(pid, 0) != 0 || isZombie(pid), "keychaind \(pid) still runs a minute after SIGKILL")
            return pid
        }
        func secret(_ account: String) throws -> String? {
            let found = try service.search(["class": "genp", "svce": "outlived", "acct": .string(account), "r_Data": true],
                                           in: keychain)
            return found.first?.secret?.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }

        // Killed between two calls: the read goes to a keychaind started again (its request never reached the
        // dead one), on the same service object.
        let first = try killDaemon()
        #expect(try secret("first") == "one")
        let second = try #require(home.daemonPID)
        #expect(second != first)

        // And a write: it had not gone out when the connection was found broken, so it is made once, on the next.
        _ = try killDaemon()
        try service.add(["class": "genp", "svce": "outlived", "acct": "second", "v_Data": .data(Data("two".utf8))], to: keychain)
        #expect(home.daemonPID != nil && home.daemonPID != second)
        #expect(try secret("second") == "two")
        #expect(try secret("first") == "one")

        // A connection closed on purpose is not made again.
        service.close()
        #expect(throws: KeychainError.self) { _ = try secret("first") }
    }

    @Test("a write in flight when keychaind is killed is not sent again: it fails with errSecNotAvailable, and nobody is asked twice")
    func writeInFlightNotRepeated() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        let pinentry = try DaemonTests.ScriptedPinentry(in: home.tool.home)
        let environment = home.environment(asking: pinentry)
        guard case .remote(let service) = try KeychainBackend.choose(locations: .current(environment: environment),
                                                                     environment: environment)
        else {
            Issue.record("KEYCHAIN_BACKEND=daemon gave no keychaind")
            return
        }
        defer { service.close() }
        let keychain = service.resolve("held")
        try service.createKeychain(keychain, password: SecretBytes(utf8: "pw"),
                                   settings: KeychainSettings(lockInterval: nil, lockOnSleep: false))
        try service.lock(keychain)
        // The add waits for the keychain's password, a question that stays up; a second keychaind asked again would
        // be given it, and the add would then be made.
        let go = home.tool.home.appendingPathComponent("go")
        defer { _ = FileManager.default.createFile(atPath: go.path, contents: nil) }  // the held pinentry ends
        try pinentry.answer("hold:\(go.path)", "pin:pw", "pin:pw")
        let outcome = Mutex<Result<Void, KeychainError>?>(nil)
        Thread {
            let result = Result { () throws(KeychainError) in
                _ = try service.add(["class": "genp", "svce": "held", "acct": "a", "v_Data": .data(Data("v".utf8))],
                                    to: keychain)
            }
            outcome.withLock { $0 = result }
        }.start()
        var asked = false
        for _ in 0..<300 where !asked {
            usleep(50_000)
            asked = pinentry.passwordRequests == 1
        }
        #expect(asked, "keychaind did not ask for the keychain's password")
        let pid = try #require(home.daemonPID)
        kill(pid, SIGKILL)
        var result: Result<Void, KeychainError>?
        for _ in 0..<300 {
            result = outcome.withLock { $0 }
            if result != nil { break }
            usleep(50_000)
        }
        switch result {
        case .failure(let error)?: #expect(error.status == .notAvailable, "\(error)")
        case .success?: Issue.record("the add was made: it was sent to a second keychaind")
        case nil: Issue.record("the add did not return within 15 s of the kill")
        }
        #expect(pinentry.passwordRequests == 1)
    }

    @Test("keychaind's messages go to standard error, one line each, never to standard output; SIGINT ends it gracefully")
    func messagesOnStandardError() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        let output = try #require(closeOnExecPipe())
        let errors = try #require(closeOnExecPipe())
        var environment = home.environment
        environment["KEYCHAIN_LOG_LEVEL"] = "debug"
        let daemon = try ChildProcess.spawn(
            Tool.binary.deletingLastPathComponent().appendingPathComponent("keychaind").path, arguments: ["--foreground"],
            environment: environment, stdout: output.write, stderr: errors.write)
        close(output.write)
        close(errors.write)
        defer {
            close(output.read)
            close(errors.read)
        }
        for _ in 0..<500 where !home.socketExists { usleep(10_000) }
        #expect(try home.run("security", "create-keychain", "-p", "pw", "work").status == 0)
        // A wrong password: storage logs a warning (through swift-log, whose default would be standard output).
        #expect(try home.run("security", "unlock-keychain", "-p", "not-the-Password-77", "work").status == 51)  // errSecAuthFailed
        daemon.send(SIGINT)
        #expect(daemon.wait() == .exited(0))
        #expect(!home.socketExists)  // a graceful end: the socket removed
        let stdout = Self.readAll(output.read), stderr = Self.readAll(errors.read)
        #expect(stdout.isEmpty, "keychaind wrote to standard output: \(stdout)")
        let lines = stderr.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("keychaind: serving ") })
        #expect(lines.contains { $0 == "keychaind: warning: keychain.password.wrong" })
        #expect(lines.allSatisfy { $0.hasPrefix("keychaind: ") })
        #expect(!stderr.contains("not-the-Password-77"))
    }

    @Test("a removed socket ends keychaind as SIGTERM does: a graceful shutdown of every service, exit status 0")
    func socketRemovedEndsGracefully() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        let errors = try #require(closeOnExecPipe())
        let daemon = try ChildProcess.spawn(
            Tool.binary.deletingLastPathComponent().appendingPathComponent("keychaind").path, arguments: ["--foreground"],
            environment: home.environment, stderr: errors.write)
        close(errors.write)
        defer { close(errors.read) }
        for _ in 0..<500 where !home.socketExists { usleep(10_000) }
        #expect(try home.run("security", "add-generic-password", "-a", "a", "-s", "s", "-w", "kept").status == 0)
        try FileManager.default.removeItem(at: home.tool.home.appendingPathComponent("run/keychain"))
        #expect(daemon.wait() == .exited(0))
        let stderr = Self.readAll(errors.read)
        #expect(stderr.contains("was removed or replaced; stopping"))
        #expect(!stderr.contains("stopped:"), "\(stderr)")
    }

    static func readAll(_ fd: Int32) -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
