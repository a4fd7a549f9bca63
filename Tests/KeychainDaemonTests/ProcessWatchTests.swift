import Foundation
import KeychainInterface
import KeychainTestSupport
import Testing
@testable import KeychainDaemon

#if canImport(Glibc)
import Glibc
#endif

/// The checks keychaind makes at every request, on the /proc files it keeps open per client (issue 22: the
/// per-request identity work, measured at a fifth of keychaind's time per find when each check opened and split
/// /proc/PID/status).
@Suite("A client's process, watched through its /proc files")
struct ProcessWatchTests {
    @Test("TracerPid is read from the status file as bytes: 0 for an untraced process, the tracer's pid for a traced one")
    func tracerFromStatus() throws {
        let fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(PeerIdentity.tracer(statusFile: fd) == 0)
        // Read twice through the same descriptor: each read starts the file again.
        #expect(PeerIdentity.tracer(statusFile: fd) == 0)
        // A status text of our own making, with the field where the kernel puts it and a tracer in it.
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("status-\(UUID().uuidString)").path
        defer { unlink(path) }
        try "Name:\tcat\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t7\nNgid:\t0\nPid:\t7\nPPid:\t1\nTracerPid:\t  4321\nUid:\t0\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        let traced = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(traced) }
        #expect(PeerIdentity.tracer(statusFile: traced) == 4321)
        try "Name:\tcat\nPid:\t7\n".write(toFile: path, atomically: true, encoding: .utf8)
        let none = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(none) }
        #expect(PeerIdentity.tracer(statusFile: none) == nil)
    }

    @Test("the terminal and start time are fields 7 and 22 of /proc/PID/stat, counted after the command name's last parenthesis")
    func statFields() throws {
        // Our own process, against the same fields read through Foundation's splitting.
        let text = try String(contentsOfFile: "/proc/self/stat", encoding: .utf8)
        let after = text[text.index(after: try #require(text.lastIndex(of: ")")))...]
        let fields = after.split(separator: " ")
        let fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC)
        defer { close(fd) }
        let parsed = try #require(PeerIdentity.statFields(statFile: fd))
        #expect(parsed.terminal == Int(fields[4]))
        #expect(parsed.startTime == UInt64(fields[19]))
        // Texts of our own making: a command name with spaces and parentheses, a negative device number (printed
        // with %d), doubled spaces, the start time as the line's last field, and fields missing or not numbers.
        func parse(_ text: String) throws -> (terminal: Int, startTime: UInt64)? {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("stat-\(UUID().uuidString)").path
            defer { unlink(path) }
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            defer { close(fd) }
            return PeerIdentity.statFields(statFile: fd)
        }
        let tail = " 0 0 0 0 0 0 0 0 0 0 0 0 0 0"  // fields 8 to 21
        let odd = try parse("42 (a) b (c)) S 1 42 42 34817" + tail + " 987654 1 2 3\n")
        #expect(odd?.terminal == 34817)
        #expect(odd?.startTime == 987654)
        #expect(try parse("42 (x) S 1 42 42 -2147483000" + tail + " 5\n")?.terminal == -2147483000)
        let spaced = try parse("42 (x) S  1 42 42  7" + tail + "  18446744073709551615\n")
        #expect(spaced?.terminal == 7)
        #expect(spaced?.startTime == UInt64.max)
        #expect(try parse("42 (x) S 1 42 42 7" + tail + "\n") == nil)  // no start time
        #expect(try parse("42 (x) S 1 42 42 7" + tail + " 12a\n") == nil)
        #expect(try parse("42 (x) S 1 42 42 tty" + tail + " 12\n") == nil)
        #expect(try parse("42 x S 1 42 42 7" + tail + " 12\n") == nil)  // no command name's parenthesis
        #expect(try parse("") == nil)
    }

    @Test("a process that connected and exited is not read as the program that took its pid after it",
          .enabled(if: geteuid() == 0 && access("/proc/sys/kernel/ns_last_pid", W_OK) == 0 && PeerIdentity.peerPidfdsAvailable))
    func reusedPidOfPeer() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("peer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("s").path
        let listener = UnixSockets.listen(at: path, backlog: 4)
        #expect(listener >= 0)
        defer { close(listener) }
        // A process connects and exits; once it is reaped its pid is free.
        let connector = try ChildProcess.spawn(
            "/usr/bin/python3", arguments: ["-c", "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])", path])
        let accepted = accept(listener, nil, nil)
        #expect(accepted >= 0)
        defer { close(accepted) }
        #expect(connector.wait() == .exited(0))
        // Another program takes that pid (the kernel's next pid set just below it; another process may get there
        // first, so a few tries).
        var taker: ChildProcess?
        for _ in 0..<50 where taker == nil {
            let last = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC)
            let text = "\(connector.pid - 1)"
            _ = text.withCString { write(last, $0, strlen($0)) }
            close(last)
            let candidate = try ChildProcess.spawn("/bin/sleep", arguments: ["30"])
            if candidate.pid == connector.pid {
                taker = candidate
            } else {
                kill(candidate.pid, SIGKILL)
                _ = candidate.wait()
            }
        }
        let sleeper = try #require(taker)
        defer {
            kill(sleeper.pid, SIGKILL)
            _ = sleeper.wait()
        }
        // By its number, the peer now reads as the sleeping program: what SO_PEERCRED's pid alone would say.
        let byNumber = try #require(PeerIdentity.of(pid: connector.pid, uid: geteuid()))
        #expect(byNumber.executable?.hasSuffix("/sleep") == true)
        // Asked of the socket, the connected process is gone, and nobody is identified in its place; nor is the
        // sleeping program watched as the connection's process.
        #expect(PeerIdentity.of(socket: accepted) == nil)
        #expect(ProcessWatch(byNumber, socket: accepted) == nil)
        #expect(ProcessWatch(byNumber) != nil)  // by pid alone it would be
    }

    @Test("a watched process is the same program while it runs; once it has exited it is not, whoever gets its pid")
    func exitedProcessIsNotTheSame() throws {
        let child = try ChildProcess.spawn("/bin/sleep", arguments: ["30"])
        let peer = try #require(PeerIdentity.of(pid: child.pid, uid: getuid()))
        let watch = try #require(ProcessWatch(peer))
        #expect(watch.isStillSameProgram())
        #expect(watch.tracer() == 0)
        kill(child.pid, SIGKILL)
        _ = child.wait()
        #expect(!watch.isStillSameProgram())
        #expect(watch.tracer() == nil)
        // A start time that is not the process's: no watch at all.
        var other = peer
        other.startTime = UInt64.max  // no process started then
        let live = try ChildProcess.spawn("/bin/sleep", arguments: ["30"])
        defer {
            kill(live.pid, SIGKILL)
            _ = live.wait()
        }
        other.pid = live.pid
        #expect(ProcessWatch(other) == nil)
    }

    @Test("an exited process not yet waited for (a zombie, whose /proc/PID/stat still reads) is no longer alive nor the same program; the watch asks a pidfd where the kernel gives them")
    func zombieIsNotTheSame() throws {
        let child = try ChildProcess.spawn("/bin/sleep", arguments: ["30"])
        var reaped = false
        defer {
            if !reaped {
                kill(child.pid, SIGKILL)
                _ = child.wait()
            }
        }
        let peer = try #require(PeerIdentity.of(pid: child.pid, uid: getuid()))
        let watch = try #require(ProcessWatch(peer))
        #expect(watch.watchesThroughPidfd == ProcessWatch.pidfdsAvailable)
        #expect(watch.isAlive())
        #expect(watch.isStillSameProgram())
        kill(child.pid, SIGKILL)
        // Exited, not reaped: the pid is still the child's and its stat file reads the same start time, so only the
        // pidfd (or, without one, the executable that can no longer be read) tells.
        var zombie = false
        for _ in 0..<1000 where !zombie {
            usleep(10_000)
            zombie = isZombie(child.pid)
        }
        #expect(zombie)
        #expect(PeerIdentity.startTime(of: child.pid) == peer.startTime)
        if watch.watchesThroughPidfd { #expect(!watch.isAlive()) }
        #expect(!watch.isStillSameProgram())
        _ = child.wait()
        reaped = true
        #expect(!watch.isAlive())
        #expect(!watch.isStillSameProgram())
    }

    @Test("an offender's new connections are turned away for a while that doubles; another pid, or the pid of another process, is not")
    func offenders() throws {
        let list = ProtocolOffenders()
        let me = getpid()
        let start = PeerIdentity.startTime(of: me)
        #expect(list.penalty(for: me) == nil)
        list.record(pid: me, startTime: start)
        let first = try #require(list.penalty(for: me))
        #expect(first <= ProtocolOffenders.firstPenalty)
        for _ in 0..<4 { list.record(pid: me, startTime: start) }
        #expect(list.penalty(for: me).map { $0 > ProtocolOffenders.firstPenalty * 8 } == true)
        #expect(list.penalty(for: getppid()) == nil)
        // The same pid with another start time (a process that got a reused pid) inherits nothing.
        let reused = ProtocolOffenders()
        reused.record(pid: me, startTime: (start ?? 0) + 1)
        #expect(reused.penalty(for: me) == nil)
    }
}
