import Foundation
import KeychainClient
import KeychainCore
import KeychainTestSupport
import KeychainWire
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// keychaind under abuse of its resources: descriptors, memory (issue: no client can stall keychaind).
@Suite("keychaind's resources, abused", .serialized)
struct DaemonResourceTests {
    /// A connection to `socket`, or -1.
    static func connect(_ socket: String) -> Int32 { UnixSockets.connect(to: socket) }

    static func residentKiB(_ pid: pid_t) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return 0
    }

    /// A keychaind started for one test (by a first `security` command): its home, socket and pid.
    struct Started {
        let home: DaemonTests.DaemonHome
        let socket: String
        let pid: pid_t

        init() throws {
            home = try DaemonTests.DaemonHome()
            #expect(try home.run("security", "list-keychains").status == 0)  // starts keychaind
            socket = try DaemonResourceTests.socket(in: home)
            pid = try #require(home.daemonPID)
        }
    }

    static func socket(in home: DaemonTests.DaemonHome) throws -> String {
        let runtime = home.tool.home.appendingPathComponent("run/keychain")
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: runtime.path).first { $0.hasSuffix(".sock") })
        return runtime.appendingPathComponent(name).path
    }

    @Test("running out of descriptors does not end keychaind: it waits for some to close and serves again",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit")))
    func outOfDescriptors() throws {
        let daemon = try Started()
        defer { daemon.home.cleanUp() }
        let (home, socket, pid) = (daemon.home, daemon.socket, daemon.pid)
        // Leave keychaind six descriptors more than it holds now: one client's (its socket, its /proc stat and
        // status) and what a call opens.
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        let limit = "--nofile=\(open + 6):\(open + 6)"
        #expect(try ChildProcess.run("/usr/bin/prlimit", arguments: ["--pid", "\(pid)", limit]).termination == .exited(0))
        // Far more connections than that, held open: accept fails with EMFILE meanwhile.
        let held = (0..<40).map { _ in Self.connect(socket) }
        usleep(500_000)
        for fd in held where fd >= 0 { close(fd) }
        usleep(300_000)
        // Still there, serving.
        #expect(kill(pid, 0) == 0)
        #expect(FileManager.default.fileExists(atPath: socket))
        #expect(try home.run("security", "list-keychains").status == 0)
    }

    /// Says hello on `fd`; the daemon's answer (its greeting, or a refusal: 0 and the reason).
    static func greet(_ fd: Int32) -> [UInt8]? {
        // A connection that is turned away may be closed before the hello arrives: its answer is still there.
        _ = Framing.send(Framing.hello(), on: fd)
        return try? Framing.receive(on: fd, limit: 4096)
    }

    @Test("issue 22: a process that floods keychaind with bad frames is turned away at accept, for longer each time; others are served")
    func protocolOffenderIsTurnedAway() throws {
        let daemon = try Started()
        defer { daemon.home.cleanUp() }
        let (home, socket) = (daemon.home, daemon.socket)
        /// Connects until keychaind greets this process again (its penalty over); then breaks the protocol once.
        func offend() -> Bool {
            for _ in 0..<200 {
                let fd = Self.connect(socket)
                defer { close(fd) }
                guard let answer = Self.greet(fd) else { return false }
                if answer.first == 0 {
                    usleep(20_000)
                    continue
                }
                // A frame that announces 2 GiB: refused, and the connection ends.
                _ = [UInt8]([0x7F, 0xFF, 0xFF, 0xFF]).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                var byte: UInt8 = 0
                while recv(fd, &byte, 1, 0) > 0 {}  // until keychaind closes it
                return true
            }
            return false
        }
        #expect(offend())
        // Right after: this process is told why, in one frame, without being served.
        let fd = Self.connect(socket)
        let refusal = Self.greet(fd) ?? []
        close(fd)
        #expect(refusal.first == 0)
        #expect(String(decoding: refusal.dropFirst(), as: UTF8.self).contains("broke keychaind's protocol"))
        // Another process (another pid) is served as before, meanwhile.
        #expect(try home.run("security", "list-keychains").status == 0)
        // Each offence doubles the wait: after five, it is more than 8 × the first.
        for _ in 0..<4 { #expect(offend()) }
        let again = Self.connect(socket)
        let text = String(decoding: (Self.greet(again) ?? []).dropFirst(), as: UTF8.self)
        close(again)
        let milliseconds = text.split(separator: " ").compactMap { Int($0) }.first ?? 0
        #expect(milliseconds > 400, "\(text)")
        // A client that keeps to the protocol after its penalty is served in full.
        #expect(offend())
    }

    @Test("a frame header does not reserve the size it announces: 100 connections announcing 8 MiB cost little")
    func announcedSizeIsNotReserved() throws {
        let daemon = try Started()
        defer { daemon.home.cleanUp() }
        let (home, socket, pid) = (daemon.home, daemon.socket, daemon.pid)
        let before = Self.residentKiB(pid)
        let held = Self.hold(100, on: socket) { fd in
            var hello = Framing.hello()
            var frames: [UInt8] = []
            withUnsafeBytes(of: UInt32(hello.count).bigEndian) { frames.append(contentsOf: $0) }
            frames += hello
            hello.removeAll()
            // A request header announcing 8 MiB, and nothing after it.
            withUnsafeBytes(of: UInt32(WireLimits.maximumRequest).bigEndian) { frames.append(contentsOf: $0) }
            _ = frames.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        usleep(500_000)
        let during = Self.residentKiB(pid)
        for fd in held { close(fd) }
        #expect(held.count == 100)
        #expect(during - before < 64 * 1024, "resident \(before) KiB before, \(during) KiB with 100 announced frames")
        #expect(try home.run("security", "list-keychains").status == 0)
    }
    /// `count` connections to `socket`, each given what `start` sends, held open.
    static func hold(_ count: Int, on socket: String, _ start: (Int32) -> Void) -> [Int32] {
        (0..<count).compactMap { _ in
            let fd = connect(socket)
            guard fd >= 0 else { return nil }
            start(fd)
            return fd
        }
    }

    static func threads(_ pid: pid_t) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? 0
    }

    @Test("issue 22: clients that sent half a frame and stopped hold no thread of keychaind; the others are served meanwhile")
    func halfFramesHoldNoThread() throws {
        let daemon = try Started()
        defer { daemon.home.cleanUp() }
        let (home, socket, pid) = (daemon.home, daemon.socket, daemon.pid)
        let before = Self.threads(pid)
        let held = Self.hold(150, on: socket) { fd in
            // Greeted, then half a request: a header announcing 100 bytes, and 10 of them.
            #expect(Self.greet(fd)?.first != 0)
            let half: [UInt8] = [0, 0, 0, 100] + [UInt8](repeating: 1, count: 10)
            _ = half.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        usleep(300_000)
        let during = Self.threads(pid)
        #expect(held.count == 150)
        // A thread per connection would be 150 more.
        #expect(during - before < 10, "keychaind's threads: \(before) before, \(during) with 150 half frames")
        #expect(try home.run("security", "list-keychains").status == 0)
        // The rest of a frame, when it comes, is answered: the half kept was not lost. (An empty request body is
        // not a request: an error answer, on a connection that stays open.)
        let fd = held[0]
        _ = [UInt8](repeating: 1, count: 90).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        #expect((try? Framing.receive(on: fd, limit: 1 << 20)) != nil, "the completed frame was answered")
        for fd in held { close(fd) }
    }
    @Test("requests sent ahead of their answers, many in one write, are all answered in order (frames already read ahead get turns of their own)")
    func requestsSentAhead() throws {
        let daemon = try Started()
        defer { daemon.home.cleanUp() }
        let socket = daemon.socket
        let fd = Self.connect(socket)
        defer { close(fd) }
        #expect(Self.greet(fd)?.first != 0)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // Far more than one turn's worth (four), small enough that many fit in one read ahead.
        let count = 40
        #expect(Framing.send(Array(repeating: try Request.searchList.encode(), count: count), on: fd))
        var answered = 0
        while answered < count, let frame = try? Framing.receive(on: fd, limit: 1 << 20) {
            guard case .references = try Response.decode(frame) else { break }
            answered += 1
        }
        #expect(answered == count)
    }
}
