import Foundation
import Synchronization
import Testing
import KeychainClient
import KeychainCore
@testable import KeychainDaemon

#if canImport(Glibc)
import Glibc
#endif

/// Which terminal counts as a login terminal of the user (where keychaind may ask for a decision): the client's
/// controlling terminal, as the kernel reports it, with a utmp login of that user on it made by a root process.
@Suite("Login terminals (utmp)", .serialized)
struct LoginTerminalTests {
    /// A utmp file holding one USER_PROCESS entry.
    func utmp(line: String, user: String, pid: pid_t) throws -> String {
        var entry = utmpx()
        entry.ut_type = Int16(USER_PROCESS)
        entry.ut_pid = pid
        withUnsafeMutableBytes(of: &entry.ut_line) { raw in for (i, b) in line.utf8.enumerated() { raw[i] = b } }
        withUnsafeMutableBytes(of: &entry.ut_user) { raw in for (i, b) in user.utf8.enumerated() { raw[i] = b } }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("utmp-\(UUID().uuidString)").path
        let bytes = withUnsafeBytes(of: &entry) { Data($0) }
        try bytes.write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("a process's controlling terminal is decoded from the kernel's device number; none for a daemon-like process")
    func controllingTerminal() throws {
        let session = "kc-login-\(UUID().uuidString.prefix(8))"
        _ = try ChildProcess.run("/usr/bin/tmux", arguments: ["new-session", "-d", "-s", session, "sleep 60"])
        defer { _ = try? ChildProcess.run("/usr/bin/tmux", arguments: ["kill-session", "-t", session]) }
        let info = try ChildProcess.run("/usr/bin/tmux", arguments: ["display", "-p", "-t", session, "#{pane_pid} #{pane_tty}"])
        let fields = String(decoding: info.stdout, as: UTF8.self).split(separator: " ").map {
            $0.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let pid = try #require(pid_t(fields[0]))
        // The pane's process takes its controlling terminal a moment after tmux reports it.
        for _ in 0..<200 where LoginTerminal.controllingTerminal(of: pid) == nil { usleep(10_000) }
        #expect(LoginTerminal.controllingTerminal(of: pid).map { "/dev/" + $0 } == fields[1])
        // keychaind's tests run with no controlling terminal of their own in CI; a pid that does not exist has none.
        #expect(LoginTerminal.controllingTerminal(of: 999_999_999) == nil)

        let user = try #require(LoginTerminal.userName(geteuid()))
        let line = String(fields[1].dropFirst("/dev/".count))
        // A login of this user on that terminal, recorded by a process of root's (pid 1 here): it counts.
        let recorded = try utmp(line: line, user: user, pid: 1)
        defer { unlink(recorded) }
        #expect(LoginTerminal.of(pid: pid, user: geteuid(), utmpPath: recorded) == fields[1])
        // The terminal keychaind records when it identifies the process is the one it later asks on.
        let identified = try #require(PeerIdentity.of(pid: pid, uid: geteuid()))
        #expect(LoginTerminal.line(ofDevice: identified.terminalDevice) == line)
        #expect(LoginTerminal.of(device: identified.terminalDevice, user: geteuid(), utmpPath: recorded) == fields[1])
        #expect(LoginTerminal.of(device: 0, user: geteuid(), utmpPath: recorded) == nil)
        // A session's question on that terminal is asked only while the login is still recorded there.
        let answers = AllowingPrompter()
        var onTerminal = LoginTerminalPrompter(asking: answers, terminal: fields[1], device: identified.terminalDevice,
                                               user: geteuid(), utmpPath: recorded)
        #expect(onTerminal.requestConfirmation(ConfirmationRequest(description: "Allow?")) == .allow)
        onTerminal.utmpPath = "/nonexistent/utmp"  // the login ended
        #expect(onTerminal.requestConfirmation(ConfirmationRequest(description: "Allow?")) == .unavailable)
        #expect(answers.asked.withLock { $0 } == 1)
        // Another terminal's login, another user's, or none at all: it does not.
        let elsewhere = try utmp(line: "pts/999", user: user, pid: 1)
        defer { unlink(elsewhere) }
        #expect(LoginTerminal.of(pid: pid, user: geteuid(), utmpPath: elsewhere) == nil)
        let someoneElse = try utmp(line: line, user: "not-\(user)", pid: 1)
        defer { unlink(someoneElse) }
        #expect(LoginTerminal.of(pid: pid, user: geteuid(), utmpPath: someoneElse) == nil)
        #expect(LoginTerminal.of(pid: pid, user: geteuid(), utmpPath: "/nonexistent/utmp") == nil)
    }

    @Test("a login recorded by a process of the user's own (utempter for a terminal it made) does not count",
          .enabled(if: geteuid() == 0))
    func userRecordedLogin() throws {
        // As root every process is root's; the rule is shown with a process of another uid.
        let child = try ChildProcess.spawn("/usr/bin/setpriv", arguments: ["--reuid=65534", "--regid=65534", "--clear-groups",
                                                                           "/bin/sleep", "5"])
        defer { kill(child.pid, SIGKILL); _ = child.wait() }
        usleep(200_000)
        #expect(LoginTerminal.ownerOfProcess(child.pid) == 65534)
        #expect(LoginTerminal.ownerOfProcess(1) == 0)
    }

    @Test("a login terminal is asked only where the kernel refuses TIOCSTI; unreadable code maps count as foreign code")
    func injectionAndHiddenCode() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tiocsti-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try "0\n".write(to: file, atomically: true, encoding: .utf8)
        #expect(LoginTerminal.injectionRefused(file.path))
        try "1\n".write(to: file, atomically: true, encoding: .utf8)
        #expect(!LoginTerminal.injectionRefused(file.path))
        #expect(!LoginTerminal.injectionRefused("/nonexistent"))
        // A process whose executable was read but whose maps cannot be: what it runs is unknown.
        #expect(PeerIdentity.foreignCode(of: 999_999_999, executable: "/usr/bin/env") == ["(code that could not be read)"])
        #expect(PeerIdentity.foreignCode(of: getpid(), executable: nil).allSatisfy { !$0.hasPrefix("(") })
    }

    @Test("code files are read from /proc/PID/maps: executable mappings of files only, the whole path, not the program's")
    func codeFilesInMaps() {
        let maps = [
            "55d0a000-55d0b000 r--p 00000000 fe:00 101 /usr/bin/program",
            "55d0b000-55d0c000 r-xp 00001000 fe:00 101 /usr/bin/program",
            "7f00a000-7f00b000 r-xp 00000000 fe:00 202 /home/u/my lib/inject.so",
            "7f00b000-7f00c000 rw-p 00000000 fe:00 202 /home/u/my lib/data.so",
            "7f00c000-7f00d000 r-xp 00000000 fe:00 303 /tmp/gone.so (deleted)",
            "7f00d000-7f00e000 r-xp 00000000 fe:00 404 /usr/lib/x86_64-linux-gnu/libc.so.6   ",
            "7f00e000-7f00f000 r-xp 00000000 00:00 0 [vdso]",
            "7f00f000-7f010000 rw-p 00000000 00:00 0",
            "7f010000-7f011000 --xp 00000000 fe:00 505 /opt/last.so",
        ].joined(separator: "\n")
        let files = PeerIdentity.codeFiles(inMaps: Array(maps.utf8), except: "/usr/bin/program")
        #expect(files == ["/home/u/my lib/inject.so", "/tmp/gone.so (deleted)", "/usr/lib/x86_64-linux-gnu/libc.so.6",
                          "/opt/last.so"])
        #expect(PeerIdentity.codeFiles(inMaps: Array((maps + "\n").utf8), except: "/usr/bin/program") == files)
        #expect(PeerIdentity.codeFiles(inMaps: Array(maps.utf8), except: nil).contains("/usr/bin/program"))
        #expect(PeerIdentity.codeFiles(inMaps: [], except: nil).isEmpty)
        // Fed in pieces, as /proc is read (a line cut anywhere, even inside a path): the same files.
        let bytes = Array(maps.utf8)
        for size in [1, 2, 7, 40, 64, bytes.count - 1] {
            var pieces = PeerIdentity.CodeFiles(except: "/usr/bin/program")
            for start in stride(from: 0, to: bytes.count, by: size) {
                bytes[start..<min(bytes.count, start + size)].withUnsafeBufferPointer { pieces.feed($0) }
            }
            #expect(pieces.finish() == files, "pieces of \(size) bytes")
        }
    }
}

/// Says Allow to every decision and counts them.
final class AllowingPrompter: Prompter {
    let asked = Mutex(0)
    func requestPassword(_ request: PasswordRequest) -> PromptResponse { .unavailable }
    func requestConfirmation(_ request: ConfirmationRequest) -> ConfirmationResponse {
        asked.withLock { $0 += 1 }
        return .allow
    }
}
