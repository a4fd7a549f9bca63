import Foundation
import KeychainClient
import KeychainCore
import KeychainTestSupport
import KeychainWire
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The per-program boundary tried as an attacker on the same machine would: real processes, another uid where it
/// matters (CI runs as root, so `nobody` is the victim and root plays the other local user).
@Suite("The boundary, attacked", .serialized)
struct BoundaryTests {
    /// A listening Unix socket of root's: what another local user would put where the victim's client looks.
    final class Listener {
        let fd: Int32
        init(path: String) throws {
            fd = UnixSockets.listen(at: path, nonBlocking: true)
            guard fd >= 0 else { throw KeychainError(.io, "listen \(path): errno \(errno)") }
            chmod(path, 0o777)
        }

        /// How many connections arrived, and every byte they sent.
        func drain() -> (connections: Int, bytes: [UInt8]) {
            var connections = 0
            var bytes: [UInt8] = []
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { break }
                connections += 1
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let n = read(client, &buffer, buffer.count)
                    if n <= 0 { break }
                    bytes += buffer[..<n]
                }
                close(client)
            }
            return (connections, bytes)
        }

        deinit { close(fd) }
    }

    /// Runs `security ARGUMENTS` as nobody (uid 65534) in a home of its own, without XDG_RUNTIME_DIR: its client
    /// then looks for keychaind in /tmp/keychain-65534.
    func runAsNobody(_ arguments: [String], backend: String?) throws -> (status: Int32, stderr: String) {
        let home = URL(fileURLWithPath: "/tmp/e2e-victim-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        #expect(chown(home.path, 65534, 65534) == 0)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home.path
        for name in ["XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "KEYCHAIN_BACKEND"] {
            environment.removeValue(forKey: name)
        }
        if let backend { environment["KEYCHAIN_BACKEND"] = backend }
        let output = try ChildProcess.run(
            "/usr/bin/setpriv", arguments: ["--reuid=65534", "--regid=65534", "--clear-groups",
                                            Tool.binariesForOtherUsers.appendingPathComponent("security").path] + arguments,
            environment: environment)
        let status: Int32 = if case .exited(let code) = output.termination { code } else { -1 }
        return (status, String(decoding: output.stderr, as: UTF8.self))
    }

    static let canRun = geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")

    /// A home of nobody's (uid 65534) under /tmp with a runtime directory of its own, where programs run as nobody
    /// through keychaind (CI runs as root: nobody is the ordinary user).
    struct NobodyHome {
        let home: URL
        var runtime: URL { home.appendingPathComponent("run") }
        var environment: [String: String]

        init(_ prefix: String) throws {
            home = URL(fileURLWithPath: "/tmp/\(prefix)-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: home.appendingPathComponent("run"), withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            #expect(chown(home.path, 65534, 65534) == 0 && chown(home.appendingPathComponent("run").path, 65534, 65534) == 0)
            var environment = ProcessInfo.processInfo.environment
            environment["HOME"] = home.path
            environment["XDG_RUNTIME_DIR"] = home.appendingPathComponent("run").path
            for (variable, folder) in [("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state"), ("XDG_CONFIG_HOME", "config")] {
                environment[variable] = home.appendingPathComponent(folder).path
            }
            environment["KEYCHAIN_BACKEND"] = "daemon"
            for name in ["DISPLAY", "WAYLAND_DISPLAY", "GPG_TTY"] { environment.removeValue(forKey: name) }
            self.environment = environment
        }

        /// Runs `executable` as nobody with this home's environment, changed by `changes` (nil removes one).
        func run(_ executable: String, _ arguments: [String], changes: [String: String?] = [:]) throws
            -> (status: Int32, stdout: String)
        {
            var environment = self.environment
            for (name, value) in changes { environment[name] = value }
            let output = try ChildProcess.run(
                "/usr/bin/setpriv", arguments: ["--reuid=65534", "--regid=65534", "--clear-groups", executable] + arguments,
                environment: environment)
            let status: Int32 = if case .exited(let code) = output.termination { code } else { -1 }
            return (status, String(decoding: output.stdout, as: UTF8.self))
        }

        /// Ends nobody's keychaind and removes the home.
        func cleanUp() {
            _ = try? ChildProcess.run("/usr/bin/pkill", arguments: ["-KILL", "-U", "65534", "keychaind"])
            try? FileManager.default.removeItem(at: home)
        }
    }

    @Test("finding 1: a socket directory another user made first gets no password and no request",
          .enabled(if: canRun), arguments: ["daemon", nil] as [String?])
    func foreignSocketDirectory(backend: String?) throws {
        let directory = "/tmp/keychain-65534"
        try? FileManager.default.removeItem(atPath: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The other user's directory, open to all, with a socket listening where the victim's keychaind would be.
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o777])
        chmod(directory, 0o777)
        let listener = try Listener(path: directory + "/keychaind.sock")
        let result = try runAsNobody(["unlock-keychain", "-p", "HUNTER2-CANARY", "login"], backend: backend)
        #expect(result.status != 0)
        #expect(result.stderr.contains(directory), "\(result.stderr)")
        let received = listener.drain()
        #expect(received.connections == 0)
        #expect(received.bytes.isEmpty)
    }

    @Test("finding 1: a socket in the user's own directory served by another user gets nothing: the peer's uid is checked",
          .enabled(if: canRun))
    func foreignPeer() throws {
        let directory = "/tmp/keychain-65534"
        try? FileManager.default.removeItem(atPath: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        #expect(chown(directory, 65534, 65534) == 0)
        // Root can listen inside it; another ordinary user could not, but a peer check does not rely on that.
        let listener = try Listener(path: directory + "/keychaind.sock")
        let result = try runAsNobody(["unlock-keychain", "-p", "HUNTER2-CANARY", "login"], backend: "daemon")
        #expect(result.status != 0)
        #expect(result.stderr.contains("another user (uid 0)"), "\(result.stderr)")
        let received = listener.drain()
        #expect(received.connections == 1)
        #expect(received.bytes.isEmpty)
    }

    /// Connects to a socket, forks a child that keeps the connection, and executes the trusted program in its own
    /// place (blocked on standard input until the child is done): the child then sends `frames` (variant `child`),
    /// or they were sent before the fork (variant `queued`), and reads the answers. Prints WON when the canary came
    /// back.
    static let execAttacker = """
        import os, socket, sys
        path, frames, variant = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3]
        program = sys.argv[4:]
        r, w = os.pipe()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        if variant == "queued":
            s.sendall(frames)
        if os.fork() == 0:
            os.close(r)
            try:
                if variant == "child":
                    s.sendall(frames)
                s.settimeout(5)
                got = b""
                while b"EXEC-CANARY" not in got:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
            except OSError:
                got = b""
            sys.stdout.write("WON\\n" if b"EXEC-CANARY" in got else "LOST\\n")
            sys.stdout.flush()
            os.close(w)
            os._exit(0)
        os.close(w)
        os.dup2(r, 0)
        os.execv(program[0], program)
        """

    @Test("finding 4: a connection handed to a child, or requests queued before executing a trusted program, get no secret (0 wins)",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")),
          arguments: ["child", "queued"])
    func execAfterConnecting(variant: String) throws {
        let home = try DaemonTests.DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("keychain-example", "set", "svc", "acct", stdin: "EXEC-CANARY").status == 0)
        #expect(try home.run("keychain-example", "get", "svc", "acct").stdout == "EXEC-CANARY\n")
        let runtime = home.tool.home.appendingPathComponent("run/keychain")
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: runtime.path).first { $0.hasSuffix(".sock") })
        let socket = runtime.appendingPathComponent(name).path
        let session = try Request.session(ClientSession(terminal: nil, display: nil, waylandDisplay: nil, term: nil)).encode()
        let query = try QueryParser.parse(["class": "genp", "svce": "svc", "acct": "acct", "r_Data": true], for: .search)
        let search = try Request.search(query, nil).encode()
        var frames: [UInt8] = []
        for payload in [Framing.hello(), session, search] {
            withUnsafeBytes(of: UInt32(payload.count).bigEndian) { frames.append(contentsOf: $0) }
            frames += payload
        }
        let hex = frames.map { String(format: "%02x", $0) }.joined()
        let script = home.tool.home.appendingPathComponent("exec-attacker.py")
        try Self.execAttacker.write(to: script, atomically: true, encoding: .utf8)
        // The trusted program: the one that stored the item, blocked reading a password until the child is done.
        let trusted = Tool.binary.deletingLastPathComponent().appendingPathComponent("keychain-example").path
        var won = 0
        for _ in 0..<Self.attempts {
            let output = try ChildProcess.run("/usr/bin/python3", arguments: [script.path, socket, hex, variant,
                                                                             trusted, "set", "decoy", "decoy"],
                                              environment: home.environment)
            if String(decoding: output.stdout, as: UTF8.self).contains("WON") { won += 1 }
        }
        #expect(won == 0, "won \(won) of \(Self.attempts)")
        // The trusted program itself still reads without a question.
        #expect(try home.run("keychain-example", "get", "svc", "acct").stdout == "EXEC-CANARY\n")
    }

    @Test("finding 9: a traced client (a tracer attached from its start, as strace does) gets nothing from keychaind",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/strace")))
    func tracedClient() throws {
        let home = try DaemonTests.DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("security", "add-generic-password", "-a", "t", "-s", "t", "-w", "TRACE-CANARY").status == 0)
        #expect(try home.run("security", "find-generic-password", "-a", "t", "-s", "t", "-w").stdout == "TRACE-CANARY\n")
        let security = Tool.binary.deletingLastPathComponent().appendingPathComponent("security").path
        let output = try ChildProcess.run("/usr/bin/strace", arguments: ["-f", "-qq", "-o", "/dev/null", "-e", "trace=read",
                                                                         security, "find-generic-password", "-a", "t", "-s", "t", "-w"],
                                          environment: home.environment)
        let stdout = String(decoding: output.stdout, as: UTF8.self)
        #expect(!stdout.contains("TRACE-CANARY"))
        #expect(output.termination == .exited(51), "\(String(decoding: output.stderr, as: UTF8.self))")
    }

    @Test("finding 5: a program that names a pseudo-terminal of its own gets no question there, so cannot say yes to itself",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux")))
    func ownTerminalGetsNoQuestion() throws {
        let home = try DaemonTests.DaemonHome()
        defer { home.cleanUp() }
        let pinentry = try DaemonTests.ScriptedPinentry(in: home.tool.home)
        try pinentry.answer("always", "always", "always")  // what the program would answer on its own terminal

        // A pseudo-terminal whose other end the attacking program holds (here a tmux pane it started).
        let session = "kc-pty-\(UUID().uuidString.prefix(8))"
        _ = try ChildProcess.run("/usr/bin/tmux", arguments: ["new-session", "-d", "-s", session, "sleep 120"])
        defer { _ = try? ChildProcess.run("/usr/bin/tmux", arguments: ["kill-session", "-t", session]) }
        let pane = try ChildProcess.run("/usr/bin/tmux", arguments: ["display", "-p", "-t", session, "#{pane_tty}"])
        let terminal = String(decoding: pane.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(terminal.hasPrefix("/dev/pts/"))
        func run(_ program: String, _ arguments: [String], stdin: String = "", tty: String? = nil) throws -> Tool.Result {
            var changes = pinentry.environment(display: false)  // keychaind without a display of its own
            changes["WAYLAND_DISPLAY"] = .some(nil)
            if let tty { changes["GPG_TTY"] = tty }
            return try home.run(program, arguments, stdin: stdin, environment: changes)
        }
        #expect(try run("keychain-example", ["set", "svc", "acct"], stdin: "PTY-CANARY").status == 0)
        let find = try run("security", ["find-generic-password", "-a", "acct", "-s", "svc", "-w"], tty: terminal)
        #expect(find.status == 36)
        #expect(!find.stdout.contains("PTY-CANARY"))
        let delete = try run("security", ["delete-generic-password", "-a", "acct", "-s", "svc"], tty: terminal)
        #expect(delete.status == 36)
        #expect(pinentry.confirmations == 0)
        #expect(try run("keychain-example", ["get", "svc", "acct"]).stdout == "PTY-CANARY\n")
    }

    @Test("finding 8: the keychain's own tools in a directory the user can write are trusted by digest too: a replaced security is asked about",
          .enabled(if: canRun))
    func replacedToolInUserDirectory() throws {
        let nobody = try NobodyHome("e2e-tools")
        defer { nobody.cleanUp() }
        // The user's own copy of the tools (as a build directory or ~/.local/bin holds them).
        let bin = nobody.home.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        for name in ["security", "keychaind"] {
            try FileManager.default.copyItem(at: Tool.binary.deletingLastPathComponent().appendingPathComponent(name),
                                             to: bin.appendingPathComponent(name))
        }
        for path in [bin, bin.appendingPathComponent("security"), bin.appendingPathComponent("keychaind")] {
            #expect(chown(path.path, 65534, 65534) == 0)
        }
        func security(_ arguments: [String]) throws -> (status: Int32, stdout: String) {
            try nobody.run(bin.appendingPathComponent("security").path, arguments)
        }
        #expect(try security(["add-generic-password", "-a", "a", "-s", "s", "-w", "TOOL-CANARY"]).status == 0)
        #expect(try security(["find-generic-password", "-a", "a", "-s", "s", "-w"]).stdout == "TOOL-CANARY\n")
        // Another program of the user replaces it (here: the same program with bytes appended, so it still runs).
        let handle = try FileHandle(forWritingTo: bin.appendingPathComponent("security"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("replaced".utf8))
        try handle.close()
        let replaced = try security(["find-generic-password", "-a", "a", "-s", "s", "-w"])
        #expect(replaced.status == 36)  // asked about, and nobody can be asked here
        #expect(!replaced.stdout.contains("TOOL-CANARY"))
    }

    @Test("finding 11: -A and -T B let program B read through keychaind without a question; another program's item is asked about, not hidden")
    func applicationListsReachOtherPrograms() throws {
        let home = try DaemonTests.DaemonHome()
        defer { home.cleanUp() }
        let example = Tool.binary.deletingLastPathComponent().appendingPathComponent("keychain-example").path
        #expect(try home.run("security", "add-generic-password", "-a", "any", "-s", "svc", "-A", "-w", "open").status == 0)
        #expect(try home.run("security", "add-generic-password", "-a", "listed", "-s", "svc", "-T", example,
                             "-w", "listed").status == 0)
        #expect(try home.run("security", "add-generic-password", "-a", "mine", "-s", "svc", "-w", "closed").status == 0)
        // keychain-example is in none of security's groups: the items' lists decide, as in a macOS file keychain.
        #expect(try home.run("keychain-example", "get", "svc", "any").stdout == "open\n")
        #expect(try home.run("keychain-example", "get", "svc", "listed").stdout == "listed\n")
        let mine = try home.run("keychain-example", "get", "svc", "mine")
        #expect(mine.stdout.isEmpty)
        #expect(mine.stderr.contains("-25308"), "\(mine.stderr)")  // asked about (nobody to ask here), not "not found"
    }

    @Test("finding 7: keychaind started with LD_PRELOAD and a PINENTRY_PROGRAM of the user's runs neither; a preloaded client is not the program it runs",
          .enabled(if: canRun && FileManager.default.isExecutableFile(atPath: "/usr/bin/cc")))
    func environmentTakeover() throws {
        let nobody = try NobodyHome("e2e-env")
        defer { nobody.cleanUp() }
        let home = nobody.home, runtime = nobody.runtime
        // The user's own library, which notes every process it is loaded into, and its own "pinentry", which would
        // say yes to everything.
        let marks = home.appendingPathComponent("loaded"), asked = home.appendingPathComponent("asked")
        let source = home.appendingPathComponent("preload.c"), library = home.appendingPathComponent("preload.so")
        try """
            #include <stdio.h>
            #include <stdlib.h>
            #include <unistd.h>
            __attribute__((constructor)) static void mark(void) {
                FILE *f = fopen("\(marks.path)", "a");
                if (f) { fprintf(f, "%d\\n", (int)getpid()); fclose(f); }
            }
            """.write(to: source, atomically: true, encoding: .utf8)
        let compiled = try ChildProcess.run("/usr/bin/cc", arguments: ["-shared", "-fPIC", "-o", library.path, source.path])
        #expect(compiled.termination == .exited(0))
        let pinentry = home.appendingPathComponent("pinentry")
        try """
            #!/bin/sh
            echo asked >> '\(asked.path)'
            echo "OK ready"
            while IFS= read -r line; do echo OK; [ "$line" = BYE ] && exit 0; done
            """.write(to: pinentry, atomically: true, encoding: .utf8)
        chmod(pinentry.path, 0o755)
        for path in [library, pinentry] { #expect(chown(path.path, 65534, 65534) == 0) }
        _ = FileManager.default.createFile(atPath: marks.path, contents: Data())
        _ = FileManager.default.createFile(atPath: asked.path, contents: Data())
        chmod(marks.path, 0o666)
        chmod(asked.path, 0o666)
        // Started with the user's library preloaded, the user's own pinentry and a display.
        let attack: [String: String?] = ["LD_PRELOAD": library.path, "PINENTRY_PROGRAM": pinentry.path, "DISPLAY": ":kc-test"]
        func run(_ program: String, _ arguments: [String], preload: Bool = true) throws -> (status: Int32, stdout: String) {
            var changes = attack
            if !preload { changes["LD_PRELOAD"] = .some(nil) }
            return try nobody.run(Tool.binariesForOtherUsers.appendingPathComponent(program).path, arguments,
                                  changes: changes)
        }
        // security starts keychaind on demand, with this environment; then stores an item, itself unaltered.
        #expect(try run("security", ["list-keychains"]).status == 0)
        #expect(try run("security", ["add-generic-password", "-a", "a", "-s", "s", "-w", "ENV-CANARY"], preload: false).status == 0)
        let lock = try #require(try FileManager.default.contentsOfDirectory(atPath: runtime.appendingPathComponent("keychain").path)
            .first { $0.hasSuffix(".sock.lock") })
        let daemon = try #require(pid_t(try String(contentsOf: runtime.appendingPathComponent("keychain/\(lock)"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        // keychaind dropped the loader's variables and runs without the library.
        let environ = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(daemon)/environ"))
        #expect(!String(decoding: environ, as: UTF8.self).contains("LD_PRELOAD"))
        let maps = try String(contentsOfFile: "/proc/\(daemon)/maps", encoding: .utf8)
        #expect(!maps.contains(library.path))
        // Another program's read needs a yes: the user's own "pinentry" is not the one asked.
        let read = try run("keychain-example", ["get", "s", "a"])
        #expect(!read.stdout.contains("ENV-CANARY"))
        #expect(try String(contentsOf: asked, encoding: .utf8).isEmpty)
        // security itself with the user's library loaded is not the security that stored the item: it is asked
        // about (nobody can be asked here), where the unaltered one reads at once.
        let preloaded = try run("security", ["find-generic-password", "-a", "a", "-s", "s", "-w"])
        #expect(preloaded.status == 36)
        #expect(!preloaded.stdout.contains("ENV-CANARY"))
        #expect(try run("security", ["find-generic-password", "-a", "a", "-s", "s", "-w"], preload: false).stdout == "ENV-CANARY\n")
    }

    /// Tries per attack: CI runs each variant this often (the bar is 0 wins in 200 over both paths).
    static let attempts = 100
}

extension Tool {
    /// The package's executables where another user (nobody) can run them: the build folder itself when every
    /// directory above it lets others through, else copies in a directory of root's under /tmp, made once (a
    /// checkout in a private directory would otherwise fail every test that runs as another user).
    static var binariesForOtherUsers: URL { stagedBinaries }

    private static let stagedBinaries: URL = {
        let built = binary.deletingLastPathComponent()
        var current = built.path
        var reachable = true
        while current != "/" && !current.isEmpty {
            var info = stat()
            if stat(current, &info) != 0 || info.st_mode & 0o001 == 0 { reachable = false; break }
            current = (current as NSString).deletingLastPathComponent
        }
        if reachable { return built }
        let staged = URL(fileURLWithPath: "/tmp/kc-e2e-binaries-\(getpid())")
        try? FileManager.default.createDirectory(at: staged, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o755])
        for name in ["security", "keychaind", "keychain-embedded", "keychain-example", "git-credential-keychain",
                     "docker-credential-keychain"] {
            try? FileManager.default.copyItem(at: built.appendingPathComponent(name), to: staged.appendingPathComponent(name))
        }
        return staged
    }()
}
