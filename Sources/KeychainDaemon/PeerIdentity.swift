import CKeychainLinux
import Foundation
import KeychainCore
import KeychainInterface
import KeychainStorage
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Who is at the other end of a connection, as the kernel says: never what the client says about itself.
public struct PeerIdentity: Sendable, Hashable {
    public var pid: pid_t
    public var uid: uid_t
    /// The canonical path of the peer's executable (`/proc/PID/exe`), nil when it cannot be read.
    public var executable: String?
    /// SHA-256 of that executable (read through `/proc/PID/exe`, so the file the process runs, even if the path
    /// was replaced since); nil when it cannot be read.
    public var executableDigest: Data?
    /// When the process started (field 22 of /proc/PID/stat): with the pid, it names one process for good.
    public var startTime: UInt64?
    /// Code mapped into the process from files a user could have written (a library given with LD_PRELOAD, a
    /// plug-in from the home directory): such a process is not the program its executable names.
    public var foreignCode: [String] = []
    /// The controlling terminal's device number when the process was identified (field 7 of /proc/PID/stat; 0 for
    /// none): where keychaind may ask about it, once that proves to be a login terminal (``LoginTerminal``).
    public var terminalDevice = 0

    public init(pid: pid_t, uid: uid_t, executable: String?, executableDigest: Data? = nil, startTime: UInt64? = nil) {
        self.pid = pid
        self.uid = uid
        self.executable = executable
        self.executableDigest = executableDigest
        self.startTime = startTime
    }

    /// The peer of a connected socket: the pid and uid of SO_PEERCRED (the kernel's, from connect time), then the
    /// process read as ``of(pid:uid:)`` reads it.
    ///
    /// SO_PEERCRED gives a number. A peer that exited after it connected could have its pid taken by another
    /// program before keychaind reads /proc, which would then describe that program. Where the kernel gives the
    /// peer's pidfd (SO_PEERPIDFD, Linux 6.5), the peer must still run once its /proc files are open: then they
    /// are its own.
    public static func of(socket fd: Int32) -> PeerIdentity? {
        guard let (peer, pidfd) = connected(to: fd) else { return nil }
        if pidfd >= 0 { close(pidfd) }
        return peer
    }

    /// ``of(socket:)``, with the connected process's pidfd for the caller to keep (``ProcessWatch``) and close;
    /// -1 where the kernel gives none.
    static func connected(to fd: Int32) -> (peer: PeerIdentity, pidfd: Int32)? {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        guard ckeychain_peer_credentials(fd, &pid, &uid, &gid) == 0, pid > 0 else { return nil }
        let pidfd = ckeychain_peer_pidfd(fd)
        // ESRCH: the connected process is gone (a kernel without SO_PEERPIDFD says ENOPROTOOPT, and is read as
        // before, by pid and start time alone).
        if pidfd < 0, errno == ESRCH { return nil }
        let stillConnected: (() -> Bool)? = pidfd >= 0 ? { ckeychain_pidfd_exited(pidfd) == 0 } : nil
        guard let peer = of(pid: pid, uid: uid, stillConnected: stillConnected) else {
            if pidfd >= 0 { close(pidfd) }
            return nil
        }
        return (peer, pidfd)
    }

    /// Whether this kernel gives a socket's peer as a pidfd (SO_PEERPIDFD, Linux 6.5), asked of a socket pair.
    static var peerPidfdsAvailable: Bool {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else { return false }
        defer { pair.forEach { close($0) } }
        let pidfd = ckeychain_peer_pidfd(pair[0])
        if pidfd >= 0 { close(pidfd) }
        return pidfd >= 0
    }

    /// A process by pid: a socket's peer, or one the message bus vouched for (GetConnectionUnixProcessID /
    /// UnixUser). `/proc/PID/exe` and the start time are read twice around the digest, so that a process that
    /// exited (and whose pid was reused) in between is not mistaken for another.
    ///
    /// `stillConnected`, where given, says whether the process that connected still runs: asked once /proc/PID/stat
    /// is open, so that a pid taken over by another process in between is not read as the connected one.
    public static func of(pid: pid_t, uid: uid_t, stillConnected: (() -> Bool)? = nil) -> PeerIdentity? {
        guard pid > 0 else { return nil }
        // One descriptor for both reads of the start time: once the process has exited, reads through it fail
        // (a descriptor of /proc/PID belongs to the process, not its number), so a reused pid cannot answer.
        let statFile = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard statFile >= 0 else { return nil }
        defer { close(statFile) }
        // Alive now, so alive at the open: the descriptor is the connected process's (a pid is not reused while its
        // process runs).
        if let stillConnected, !stillConnected() { return nil }
        let first = executable(of: pid)
        let stat = statFields(statFile: statFile)
        // Hashing a program not seen before (a new build, a large binary) can take a while: off the connection
        // loop's pool.
        let digest = ExecutableDigest.of(path: "/proc/\(pid)/exe", beforeHashing: { ConnectionLoop.willWait() })
        let second = executable(of: pid)
        guard first == second, let stat, stat.startTime == startTime(statFile: statFile) else { return nil }
        var peer = PeerIdentity(pid: pid, uid: uid, executable: first, executableDigest: digest, startTime: stat.startTime)
        peer.foreignCode = foreignCode(of: pid, executable: first)
        peer.terminalDevice = stat.terminal
        return peer
    }

    /// The files other than the executable whose code `pid` has mapped (executable mappings in /proc/PID/maps)
    /// that root alone could not have put there. Maps that cannot be read while the executable could (a process
    /// that hid itself in the middle of being identified) count as foreign code: what it runs is unknown. Code
    /// loaded after the identification is not seen.
    static func foreignCode(of pid: pid_t, executable: String?) -> [String] {
        let unreadable = executable == nil ? [] : ["(code that could not be read)"]
        let fd = open("/proc/\(pid)/maps", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return unreadable }
        defer { close(fd) }
        // Parsed as it is read, through a buffer on the stack: a large program's maps (hundreds of kilobytes) is
        // never held whole, so identifying it leaves no large block between a connection's long-lived ones.
        var files = CodeFiles(except: executable)
        let read = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16384) { chunk -> Bool in
            var total = 0
            while total <= 4 << 20 {  // a process with this much mapped: enough has been seen
                let n = Glibc.read(fd, chunk.baseAddress, chunk.count)
                if n < 0 && errno == EINTR { continue }
                if n < 0 { return false }
                if n == 0 { break }
                files.feed(UnsafeBufferPointer(rebasing: chunk[..<n]))
                total += n
            }
            return total > 0
        }
        guard read else { return unreadable }
        return files.finish().filter { !ProtectedLibraries.isProtected($0) }.sorted()
    }

    /// The files that executable mappings of /proc/PID/maps name, but `executable`.
    static func codeFiles(inMaps maps: [UInt8], except executable: String?) -> Set<String> {
        var files = CodeFiles(except: executable)
        maps.withUnsafeBufferPointer { files.feed($0) }
        return files.finish()
    }

    /// The code files of /proc/PID/maps, from its text fed in pieces. Parsed in place as bytes (a program maps
    /// dozens of libraries, and this runs for every new caller): each line is "address perms offset dev inode
    /// path"; no field before the path holds a "/", and the path runs to the end of the line.
    struct CodeFiles {
        let executable: String?
        private var files = Set<String>()
        /// The start of a line that the last piece cut.
        private var carried: [UInt8] = []

        init(except executable: String?) { self.executable = executable }

        mutating func feed(_ text: UnsafeBufferPointer<UInt8>) {
            var start = 0
            while let end = text[start...].firstIndex(of: UInt8(ascii: "\n")) {
                if carried.isEmpty {
                    take(text[start..<end])
                } else {
                    carried += text[start..<end]
                    takeCarried()
                }
                start = end + 1
            }
            carried += text[start...]
        }

        mutating func finish() -> Set<String> {
            if !carried.isEmpty { takeCarried() }
            return files
        }

        private mutating func takeCarried() {
            let line = carried
            carried.removeAll(keepingCapacity: true)
            line.withUnsafeBufferPointer { take($0[...]) }
        }

        private mutating func take(_ line: Slice<UnsafeBufferPointer<UInt8>>) {
            let space = UInt8(ascii: " "), slash = UInt8(ascii: "/")
            guard let gap = line.firstIndex(of: space),
                  line[(gap + 1)...].prefix(4).contains(UInt8(ascii: "x")),
                  let pathStart = line.firstIndex(of: slash)
            else { return }
            var pathEnd = line.endIndex
            while pathEnd > pathStart, line[pathEnd - 1] == space { pathEnd -= 1 }
            let name = String(decoding: line[pathStart..<pathEnd], as: UTF8.self)
            if name != executable { files.insert(name) }
        }
    }

    /// Whether the process is still the one that was identified: the same start time (not a reused pid) and, where
    /// its executable can be read, the same one (it has not executed another program since). A process that made
    /// itself non-dumpable hides its executable; executing another program would make it readable again.
    public func isStillSameProgram() -> Bool {
        guard let start = Self.startTime(of: pid), start == startTime else { return false }
        guard let now = Self.executable(of: pid) else { return Self.isHidden(pid) }
        return now == executable
    }

    /// The pid of the process tracing this one (TracerPid in /proc/PID/status), 0 when none; nil when unreadable.
    public func tracer() -> pid_t? {
        let fd = open("/proc/\(pid)/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return Self.tracer(statusFile: fd)
    }

    /// TracerPid from an open /proc/PID/status, read from its start in one system call (the file is about 1.5 kB)
    /// and parsed as bytes: it runs at every request.
    static func tracer(statusFile fd: Int32) -> pid_t? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 8192) { buffer -> pid_t? in
            let count = pread(fd, buffer.baseAddress, buffer.count, 0)
            guard count > 0 else { return nil }
            let text = UnsafeBufferPointer(rebasing: buffer[..<count])
            let key: StaticString = "\nTracerPid:"
            let needle = UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
            var at = 0
            while at + needle.count <= count, !text[at..<(at + needle.count)].elementsEqual(needle) { at += 1 }
            guard at + needle.count <= count else { return nil }
            let start = at + needle.count
            var value: pid_t = 0
            var digits = 0
            for byte in text[start...] {
                if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") { if digits == 0 { continue } else { break } }
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 10 else { break }
                value = value * 10 + pid_t(byte - UInt8(ascii: "0"))
                digits += 1
            }
            return digits > 0 ? value : nil
        }
    }

    /// True when the process's /proc files are closed to us (it made itself non-dumpable), rather than gone.
    static func isHidden(_ pid: pid_t) -> Bool {
        var info = stat()
        return stat("/proc/\(pid)/exe", &info) != 0 && errno == EACCES
    }

    /// The program, apart from the process running it: what two processes of the same binary share.
    public struct Program: Hashable, Sendable {
        public let executable: String?
        public let digest: Data?
        /// A process with foreign code is not the program its executable names (see ``foreignCode``).
        public let foreignCode: [String]
    }

    public var program: Program { Program(executable: executable, digest: executableDigest, foreignCode: foreignCode) }

    /// The target of /proc/PID/exe, read into a buffer on the stack (it runs twice per connection and at every
    /// request).
    static func executable(of pid: pid_t) -> String? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Int(PATH_MAX) + 1) { buffer -> String? in
            let n = readlink("/proc/\(pid)/exe", buffer.baseAddress!, buffer.count - 1)
            guard n > 0 else { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[..<n]), as: UTF8.self)
        }
    }

    /// Field 22 of /proc/PID/stat: when the process started (in clock ticks since boot).
    /// Read with one system call and parsed as bytes: it runs twice for every connection.
    static func startTime(of pid: pid_t) -> UInt64? {
        statFields(of: pid)?.startTime
    }

    static func statFields(of pid: pid_t) -> (terminal: Int, startTime: UInt64)? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return statFields(statFile: fd)
    }

    /// Field 22 of an open /proc/PID/stat, read from its start: nil once the process has exited (a descriptor of
    /// /proc/PID names one process, not its number).
    static func startTime(statFile fd: Int32) -> UInt64? {
        statFields(statFile: fd)?.startTime
    }

    /// Fields 7 (the controlling terminal's device number, 0 for none) and 22 (the start time) of an open
    /// /proc/PID/stat, from one read.
    static func statFields(statFile fd: Int32) -> (terminal: Int, startTime: UInt64)? {
        // The fields up to the start time fit well within 1 kB; read onto the stack, parsed in place.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { buffer -> (terminal: Int, startTime: UInt64)? in
            let count = pread(fd, buffer.baseAddress, buffer.count, 0)
            guard count > 0 else { return nil }
            let text = UnsafeBufferPointer(rebasing: buffer[..<count])
            // The command name (field 2) may hold spaces and parentheses: count fields after its last ")".
            guard let close = text.lastIndex(of: UInt8(ascii: ")")) else { return nil }
            let fields = text[(close + 1)...]
            // As numbers the way the split fields were read: Int for the terminal, UInt64 for the start time (a field
            // ends at a space or the line's end; the kernel never writes either as the last field).
            guard let terminalField = field(4, of: fields), let startField = field(19, of: fields),
                  let terminal = Int(String(decoding: terminalField, as: UTF8.self)),
                  let start = UInt64(String(decoding: startField, as: UTF8.self))
            else { return nil }
            return (terminal, start)
        }
    }

    /// Field `index` of the space-separated fields in `text` (empty fields skipped, as `split` does); the last
    /// field ends at the line's end.
    static func field(_ index: Int, of text: Slice<UnsafeBufferPointer<UInt8>>) -> Slice<UnsafeBufferPointer<UInt8>>? {
        let space = UInt8(ascii: " "), newline = UInt8(ascii: "\n")
        var current = -1
        var i = text.startIndex
        while i < text.endIndex {
            while i < text.endIndex, text[i] == space { i += 1 }
            guard i < text.endIndex, text[i] != newline else { return nil }
            current += 1
            let start = i
            while i < text.endIndex, text[i] != space, text[i] != newline { i += 1 }
            if current == index { return text[start..<i] }
        }
        return nil
    }

    /// A file of /proc read to its end: they report a size of 0 and hand out their text a page per read, so a
    /// reader that trusts the size, or reads once, sees only the beginning.
    static func readProcFile(_ path: String) -> String? {
        readProcBytes(path).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The bytes of a file of /proc, read as ``readProcFile(_:)`` reads them.
    static func readProcBytes(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // Read through a buffer on the stack (not zeroed, not allocated: this runs at every connection).
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16384) { chunk -> [UInt8]? in
            var bytes: [UInt8] = []
            while true {
                let n = read(fd, chunk.baseAddress, chunk.count)
                if n < 0 && errno == EINTR { continue }
                if n < 0 { return nil }
                if n == 0 { break }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: chunk[..<n]))
                if bytes.count > 4 << 20 { break }  // a process with this much mapped: enough has been seen
            }
            return bytes
        }
    }
}

/// The /proc files of one identified process, kept open for the checks made at each of its requests: two reads,
/// no path lookups. A descriptor of /proc/PID belongs to the process, not to its number: once the process has
/// exited, reads fail (ESRCH) even if another process got the pid.
///
/// Where the kernel has pidfds (Linux 5.3), whether the process still runs is asked of one instead of reading its
/// start time again: a poll, where /proc/PID/stat is text the kernel builds for every read (a tenth of keychaind's
/// work per find went to the checks of each request).
final class ProcessWatch: Sendable {
    let peer: PeerIdentity
    /// Names the identified process for as long as this watch lives; -1 where pidfds are not available.
    private let pidfd: Int32
    /// /proc/PID/stat, kept only where there is no pidfd.
    private let stat: Int32
    private let status: Int32

    /// Nil when the process's files cannot be opened, or it is not the process `peer` names any more.
    ///
    /// `connected`: the pidfd of the process that connected (``PeerIdentity/connected(to:)``), which this watch
    /// takes over: it names that process whatever happened to its pid since. Without one (-1: an older kernel, or a
    /// peer not met on a socket) the pidfd is opened by pid.
    init?(_ peer: PeerIdentity, connected: Int32 = -1) {
        // The pidfd is opened before the start time is compared: when it matches, the identified process was alive
        // then, so it was alive at the open too, and the pidfd is its own.
        let pidfd = connected >= 0 ? connected : ckeychain_pidfd_open(peer.pid)
        let stat = open("/proc/\(peer.pid)/stat", O_RDONLY | O_CLOEXEC)
        let status = open("/proc/\(peer.pid)/status", O_RDONLY | O_CLOEXEC)
        // The connected process still running after the opens: they were of it (its pid was not yet another's).
        guard stat >= 0, status >= 0, let start = PeerIdentity.startTime(statFile: stat), start == peer.startTime,
              connected < 0 || ckeychain_pidfd_exited(connected) == 0
        else {
            for fd in [pidfd, stat, status] where fd >= 0 { close(fd) }
            return nil
        }
        self.peer = peer
        self.pidfd = pidfd
        self.status = status
        if pidfd >= 0 {
            close(stat)
            self.stat = -1
        } else {
            self.stat = stat
        }
    }

    /// ``init(_:connected:)`` with the pidfd of `socket`'s peer.
    convenience init?(_ peer: PeerIdentity, socket: Int32) {
        self.init(peer, connected: ckeychain_peer_pidfd(socket))
    }

    deinit {
        for fd in [pidfd, stat, status] where fd >= 0 { close(fd) }
    }

    /// Whether the checks ask a pidfd (else they read /proc/PID/stat).
    var watchesThroughPidfd: Bool { pidfd >= 0 }

    /// Whether this kernel lets keychaind open pidfds (a seccomp profile may refuse them where the kernel has them).
    static var pidfdsAvailable: Bool {
        let fd = ckeychain_pidfd_open(getpid())
        guard fd >= 0 else { return false }
        close(fd)
        return true
    }

    /// Whether the identified process still runs (not exited, its pid not taken by another).
    func isAlive() -> Bool {
        if pidfd >= 0 { return ckeychain_pidfd_exited(pidfd) == 0 }
        return PeerIdentity.startTime(statFile: stat) == peer.startTime
    }

    /// As ``PeerIdentity/isStillSameProgram()``: the executable is read first, then the process is seen alive
    /// (so the path read was still its own).
    func isStillSameProgram() -> Bool {
        let now = PeerIdentity.executable(of: peer.pid)
        guard isAlive() else { return false }
        // Hidden (non-dumpable): and still alive after that look, so the look was at this process.
        guard let now else { return PeerIdentity.isHidden(peer.pid) && isAlive() }
        return now == peer.executable
    }

    /// As ``PeerIdentity/tracer()``.
    func tracer() -> pid_t? { PeerIdentity.tracer(statusFile: status) }
}

/// ``ProtectedPath/isProtected(_:)`` for the files programs map, remembered for a minute: the same few dozen
/// libraries are checked for every new caller (each check is a `lstat` per path component). Only root can make a
/// protected path unprotected or the other way round, so a remembered answer cannot be turned by a user meanwhile.
enum ProtectedLibraries {
    private static let known = Mutex<(answers: [String: Bool], since: ContinuousClock.Instant)>(([:], .now))

    static func isProtected(_ path: String) -> Bool {
        let now = ContinuousClock.now
        if let answer = known.withLock({ known -> Bool? in
            if now - known.since > .seconds(60) || known.answers.count > 4096 { known = ([:], now) }
            return known.answers[path]
        }) {
            return answer
        }
        let answer = ProtectedPath.isProtected(path)
        known.withLock { $0.answers[path] = answer }
        return answer
    }
}
