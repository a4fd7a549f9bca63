import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus
import KeychainTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// keychaind, end to end: the built tools with KEYCHAIN_BACKEND=daemon in a private home and runtime directory.
@Suite("keychaind, end to end")
struct DaemonTests {
    /// A tool environment that goes through the daemon (started on demand by the first command).
    struct DaemonHome {
        let tool = Tool()
        var environment: [String: String] {
            var environment = tool.environment
            environment["KEYCHAIN_BACKEND"] = "daemon"
            environment["XDG_RUNTIME_DIR"] = tool.home.appendingPathComponent("run").path
            return environment
        }

        init() throws {
            try FileManager.default.createDirectory(
                at: tool.home.appendingPathComponent("run"), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }

        @discardableResult
        func run(_ program: String = "security", _ arguments: String..., stdin: String = "",
                 backend: String = "daemon") throws -> Tool.Result {
            try run(program, arguments, stdin: stdin, environment: ["KEYCHAIN_BACKEND": backend])
        }

        /// Runs one of the built programs with this home's environment, changed by `changes` (nil removes one).
        func run(_ program: String, _ arguments: [String], stdin: String = "",
                 environment changes: [String: String?]) throws -> Tool.Result {
            var environment = self.environment
            for (name, value) in changes { environment[name] = value }
            let path = Tool.binary.deletingLastPathComponent().appendingPathComponent(program).path
            let output = try ChildProcess.run(path, arguments: arguments, environment: environment, input: Data(stdin.utf8))
            let status: Int32 = switch output.termination {
            case .exited(let code): code
            case .signalled(let signal): 128 + signal
            }
            return Tool.Result(status: status, stdout: String(decoding: output.stdout, as: UTF8.self),
                               stderr: String(decoding: output.stderr, as: UTF8.self))
        }

        /// This home's environment with keychaind asking through `pinentry` on a display of its own.
        func environment(asking pinentry: ScriptedPinentry) -> [String: String] {
            var environment = self.environment
            environment["PINENTRY_PROGRAM"] = pinentry.program.path
            environment["DISPLAY"] = ":kc-test"
            return environment
        }

        /// A copy of keychain-example in this home's bin/: the same program name (so it claims the same access
        /// group) in a file of its own, which a test can change as a rebuild would.
        func copyOfExample() throws -> URL {
            let bin = tool.home.appendingPathComponent("bin")
            try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
            let copy = bin.appendingPathComponent("keychain-example")
            try FileManager.default.copyItem(at: Tool.binary.deletingLastPathComponent().appendingPathComponent("keychain-example"),
                                             to: copy)
            return copy
        }

        /// The daemon's pid, from its lock file.
        var daemonPID: pid_t? {
            let directory = tool.home.appendingPathComponent("run/keychain")
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            guard let lock = names.first(where: { $0.hasSuffix(".sock.lock") }),
                let text = try? String(contentsOf: directory.appendingPathComponent(lock), encoding: .utf8)
            else { return nil }
            return pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
        }

        var socketExists: Bool {
            let directory = tool.home.appendingPathComponent("run/keychain")
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            return names.contains { $0.hasSuffix(".sock") }
        }

        /// Stops the daemon (SIGTERM) and waits for it to remove its socket, then for it to end: it removes the
        /// socket first (no new client reaches it) and closes its keychains after, so the two are not one instant.
        func stopDaemon() {
            guard let pid = daemonPID else { return }
            kill(pid, SIGTERM)
            for _ in 0..<200 where socketExists { usleep(10_000) }
            for _ in 0..<500 where kill(pid, 0) == 0 && !isZombie(pid) { usleep(10_000) }
        }

        func cleanUp() {
            stopDaemon()
            try? FileManager.default.removeItem(at: tool.home)
        }
    }

    @Test("a keychain with a password is unlocked once; then new processes read and write it until it locks")
    func unlockOnce() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("security", "create-keychain", "-p", "pw", "work").status == 0)
        #expect(home.daemonPID != nil)  // started on demand
        #expect(try home.run("security", "lock-keychain", "work").status == 0)
        #expect(try home.run("security", "unlock-keychain", "-p", "pw", "work").status == 0)
        // The case that failed with exit 36 before the daemon: each command was a new process with a locked file.
        #expect(try home.run("security", "add-generic-password", "-a", "a", "-s", "s", "-w", "sekrit", "work").status == 0)
        #expect(try home.run("security", "find-generic-password", "-a", "a", "-s", "s", "-w", "work").stdout == "sekrit\n")
        // git's helper, in processes of its own, through the same unlocked keychain.
        #expect(try home.run("security", "default-keychain", "-s", "work").status == 0)
        #expect(try home.run("git-credential-keychain", "store",
                             stdin: "protocol=https\nhost=git.example\nusername=u\npassword=tok\n\n").status == 0)
        #expect(try home.run("git-credential-keychain", "get", stdin: "protocol=https\nhost=git.example\n\n").stdout
                == "username=u\npassword=tok\n")
        // Locked for every client at once.
        #expect(try home.run("security", "lock-keychain", "work").status == 0)
        #expect(try home.run("security", "find-generic-password", "-a", "a", "-s", "s", "-w", "work").status == 36)
        // The same files in-process are locked too (nothing unlocked leaks out of the daemon).
        #expect(try home.run("security", "find-generic-password", "-a", "a", "-s", "s", "-w", "work",
                             backend: "embedded").status == 36)
    }

    @Test("the idle interval locks a keychain in the daemon; so does the daemon's restart (the keys lived in it)")
    func idleLockAndRestart() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("security", "create-keychain", "-p", "pw", "work").status == 0)
        #expect(try home.run("security", "add-generic-password", "-a", "a", "-s", "s", "-w", "v", "work").status == 0)
        try home.run("security", "set-keychain-settings", "-t", "1", "work")
        usleep(2_500_000)
        #expect(try home.run("security", "find-generic-password", "-a", "a", "-s", "s", "-w", "work").status == 36)
        #expect(try home.run("security", "set-keychain-settings", "work").status == 0)  // no timeout
        #expect(try home.run("security", "unlock-keychain", "-p", "pw", "work").status == 0)
        #expect(try home.run("security", "find-generic-password", "-a", "a", "-s", "s", "-w", "work").stdout == "v\n")
        home.stopDaemon()
        #expect(try home.run("security", "find-generic-password", "-a", "a", "-s", "s", "-w", "work").status == 36)
    }

    @Test("the daemon decides who is calling: a program that claims another's identity reads nothing of it")
    func identityIsTheDaemons() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("security", "add-generic-password", "-a", "acct", "-s", "svc", "-w", "tools-only").status == 0)
        // keychain-example is not one of the tools: its own group only.
        #expect(try home.run("keychain-example", "get", "svc", "acct").status != 0)
        // In-process a program declares its own identity, so the claim works there (the weakness the daemon ends).
        var claim = home.environment
        claim["KEYCHAIN_APPLICATION_IDENTIFIER"] = "security"
        claim["KEYCHAIN_BACKEND"] = "embedded"
        let example = Tool.binary.deletingLastPathComponent().appendingPathComponent("keychain-example").path
        let embedded = try ChildProcess.run(example, arguments: ["get", "svc", "acct"], environment: claim)
        #expect(String(decoding: embedded.stdout, as: UTF8.self) == "tools-only\n")
        claim["KEYCHAIN_BACKEND"] = "daemon"
        let throughDaemon = try ChildProcess.run(example, arguments: ["get", "svc", "acct"], environment: claim)
        #expect(String(decoding: throughDaemon.stdout, as: UTF8.self).isEmpty)
        // Its own items it reads and writes.
        #expect(try home.run("keychain-example", "set", "mine", "me", stdin: "own").status == 0)
        #expect(try home.run("keychain-example", "get", "mine", "me").stdout == "own\n")
    }

    @Test("SIGTERM: the daemon finishes, removes its socket, keeps every acknowledged write; the next client starts it")
    func stopAndRestart() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        for i in 0..<5 {
            #expect(try home.run("security", "add-generic-password", "-a", "a\(i)", "-s", "s", "-w", "v\(i)").status == 0)
        }
        let first = try #require(home.daemonPID)
        home.stopDaemon()
        #expect(!home.socketExists)
        #expect(kill(first, 0) != 0 || errno == ESRCH || isZombie(first))
        for i in 0..<5 {
            #expect(try home.run("security", "find-generic-password", "-a", "a\(i)", "-s", "s", "-w").stdout == "v\(i)\n")
        }
        #expect(home.daemonPID != nil && home.daemonPID != first)
    }

    @Test("a daemon whose socket is removed (runtime directory cleaned) closes its keychains and ends")
    func socketRemoved() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("security", "add-generic-password", "-a", "a", "-s", "s", "-w", "kept").status == 0)
        let pid = try #require(home.daemonPID)
        try FileManager.default.removeItem(at: home.tool.home.appendingPathComponent("run/keychain"))
        var ended = false
        for _ in 0..<100 where !ended {
            usleep(100_000)
            ended = kill(pid, 0) != 0 || isZombie(pid)
        }
        #expect(ended)
        // Everything it acknowledged is on disk, and the next client starts a new daemon.
        try FileManager.default.createDirectory(at: home.tool.home.appendingPathComponent("run"),
                                                withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        #expect(try home.run("security", "find-generic-password", "-a", "a", "-s", "s", "-w").stdout == "kept\n")
        #expect(home.daemonPID != nil && home.daemonPID != pid)
    }

    @Test("SIGKILL of the daemon during writes: every acknowledged write survives; the next client starts a new one")
    func killedDuringWrites() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("security", "list-keychains").status == 0)  // starts the daemon
        var acknowledged: [Int] = []
        for round in 0..<6 {
            // One write timed first, so the kill lands mid-flight on a loaded machine as on an idle one.
            let started = Date()
            #expect(try home.run("security", "add-generic-password", "-a", "k\(round)-9", "-s", "kill", "-w", "v\(round)-9")
                .status == 0)
            acknowledged.append(round * 10 + 9)
            let oneWrite = Date().timeIntervalSince(started)
            // Writers in flight while the daemon dies.
            let writers = try (0..<3).map { i in
                try ChildProcess.spawn(
                    Tool.binary.path,
                    arguments: ["add-generic-password", "-a", "k\(round)-\(i)", "-s", "kill", "-w", "v\(round)-\(i)"],
                    environment: home.environment)
            }
            usleep(UInt32(oneWrite * (0.4 + Double(round) * 0.3) * 1_000_000))
            if let pid = home.daemonPID { kill(pid, SIGKILL) }
            for (i, writer) in writers.enumerated() where writer.wait() == .exited(0) {
                acknowledged.append(round * 10 + i)
            }
            // The next command starts a new daemon (the old one left its socket behind, and its lock went with it).
            for entry in acknowledged {
                let account = "k\(entry / 10)-\(entry % 10)"
                let found = try home.run("security", "find-generic-password", "-a", account, "-s", "kill", "-w")
                #expect(found.stdout == "v\(entry / 10)-\(entry % 10)\n",
                        "round \(round): \(account): exit \(found.status), \(found.stderr)")
            }
        }
        // Some writers in flight must have been acknowledged, or the kills proved nothing about them.
        #expect(acknowledged.contains { $0 % 10 != 9 })
    }

    @Test("the default (auto): the first command starts keychaind, so a keychain unlocked once stays unlocked")
    func autoStartsTheDaemon() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        func run(_ arguments: String...) throws -> Tool.Result {
            var environment = home.environment
            environment.removeValue(forKey: "KEYCHAIN_BACKEND")
            let output = try ChildProcess.run(Tool.binary.path, arguments: arguments, environment: environment)
            guard case .exited(let code) = output.termination else { return Tool.Result(status: -1, stdout: "", stderr: "") }
            return Tool.Result(status: code, stdout: String(decoding: output.stdout, as: UTF8.self),
                               stderr: String(decoding: output.stderr, as: UTF8.self))
        }
        // Issue 10's first finding, as a new user types it, with nothing set.
        #expect(try run("create-keychain", "-p", "pw", "work").status == 0)
        #expect(home.daemonPID != nil)
        #expect(try run("lock-keychain", "work").status == 0)
        #expect(try run("unlock-keychain", "-p", "pw", "work").status == 0)
        #expect(try run("add-generic-password", "-a", "a", "-s", "s", "-w", "sekrit", "work").status == 0)
        #expect(try run("find-generic-password", "-a", "a", "-s", "s", "-w", "work").stdout == "sekrit\n")
    }

    @Test("keychaind lets go of the standard output it was started with (D-Bus activation inside $(…) would wait for it)")
    func releasesStandardOutput() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        // Started as a bus starts it: no --notify-ready, its standard output a pipe whose reader waits for the end.
        let output = try #require(closeOnExecPipe())
        let daemon = try ChildProcess.spawn(Tool.binary.deletingLastPathComponent().appendingPathComponent("keychaind").path,
                                            arguments: ["--foreground"], environment: home.environment, stdout: output.write)
        close(output.write)
        defer {
            daemon.send(SIGKILL)
            _ = daemon.wait()
            close(output.read)
        }
        var reader = pollfd(fd: output.read, events: Int16(POLLIN), revents: 0)
        var ended = false
        let deadline = Date().addingTimeInterval(20)
        while !ended, Date() < deadline {
            guard poll(&reader, 1, 200) > 0 else { continue }
            var byte: UInt8 = 0
            ended = read(output.read, &byte, 1) == 0
        }
        #expect(ended, "keychaind still holds its standard output")
        #expect(kill(daemon.pid, 0) == 0)  // and it is still running
    }

    @Test("keychaind ends on SIGTERM even when the program that started it left the signal blocked")
    func endsOnTermWhenBlocked() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        var blocked = sigset_t(), previous = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        // Foundation's Process starts its child with the starting thread's signal mask.
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        let process = Process()
        process.executableURL = Tool.binary.deletingLastPathComponent().appendingPathComponent("keychaind")
        process.arguments = ["--foreground"]
        process.environment = home.environment
        process.standardError = FileHandle.nullDevice
        let started = Result { try process.run() }
        pthread_sigmask(SIG_SETMASK, &previous, nil)
        try started.get()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        for _ in 0..<500 where !home.socketExists { usleep(10_000) }
        kill(process.processIdentifier, SIGTERM)
        for _ in 0..<500 where process.isRunning { usleep(10_000) }
        #expect(!process.isRunning)
        #expect(!home.socketExists)  // it ended as SIGTERM ends it: socket removed
    }

    @Test("auto with no keychaind to start (not beside the tool, not in PATH): in-process, and no daemon appears")
    func autoWithoutDaemonIsInProcess() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        let bin = home.tool.home.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        for program in ["security", "keychain-embedded"] {
            try FileManager.default.copyItem(at: Tool.binary.deletingLastPathComponent().appendingPathComponent(program),
                                             to: bin.appendingPathComponent(program))
        }
        var environment = home.environment
        environment.removeValue(forKey: "KEYCHAIN_BACKEND")
        environment["PATH"] = "/usr/bin:/bin"
        let security = bin.appendingPathComponent("security").path
        let add = try ChildProcess.run(security, arguments: ["add-generic-password", "-a", "a", "-s", "s", "-w", "v"],
                                       environment: environment)
        #expect(add.termination == .exited(0), "\(String(decoding: add.stderr, as: UTF8.self))")
        // It says so, once, and why (never a silent fallback).
        let notice = String(decoding: add.stderr, as: UTF8.self)
        #expect(notice.components(separatedBy: "keychain: keychaind is not available").count == 2, "\(notice)")
        #expect(notice.contains("this program opens the keychain files itself"))
        let find = try ChildProcess.run(security, arguments: ["find-generic-password", "-a", "a", "-s", "s", "-w"],
                                        environment: environment)
        #expect(String(decoding: find.stdout, as: UTF8.self) == "v\n")
        // Chosen knowingly: no notice.
        environment["KEYCHAIN_BACKEND"] = "embedded"
        let chosen = try ChildProcess.run(security, arguments: ["find-generic-password", "-a", "a", "-s", "s", "-w"],
                                          environment: environment)
        #expect(String(decoding: chosen.stdout, as: UTF8.self) == "v\n")
        #expect(chosen.stderr.isEmpty)
        #expect(home.daemonPID == nil)
        #expect(!home.socketExists)
    }

    @Test("a keychaind that cannot start: auto goes in-process, daemon fails at once with its reason (errSecNotAvailable)")
    func daemonThatCannotStart() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        // A runtime directory that is a file: keychaind cannot make its socket there, and says so.
        let blocked = home.tool.home.appendingPathComponent("not-a-directory")
        try Data().write(to: blocked)
        var environment = home.environment
        environment["XDG_RUNTIME_DIR"] = blocked.path
        environment["KEYCHAIN_BACKEND"] = "daemon"
        let refused = try ChildProcess.run(Tool.binary.path, arguments: ["list-keychains"], environment: environment)
        #expect(refused.termination == .exited(Int32(KeychainStatus.notAvailable.rawValue & 0xff)))
        #expect(String(decoding: refused.stderr, as: UTF8.self).contains("keychaind did not start"))
        environment["KEYCHAIN_BACKEND"] = "auto"
        let add = try ChildProcess.run(Tool.binary.path, arguments: ["add-generic-password", "-a", "a", "-s", "s", "-w", "v"],
                                       environment: environment)
        #expect(add.termination == .exited(0), "\(String(decoding: add.stderr, as: UTF8.self))")
    }

    @Test("one daemon per home: a second keychaind for the same directories declines to start")
    func singleInstance() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("security", "list-keychains").status == 0)
        let second = try home.run("keychaind", "--foreground")
        #expect(second.status == 0)
        #expect(second.stderr.contains("already running"))
    }

    @Test("systemd socket activation: keychaind takes the listening socket it is handed and serves the default name",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate")))
    func socketActivation() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("e2e-sa-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let runtime = home.appendingPathComponent("run/keychain")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        chmod(home.appendingPathComponent("run").path, 0o700)
        // Only HOME and XDG_RUNTIME_DIR: the user's standard locations, so the socket has the unit's name.
        var environment = ["HOME": home.path, "XDG_RUNTIME_DIR": home.appendingPathComponent("run").path]
        environment["PATH"] = ProcessInfo.processInfo.environment["PATH"]
        let socket = runtime.appendingPathComponent("keychaind.sock").path
        let daemon = Tool.binary.deletingLastPathComponent().appendingPathComponent("keychaind").path
        let activator = try ChildProcess.spawn(
            "/usr/bin/systemd-socket-activate",
            arguments: ["-l", socket, "-E", "HOME", "-E", "XDG_RUNTIME_DIR", daemon, "--foreground"],
            environment: environment)
        defer {
            activator.send(SIGTERM)
            _ = activator.wait()
        }
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: socket) { usleep(10_000) }
        var client = environment
        client["KEYCHAIN_BACKEND"] = "auto"
        let add = try ChildProcess.run(Tool.binary.path, arguments: ["add-generic-password", "-a", "x", "-s", "y", "-w", "z"],
                                       environment: client)
        #expect(add.termination == .exited(0))
        // Unlock state and the file live in the daemon it started: the item is there for the next client.
        let find = try ChildProcess.run(Tool.binary.path, arguments: ["find-generic-password", "-a", "x", "-s", "y", "-w"],
                                        environment: client)
        #expect(String(decoding: find.stdout, as: UTF8.self) == "z\n")
        #expect(FileManager.default.fileExists(atPath: runtime.appendingPathComponent("keychaind.sock.lock").path))
    }

    @Test("a locked keychain needed by a program is unlocked through pinentry on the program's own terminal; also when keychaind has no locale",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux")
                   && FileManager.default.isExecutableFile(atPath: "/usr/bin/pinentry-curses")),
          arguments: [false, true])
    func unlockPromptOnClientTerminal(withoutLocale: Bool) throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        var environment = home.environment
        environment["PINENTRY_PROGRAM"] = "/usr/bin/pinentry-curses"  // the daemon's own choice, from its start
        // keychaind started with no locale at all (as a bare systemd or D-Bus activation may start it): pinentry
        // still gets a UTF-8 one, or it fails every question ("A locale function failed").
        if withoutLocale { for name in ["LANG", "LC_ALL", "LC_CTYPE", "LANGUAGE"] { environment.removeValue(forKey: name) } }
        func run(_ program: String, _ arguments: [String], stdin: String = "") throws -> Int32? {
            let path = Tool.binary.deletingLastPathComponent().appendingPathComponent(program).path
            let output = try ChildProcess.run(path, arguments: arguments, environment: environment, input: Data(stdin.utf8))
            if case .exited(let code) = output.termination { return code }
            return nil
        }
        #expect(try run("security", ["create-keychain", "-p", "pw", "work"]) == 0)
        #expect(try run("security", ["default-keychain", "-s", "work"]) == 0)
        #expect(try run("keychain-example", ["set", "svc", "acct"], stdin: "from-the-daemon") == 0)
        #expect(try run("security", ["lock-keychain", "work"]) == 0)

        let output = home.tool.home.appendingPathComponent("out-\(UUID().uuidString.prefix(8))")
        let variables = environment.filter { ["XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "HOME",
                                                "XDG_RUNTIME_DIR", "KEYCHAIN_BACKEND", "PINENTRY_PROGRAM"].contains($0.key) }
            .map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let example = Tool.binary.deletingLastPathComponent().appendingPathComponent("keychain-example").path
        let terminal = try TmuxTerminal(
            command: "env \(variables) \(example) get svc acct > \(output.path); echo $? >> \(output.path); sleep 120")
        defer { terminal.close() }
        let screen = terminal.waitForScreen(containing: "Password:")
        #expect(TmuxTerminal.words(of: screen).contains("wants to use the keychain “work”"), "\(screen)")
        #expect(try terminal.enterPassword("pw"), "\(terminal.screen())")
        var result = ""
        _ = terminal.waitUntil(seconds: 60) {
            result = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            return result.split(separator: "\n").count >= 2
        }
        #expect(result == "from-the-daemon\n0\n")
        // And it stays unlocked for the next process, without asking.
        #expect(try run("keychain-example", ["get", "svc", "acct"]) == 0)
    }

    /// A daemon home whose keychaind finds a private bus standing in for the system bus (where logind lives).
    struct SystemBusHome {
        let bus: PrivateSessionBus
        let home: DaemonHome

        init() throws {
            bus = try PrivateSessionBus()
            home = try DaemonHome()
        }

        /// Runs `security` in the home; its exit status.
        func security(_ arguments: String...) throws -> Int32 {
            var environment = home.environment
            environment["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address
            let path = Tool.binary.deletingLastPathComponent().appendingPathComponent("security").path
            let output = try ChildProcess.run(path, arguments: arguments, environment: environment)
            if case .exited(let code) = output.termination { return code }
            return -1
        }
    }

    @Test("logind's PrepareForSleep locks the keychains set to lock on sleep before the machine sleeps; only logind's signal counts",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")))
    func prepareForSleep() throws {
        let system = try SystemBusHome()
        defer { system.home.cleanUp() }
        let bus = system.bus, security = system.security
        #expect(try security("create-keychain", "-p", "pw", "work") == 0)
        #expect(try security("add-generic-password", "-a", "a", "-s", "s", "-w", "v", "work") == 0)
        #expect(try security("create-keychain", "-p", "pw", "stays") == 0)
        #expect(try security("set-keychain-settings", "stays") == 0)  // no -l: not locked on sleep
        #expect(try security("set-keychain-settings", "-l", "work") == 0)
        let signal = DBusMessage.signal(path: "/org/freedesktop/login1", interface: "org.freedesktop.login1.Manager",
                                        member: "PrepareForSleep", body: [.boolean(true)])
        // Anyone else's PrepareForSleep is not logind's.
        let impostor = try DBusConnection(address: bus.address)
        defer { impostor.close() }
        _ = try impostor.send(signal)
        usleep(300_000)
        #expect(try security("find-generic-password", "-a", "a", "-s", "s", "work") == 0)
        // logind's (the owner of org.freedesktop.login1) locks it at once.
        let logind = try DBusConnection(address: bus.address)
        defer { logind.close() }
        _ = try logind.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                        interface: "org.freedesktop.DBus", member: "RequestName",
                                        body: [.string("org.freedesktop.login1"), .uint32(4)]))
        _ = try logind.send(signal)
        var status: Int32 = 0
        for _ in 0..<100 {
            status = try security("find-generic-password", "-a", "a", "-s", "s", "work")
            if status == 36 { break }
            usleep(50_000)
        }
        #expect(status == 36)
        #expect(try security("show-keychain-info", "stays") == 0)
        #expect(try security("add-generic-password", "-a", "b", "-s", "s", "-w", "v", "stays") == 0)  // still unlocked
    }

    @Test("keychaind holds logind's delay inhibitor and lets it go only once the keychains set to lock on sleep are locked; taken again on waking",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")))
    func sleepInhibitor() throws {
        let system = try SystemBusHome()
        defer { system.home.cleanUp() }
        let bus = system.bus, security = system.security
        // logind, as it answers Inhibit: the write end of a pipe whose read end it watches; the lock is released
        // when every copy of the write end is closed (the read end then reads end-of-file).
        let inhibitors = Mutex<[(arguments: [String], watched: UnixFileDescriptor)]>([])
        func startLogind() throws -> DBusConnection {
            let logind = try DBusConnection(address: bus.address, fileDescriptors: true)
            #expect(logind.passesFileDescriptors)
            _ = try logind.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                            interface: "org.freedesktop.DBus", member: "RequestName",
                                            body: [.string("org.freedesktop.login1"), .uint32(4)]))
            logind.startReceiving { [logind] message in
                guard message.kind == .methodCall, message.member == "Inhibit" else { return }
                guard let ends = closeOnExecPipe() else { return }
                var reply = message.methodReturn([.unixFD(0)])
                reply.fileDescriptors = [UnixFileDescriptor(taking: ends.write)]
                inhibitors.withLock { $0.append((message.body.compactMap(\.stringValue), UnixFileDescriptor(taking: ends.read))) }
                _ = try? logind.send(reply)
            }
            return logind
        }
        var logind = try startLogind()
        defer { logind.close() }
        /// Whether the inhibitor's read end shows end-of-file within `milliseconds` (the lock released).
        func released(_ watched: UnixFileDescriptor, within milliseconds: Int32) -> Bool {
            var entry = pollfd(fd: watched.fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, milliseconds) == 1 else { return false }
            var byte: UInt8 = 0
            return read(watched.fd, &byte, 1) == 0
        }
        func waitForInhibitors(_ count: Int) -> Bool {
            for _ in 0..<200 where inhibitors.withLock({ $0.count }) < count { usleep(25_000) }
            return inhibitors.withLock { $0.count } == count
        }
        #expect(try security("create-keychain", "-p", "pw", "work") == 0)  // keychaind starts, asks logind
        #expect(try security("set-keychain-settings", "-l", "work") == 0)
        #expect(try security("add-generic-password", "-a", "a", "-s", "s", "-w", "v", "work") == 0)
        #expect(waitForInhibitors(1))
        let first = try #require(inhibitors.withLock { $0.first })
        #expect(first.arguments == ["sleep", "keychaind", "Locking keychains set to lock on sleep", "delay"])
        #expect(!released(first.watched, within: 300))  // held while awake
        _ = try logind.send(.signal(path: "/org/freedesktop/login1", interface: "org.freedesktop.login1.Manager",
                                    member: "PrepareForSleep", body: [.boolean(true)]))
        #expect(released(first.watched, within: 5_000))
        // Released only after locking: the keychain is locked by the time logind may suspend.
        #expect(try security("find-generic-password", "-a", "a", "-s", "s", "work") == 36)
        // Awake again: a new inhibitor for the next sleep.
        _ = try logind.send(.signal(path: "/org/freedesktop/login1", interface: "org.freedesktop.login1.Manager",
                                    member: "PrepareForSleep", body: [.boolean(false)]))
        #expect(waitForInhibitors(2))
        let second = try #require(inhibitors.withLock { $0.last })
        #expect(!released(second.watched, within: 300))
        // logind restarts (its locks go with it): keychaind asks the new one.
        logind.close()
        logind = try startLogind()
        #expect(waitForInhibitors(3))
        let third = try #require(inhibitors.withLock { $0.last })
        #expect(!released(third.watched, within: 300))
    }

    /// A pinentry that answers CONFIRM from a file of answers (allow, always, anything else: Deny) and GETPIN with
    /// `pin:PASSWORD` (anything else: Cancel), and logs what it was asked: the daemon runs it as it would run the
    /// real one on the client's display.
    struct ScriptedPinentry {
        let program: URL, answers: URL, log: URL

        init(in directory: URL) throws {
            program = directory.appendingPathComponent("pinentry-script")
            answers = directory.appendingPathComponent("pinentry-answers")
            log = directory.appendingPathComponent("pinentry-log")
            try "".write(to: answers, atomically: true, encoding: .utf8)
            try "".write(to: log, atomically: true, encoding: .utf8)
            let script = """
                #!/bin/sh
                echo "OK ready"
                while IFS= read -r line; do
                  case "$line" in
                    CONFIRM*)
                      answer=$(head -n 1 '\(answers.path)'); sed -i 1d '\(answers.path)'
                      echo "CONFIRM" >> '\(log.path)'
                      case "$answer" in
                        allow) echo "OK" ;;
                        always) echo "ERR 83886194 Not confirmed" ;;
                        *) echo "ERR 83886179 Operation cancelled" ;;
                      esac ;;
                    GETPIN*)
                      answer=$(head -n 1 '\(answers.path)'); sed -i 1d '\(answers.path)'
                      echo "GETPIN" >> '\(log.path)'
                      case "$answer" in
                        hold:*)  # the question stays up until that file exists (30 s at most), then the next answer
                          n=0; while [ ! -e "${answer#hold:}" ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
                          answer=$(head -n 1 '\(answers.path)'); sed -i 1d '\(answers.path)' ;;
                      esac
                      case "$answer" in
                        pin:*) echo "D ${answer#pin:}"; echo "OK" ;;
                        *) echo "ERR 83886179 Operation cancelled" ;;
                      esac ;;
                    SETDESC*) echo "$line" >> '\(log.path)'; echo "OK" ;;
                    BYE) echo "OK"; exit 0 ;;
                    *) echo "OK" ;;
                  esac
                done

                """
            try script.write(to: program, atomically: true, encoding: .utf8)
            chmod(program.path, 0o755)
        }

        /// The variables that make keychaind ask through this pinentry on a display of its own (none: no display).
        func environment(display: Bool = true) -> [String: String?] {
            ["PINENTRY_PROGRAM": program.path, "DISPLAY": display ? ":kc-test" : nil]
        }

        func answer(_ lines: String...) throws {
            try lines.map { $0 + "\n" }.joined().write(to: answers, atomically: true, encoding: .utf8)
        }

        var confirmations: Int {
            ((try? String(contentsOf: log, encoding: .utf8)) ?? "").components(separatedBy: "\n").filter { $0 == "CONFIRM" }.count
        }
        var passwordRequests: Int {
            ((try? String(contentsOf: log, encoding: .utf8)) ?? "").components(separatedBy: "\n").filter { $0 == "GETPIN" }.count
        }
        var descriptions: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
    }

    @Test("trusted applications: another program's secret asks (Deny 51, Allow once, Always Allow kept across a restart)")
    func trustedApplications() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        let pinentry = try ScriptedPinentry(in: home.tool.home)
        // keychaind's pinentry and display come from the environment it is started with (by the first command).
        func run(_ program: String, _ arguments: [String], stdin: String = "", display: Bool = true) throws -> Tool.Result {
            try home.run(program, arguments, stdin: stdin, environment: pinentry.environment(display: display))
        }
        let find = ["find-generic-password", "-a", "acct", "-s", "svc", "-w"]
        #expect(try run("keychain-example", ["set", "svc", "acct"], stdin: "example's").status == 0)
        // The creator reads without a question.
        #expect(try run("keychain-example", ["get", "svc", "acct"]).stdout == "example's\n")
        #expect(pinentry.confirmations == 0)
        // Another program is asked: Deny (and no answer at all) is errSecAuthFailed, exit 51.
        try pinentry.answer("deny")
        #expect(try run("security", find).status == 51)
        #expect(pinentry.confirmations == 1)
        #expect(pinentry.descriptions.contains("/security wants to use the secret of"))
        // A client with no display and no terminal of its own is asked all the same: decisions go to the session's
        // display as keychaind knows it, never to one a client names.
        try pinentry.answer("deny")
        #expect(try run("security", find, display: false).status == 51)
        #expect(pinentry.confirmations == 2)
        // Allow: this read only.
        try pinentry.answer("allow")
        #expect(try run("security", find).stdout == "example's\n")
        #expect(try run("security", find).status == 51)
        #expect(pinentry.confirmations == 4)
        // Always Allow: stored in the item, so neither the next read nor one after a daemon restart asks (the
        // restarted keychaind has no display: nobody could be asked).
        try pinentry.answer("always")
        #expect(try run("security", find).stdout == "example's\n")
        #expect(try run("security", find, display: false).stdout == "example's\n")
        home.stopDaemon()
        #expect(try run("security", find, display: false).stdout == "example's\n")
        #expect(pinentry.confirmations == 5)
        // -T "": nobody is trusted, not even the program that added it; -A: everybody is.
        #expect(try run("security", ["add-generic-password", "-a", "none", "-s", "svc", "-T", "", "-w", "x"]).status == 0)
        #expect(try run("security", ["find-generic-password", "-a", "none", "-s", "svc", "-w"], display: false).status == 36)
        #expect(try run("security", ["add-internet-password", "-a", "all", "-s", "all.example", "-r", "htps", "-A",
                                     "-w", "open"]).status == 0)
        let get = try run("git-credential-keychain", ["get"], stdin: "protocol=https\nhost=all.example\n\n", display: false)
        #expect(get.stdout.contains("password=open"))
        // Without -A the same read by git's helper needs a yes it cannot get here.
        #expect(try run("security", ["add-internet-password", "-a", "mine", "-s", "mine.example", "-r", "htps",
                                     "-w", "closed"]).status == 0)
        let refused = try run("git-credential-keychain", ["get"], stdin: "protocol=https\nhost=mine.example\n\n",
                              display: false)
        #expect(!refused.stdout.contains("password=closed"))
        #expect(pinentry.confirmations == 5)
    }

    @Test("writes ask like reads: another program's delete needs a yes (no way to ask 36, Deny 51), and refused changes nothing")
    func writesNeedConsent() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        let pinentry = try ScriptedPinentry(in: home.tool.home)
        // keychaind's pinentry and display come from the environment it is started with (by the first command).
        func run(_ program: String, _ arguments: [String], stdin: String = "", display: Bool = true) throws -> Tool.Result {
            try home.run(program, arguments, stdin: stdin, environment: pinentry.environment(display: display))
        }
        // A keychaind started where there is no display: nobody to ask, errSecInteractionNotAllowed, and the item is
        // as it was.
        #expect(try run("keychain-example", ["set", "svc", "acct"], stdin: "original", display: false).status == 0)
        let delete = ["delete-generic-password", "-a", "acct", "-s", "svc"]
        #expect(try run("security", delete, display: false).status == 36)
        #expect(try run("security", delete).status == 36)
        #expect(try run("keychain-example", ["get", "svc", "acct"]).stdout == "original\n")
        #expect(pinentry.confirmations == 0)
        home.stopDaemon()  // the next one starts on the session's display
        // Deny: errSecAuthFailed, and still nothing changed; the question says what the program wants to do.
        try pinentry.answer("deny")
        #expect(try run("security", delete).status == 51)
        #expect(try run("keychain-example", ["get", "svc", "acct"]).stdout == "original\n")
        #expect(pinentry.confirmations == 1)
        #expect(pinentry.descriptions.contains("/security wants to delete"))
        // Allow: that one delete goes through.
        try pinentry.answer("allow")
        #expect(try run("security", delete).status == 0)
        #expect(try run("keychain-example", ["get", "svc", "acct"]).status != 0)
        // The creator itself changes and deletes its own item without a question.
        #expect(try run("keychain-example", ["set", "svc", "acct"], stdin: "again").status == 0)
        #expect(try run("keychain-example", ["set", "svc", "acct"], stdin: "changed").status == 0)
        #expect(try run("keychain-example", ["get", "svc", "acct"]).stdout == "changed\n")
        #expect(pinentry.confirmations == 2)
    }

    @Test("a rebuilt program at the same path is a new program: its group and its secrets need a yes again")
    func rebuiltProgramAskedAgain() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        let copy = try home.copyOfExample()
        func run(_ arguments: [String], stdin: String = "") throws -> Int32? {
            let output = try ChildProcess.run(copy.path, arguments: arguments, environment: home.environment,
                                              input: Data(stdin.utf8))
            if case .exited(let code) = output.termination { return code }
            return nil
        }
        #expect(try home.run("security", "list-keychains").status == 0)  // starts the daemon (not beside the copy)
        #expect(try run(["set", "svc", "rebuilt"], stdin: "v1") == 0)
        #expect(try run(["get", "svc", "rebuilt"]) == 0)
        // "Rebuild" it: the same path, other bytes (a byte appended to an ELF file still runs).
        let handle = try FileHandle(forWritingTo: copy)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([0]))
        try handle.close()
        // Asked again before it may use the group it was bound to; nobody to ask here, so the group is left out
        // and its item is not even found (a yes would then still leave the item's own trusted list to ask).
        #expect(try run(["get", "svc", "rebuilt"]) == 44)
    }

    @Test("security trust-program: a rebuilt program is let into its groups by a yes where it cannot answer; only security may ask")
    func trustRebuiltProgram() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        let pinentry = try ScriptedPinentry(in: home.tool.home)
        let environment = home.environment(asking: pinentry)
        let program = try home.copyOfExample()
        func run(_ path: String, _ arguments: [String], stdin: String = "") throws -> Tool.Result {
            let output = try ChildProcess.run(path, arguments: arguments, environment: environment, input: Data(stdin.utf8))
            let status: Int32 = if case .exited(let code) = output.termination { code } else { -1 }
            return Tool.Result(status: status, stdout: String(decoding: output.stdout, as: UTF8.self),
                               stderr: String(decoding: output.stderr, as: UTF8.self))
        }
        let security = Tool.binary.path
        #expect(try run(security, ["list-keychains"]).status == 0)  // keychaind starts, on the session's display
        #expect(try run(program.path, ["set", "svc", "first"], stdin: "v1").status == 0)  // binds its group
        // Rebuilt: same path, other bytes. Refused its group (here by Deny), it finds nothing.
        let handle = try FileHandle(forWritingTo: program)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([0]))
        try handle.close()
        try pinentry.answer("deny")
        let refused = try run(program.path, ["get", "svc", "first"])
        #expect(refused.status == 44)
        // It is told why, once, and what lets it in; the program the group is bound to is not named.
        let told = "keychain: \(program.path) was left out of the keychain access group"
        #expect(refused.stderr.components(separatedBy: told).count == 2, "\(refused.stderr)")
        #expect(refused.stderr.contains("If this build is yours: security trust-program \(program.path)\n"))
        // Refused (Deny): errSecAuthFailed, and still nothing.
        let denied = try run(security, ["trust-program", program.path])
        #expect(denied.status == 51, "\(denied.stderr)")
        #expect(try run(program.path, ["get", "svc", "first"]).status == 44)
        // The developer lets this build in, once, from the terminal: asked where the asking program cannot answer.
        try pinentry.answer("allow")
        let trusted = try run(security, ["trust-program", program.path])
        #expect(trusted.status == 0, "\(trusted.stderr)")
        #expect(trusted.stdout == "\(program.path) may use 1 access group.\n")
        #expect(pinentry.descriptions.contains("as its file is now"))
        // From now on this build runs with nobody asked: it stores and reads in its group.
        let asked = pinentry.confirmations
        #expect(try run(program.path, ["set", "svc", "second"], stdin: "v2").status == 0)
        let admitted = try run(program.path, ["get", "svc", "second"])
        #expect(admitted.stdout == "v2\n")
        #expect(!admitted.stderr.contains("left out"))
        #expect(pinentry.confirmations == asked)
        // Any other program asking keychaind for this is refused.
        let socket = KeychainLocations.current(environment: environment).daemonSocket
        let other = try #require(try RemoteKeychainService.connect(to: socket, environment: environment))
        #expect(throws: KeychainError.self) { try other.trustProgram(at: program.path) }
    }

    @Test("another program claiming a group bound to the first is asked about it once (Deny, then Always Allow)")
    func groupClaimAsked() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        let pinentry = try ScriptedPinentry(in: home.tool.home)
        let environment = home.environment(asking: pinentry)
        let original = Tool.binary.deletingLastPathComponent().appendingPathComponent("keychain-example")
        let impostor = try home.copyOfExample()  // same name, so it claims the same group
        func run(_ program: URL, _ arguments: [String], stdin: String = "") throws -> (Int32?, String) {
            let output = try ChildProcess.run(program.path, arguments: arguments, environment: environment,
                                              input: Data(stdin.utf8))
            let status: Int32? = if case .exited(let code) = output.termination { code } else { nil }
            return (status, String(decoding: output.stdout, as: UTF8.self))
        }
        #expect(try run(original, ["set", "svc", "acct"], stdin: "first's").0 == 0)  // binds the group to it
        try pinentry.answer("deny")
        #expect(try run(impostor, ["get", "svc", "acct"]).0 == 44)  // the group is left out: nothing found
        #expect(pinentry.descriptions.contains("claims the keychain access group"))
        // Always Allow for the group, then the item's own list asks for its secret (another path): Always Allow.
        try pinentry.answer("always", "always")
        #expect(try run(impostor, ["get", "svc", "acct"]) == (0, "first's\n"))
        let asked = pinentry.confirmations
        #expect(try run(impostor, ["get", "svc", "acct"]) == (0, "first's\n"))
        #expect(pinentry.confirmations == asked)
    }

    @Test("events: a subscriber hears every other process's changes, with the pid and keychain of each")
    func eventsAcrossProcesses() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("security", "create-keychain", "-p", "pw", "work").status == 0)  // starts the daemon
        let socket = KeychainLocations.current(environment: home.environment).daemonSocket
        let listener = try #require(try RemoteKeychainService.connect(to: socket))
        defer { listener.close() }
        let heard = Mutex<[KeychainEvent]>([])
        let subscription = try #require(try listener.subscribe { event in heard.withLock { $0.append(event) } })
        defer { subscription.cancel() }
        var pids: [pid_t] = []
        func security(_ arguments: String...) throws {
            let child = try ChildProcess.spawn(Tool.binary.path, arguments: arguments, environment: home.environment)
            pids.append(child.pid)
            #expect(child.wait() == .exited(0), "\(arguments)")
        }
        try security("add-generic-password", "-a", "a", "-s", "s", "-w", "one", "work")
        try security("add-generic-password", "-U", "-a", "a", "-s", "s", "-w", "two", "work")
        try security("delete-generic-password", "-a", "a", "-s", "s", "work")
        try security("lock-keychain", "work")
        try security("unlock-keychain", "-p", "pw", "work")
        try security("set-keychain-password", "-o", "pw", "-p", "new", "work")
        try security("default-keychain", "-s", "work")
        var events: [KeychainEvent] = []
        for _ in 0..<100 {
            events = heard.withLock { $0 }
            if events.count >= 7 { break }
            usleep(50_000)
        }
        let work = home.tool.home.appendingPathComponent("data/keychains/work.keychain-db").path
        let expected: [KeychainEvent.Kind] = [.add, .add, .delete, .lock, .unlock, .passwordChanged, .defaultChanged]
        #expect(events.map(\.kind) == expected)
        #expect(events.allSatisfy { $0.keychain == work })
        #expect(events.map(\.pid) == pids.map { Int32($0) })
        // Reads are not events; a failed call is none either. The write after them is the marker: events arrive in
        // order, so once its event is heard, anything they caused would have been heard before it.
        #expect(try home.run("security", "dump-keychain", "work").status == 0)
        #expect(try home.run("security", "find-generic-password", "-a", "zzz", "-s", "s", "work").status == 44)
        #expect(try home.run("security", "add-generic-password", "-a", "marker", "-s", "s", "-w", "m", "work").status == 0)
        for _ in 0..<100 where heard.withLock({ $0.count }) < 8 { usleep(50_000) }
        #expect(heard.withLock { $0.map(\.kind) } == expected + [.add])
    }

    @Test("events: a keychain that locks on its idle timer is announced, by the daemon")
    func idleLockEvent() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("security", "create-keychain", "-p", "pw", "work").status == 0)
        #expect(try home.run("security", "set-keychain-settings", "-t", "1", "work").status == 0)
        // Listening before the unlock: on a loaded machine the one-second timer can fire before a listener that
        // subscribed afterwards is there to hear it.
        let listener = try #require(try RemoteKeychainService.connect(
            to: KeychainLocations.current(environment: home.environment).daemonSocket))
        defer { listener.close() }
        let heard = Mutex<[KeychainEvent]>([])
        let subscription = try #require(try listener.subscribe { event in heard.withLock { $0.append(event) } })
        defer { subscription.cancel() }
        #expect(try home.run("security", "unlock-keychain", "-p", "pw", "work").status == 0)
        var lock: KeychainEvent?
        for _ in 0..<300 where lock == nil {
            usleep(100_000)
            lock = heard.withLock { events in
                guard let unlocked = events.firstIndex(where: { $0.kind == .unlock }) else { return nil }
                return events[unlocked...].first { $0.kind == .lock }
            }
        }
        #expect(lock?.keychain == home.tool.home.appendingPathComponent("data/keychains/work.keychain-db").path)
        #expect(lock?.pid == home.daemonPID)
    }
}
