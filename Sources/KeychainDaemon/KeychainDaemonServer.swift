import CKeychainLinux
import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus
import KeychainStorage
import KeychainWire
import Logging
import Synchronization
import KeychainThreads

#if canImport(Glibc)
import Glibc
#endif

/// keychaind: one per user and set of keychain directories. Its connections are served by a thread per CPU
/// (``ConnectionLoop``), and anything that waits on a person or a client is done off those threads, so a slow or
/// stuck client holds nobody else up; every connection of the daemon shares one set of open keychains, so a
/// keychain unlocked by one client is unlocked for all until it locks.
///
/// By job, one file each: listening (this file: the socket, the single-instance lock), serving connections
/// (`ConnectionLoop`: accepting, the threads, who waits where), identifying a client (`+Connection`), one client
/// (`DaemonConnection`: greeting, identity checks, requests, event stream), asking the user (`+Asking`),
/// locking on a schedule (`LockScheduler`: idle deadlines, waking, a replaced socket; logind's sleep signal in
/// `+Locking`), events (`EventHub`), the Secret Service wiring (`+SecretService`; the D-Bus objects themselves are in
/// `SecretService/`), and its lifetime under a ServiceGroup (`+Service`).
public final class KeychainDaemonServer: Sendable, ConnectionHost {
    public let locations: KeychainLocations
    public let socket: URL
    let policy: CallerPolicy
    /// What every connection's service opens files with: made once (it reads the environment).
    let fileConfiguration: KeychainFile.Configuration
    /// The default keychain and search list of these locations, for every connection's service (made once).
    let preferences: KeychainPreferences
    /// The sync engine keychaind runs keychains' sync with (nil: this server does not sync).
    let syncing: (any KeychainSyncing)?
    /// Every decision about an item, written before the answer goes out (docs/ACCESS-LOG.md).
    let accessLog: AccessLogKeeper
    /// The login keychain at its standard place, where the log's secrets are kept.
    let loginKeychainPath: String
    let lockFD: Int32
    /// The group an installed keychaind was started with (set-group-ID), kept as its saved group only: named in the
    /// credentials of each greeting, by which clients know it (``InstalledDaemon``). nil when not installed so.
    let greetingGroup: gid_t?

    /// Takes the single-instance lock and binds the socket (directory 0700, socket 0600).
    ///
    /// - Throws: ``StartError/alreadyRunning`` when another keychaind serves these locations.
    public init(locations: KeychainLocations, policy: CallerPolicy, syncing: (any KeychainSyncing)? = nil,
                greetingGroup: gid_t? = nil)
        throws(StartError)
    {
        self.greetingGroup = greetingGroup
        self.syncing = syncing
        self.locations = locations
        self.policy = policy
        let lockScheduler = LockScheduler()
        self.lockScheduler = lockScheduler
        var fileConfiguration = OpenKeychains.standardConfiguration(locations: locations)
        fileConfiguration.idleDeadlineMayBeSooner = { lockScheduler.idleDeadlineMayBeSooner() }
        self.fileConfiguration = fileConfiguration
        self.preferences = KeychainPreferences(locations: locations)
        self.registry = ApplicationRegistry(stateDirectory: locations.stateDirectory)
        self.greeting = Framing.daemonGreeting(directories: locations.servedDirectories)
        self.socket = locations.daemonSocket
        self.loginKeychainPath = locations.loginKeychain.path
        let directory = socket.deletingLastPathComponent()
        try Self.makePrivateDirectory(directory)
        let lock = open(socket.path + ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lock >= 0 else { throw .failed("cannot open \(socket.path).lock (errno \(errno))") }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
            close(lock)
            throw .alreadyRunning(socket.path)
        }
        lockFD = lock
        // Only the keychaind that holds the lock writes the log (another one may start, find it held and end).
        do {
            accessLog = try AccessLogKeeper(directory: locations.stateDirectory.appendingPathComponent("access-log"))
        } catch {
            close(lock)
            throw .failed("the access log: \(error.message)")
        }
        // The lock file names the daemon's pid (for `kill $(cat …)`, and for tests).
        _ = ftruncate(lock, 0)
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { pwrite(lock, $0.baseAddress, $0.count, 0) }
        // systemd socket activation (keychaind.socket): the socket is already bound and listening, as fd 3.
        let environment = ProcessInfo.processInfo.environment
        if environment["LISTEN_PID"].flatMap(Int32.init) == getpid(), let count = environment["LISTEN_FDS"].flatMap(Int.init),
            count >= 1
        {
            _ = fcntl(3, F_SETFD, FD_CLOEXEC)
            _ = ckeychain_pass_credentials(3)  // inherited by every accepted connection (see ClientStream)
            connections = try ConnectionLoop(listening: 3)
            return
        }
        unlink(socket.path)  // a socket left by a daemon that died; we hold the lock, so it is not in use
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .failed("cannot make a socket (errno \(errno))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(socket.path.utf8)
        guard path.count < MemoryLayout.size(ofValue: address.sun_path) else { throw .failed("socket path too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.enumerated() { raw[i] = b }
            raw[path.count] = 0
        }
        let previous = umask(0o177)  // the socket is created 0600
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        umask(previous)
        // The sender's credentials on everything received, from the first byte of every accepted connection on.
        _ = ckeychain_pass_credentials(fd)
        guard bound == 0, listen(fd, 64) == 0 else { throw .failed("cannot listen on \(socket.path) (errno \(errno))") }
        connections = try ConnectionLoop(listening: fd)
    }

    public enum StartError: Error, Sendable {
        case alreadyRunning(String)
        case failed(String)
    }


    /// Accepts connections until ``stop()`` (or a shutdown of the listening socket), then closes every keychain
    /// (in-flight calls finish first; the WAL is folded back) and removes the socket. keychaind runs it under a
    /// ServiceGroup (``run()``); a program that hosts a server of its own may call it on a thread of its own.
    public func serveUntilStopped() {
        let socketAtStart = Self.identity(of: socket.path)
        lockScheduler.start(
            LockScheduler.Host(
                keychains: { [keychains] in keychains.all },
                locked: { [self] file in
                    publish(KeychainEvent(kind: .lock, keychain: file.url.standardizedFileURL.path, pid: getpid()))
                },
                socketGone: { [self] in
                    if let shutDown = whenUnreachable.withLock({ $0 }) { shutDown() } else { stop() }
                }, logger: logger),
            socket: socket, socketAtStart: socketAtStart)
        accessLogKeyReady()
        connections.run(host: self)
        stopped.store(true, ordering: .relaxed)
        lockScheduler.stop()
        // The log first: its checkpoint goes into the login keychain, which must still be open. Then every file
        // this server opened (its own set: a server run inside another program leaves that program's handles alone).
        accessLog.close()
        keychains.closeAll(finally: true)
        // Only our own socket: a daemon started after ours lost its directory may already serve a new one there.
        if Self.identity(of: socket.path) == socketAtStart { unlink(socket.path) }
    }

    public func stop() { connections.stop() }

    /// What to do when the socket was removed or replaced and nobody can reach this server any more: by default it
    /// stops; keychaind shuts its whole service group down instead (sync's rounds first, then this server).
    public func whenUnreachable(_ shutDown: @escaping @Sendable () -> Void) {
        whenUnreachable.withLock { $0 = shutDown }
    }
    let whenUnreachable = Mutex<(@Sendable () -> Void)?>(nil)

    /// A word to the user from a service of this server: keychaind has no terminal, so it goes to its log.
    var daemonNotice: @Sendable (String) -> Void { { [logger] text in logger.notice("\(text)") } }

    /// Whether `client` comes from a process that is being turned away for breaking the protocol (``ProtocolOffenders``):
    /// then it is told so in one frame and closed, here on the accepting thread, without a thread of its own.
    func turnedAway(_ client: Int32) -> Bool {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        guard ckeychain_peer_credentials(client, &pid, &uid, &gid) == 0, let wait = offenders.penalty(for: pid) else {
            return false
        }
        let milliseconds = wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000 + 1
        refuse(client, "this process broke keychaind's protocol; its connections are refused for \(milliseconds) ms")
        close(client)
        return true
    }

    /// Device and inode of the file at `path`, or nil when there is none.
    static func identity(of path: String) -> [UInt64]? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return [UInt64(info.st_dev), UInt64(info.st_ino)]
    }

    let stopped = Atomic(false)
    /// Every connection, and the threads that serve them.
    let connections: ConnectionLoop
    let lockScheduler: LockScheduler
    /// keychaind's messages (standard error, or the journal: ``ProcessLogHandler``).
    let logger = Logger(label: "keychaind")
    let events = EventHub()
    let offenders = ProtocolOffenders()
    /// Made once: every session asks it (its file is read again only when it changed).
    let registry: ApplicationRegistry
    /// keychaind's greeting, the same for every connection (the directories it serves).
    let greeting: [UInt8]
    /// Every keychain file this server's services have open (theirs alone, not the host process's): what it locks
    /// when idle or before sleep, lists for sync, and closes when it stops.
    public let keychains = OpenKeychains()

    /// logind's delay inhibitor lock while keychaind holds it (closing the descriptor releases it), and whether the
    /// machine is on its way to sleep (a lock that arrives then is let go at once).
    let sleepInhibitor = Mutex<(lock: UnixFileDescriptor?, sleeping: Bool)>((nil, false))
    let secretService = Mutex<SecretServiceServer?>(nil)
    let takingOverSecretService = Mutex(false)

    func refuse(_ fd: Int32, _ reason: String) {
        _ = sendAsKeychaind([0] + Array(reason.utf8), on: fd)
    }

    /// One frame, in one write. Installed (started set-group-ID), keychaind names its group in the write's
    /// credentials, which the kernel checks: a client that reads its greeting (or refusal) that way knows which
    /// keychaind answers, on this connection (docs/SECURITY.md, "Which keychaind a client talks to").
    func sendAsKeychaind(_ payload: [UInt8], on fd: Int32) -> Bool {
        guard let group = greetingGroup else { return Framing.send(payload, on: fd) }
        let frame = Framing.framed(payload)
        while true {
            let sent = frame.withUnsafeBytes { ckeychain_send_as_group(fd, $0.baseAddress, $0.count, group) }
            if sent < 0, errno == EINTR { continue }
            return sent == frame.count
        }
    }

    static func makePrivateDirectory(_ url: URL) throws(StartError) {
        if !FileManager.default.fileExists(atPath: url.path) {
            do {
                try FileManager.default.createDirectory(
                    at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw .failed("cannot create \(url.path)")
            }
        }
        var info = stat()
        guard lstat(url.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == geteuid(),
            info.st_mode & 0o077 == 0
        else { throw .failed("\(url.path) must be a directory of this user with mode 0700") }
    }
}
