import CKeychainLinux
import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus
import KeychainStorage
import KeychainWire
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// keychaind's listening side: one per user and set of keychain directories. Each connection is served on a thread
/// of its own (a slow or stuck client holds only its own thread); every connection of the daemon shares one set of
/// open keychains, so a keychain unlocked by one client is unlocked for all until it locks.
public final class KeychainDaemonServer: Sendable {
    public let locations: KeychainLocations
    public let socket: URL
    private let policy: CallerPolicy
    // SAFETY: set once in init, closed once by stop().
    private let listening: Mutex<Int32>
    /// What every connection's service opens files with: made once (it reads the environment).
    private let fileConfiguration: KeychainFile.Configuration
    private let lockFD: Int32

    /// Takes the single-instance lock and binds the socket (directory 0700, socket 0600).
    ///
    /// - Throws: ``StartError/alreadyRunning`` when another keychaind serves these locations.
    public init(locations: KeychainLocations, policy: CallerPolicy) throws(StartError) {
        self.locations = locations
        self.policy = policy
        self.fileConfiguration = OpenKeychains.standardConfiguration(locations: locations)
        self.socket = locations.daemonSocket
        let directory = socket.deletingLastPathComponent()
        try Self.makePrivateDirectory(directory)
        let lock = open(socket.path + ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lock >= 0 else { throw .failed("cannot open \(socket.path).lock (errno \(errno))") }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
            close(lock)
            throw .alreadyRunning(socket.path)
        }
        lockFD = lock
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
            listening = Mutex(3)
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
        listening = Mutex(fd)
    }

    public enum StartError: Error, Sendable {
        case alreadyRunning(String)
        case failed(String)
    }

    /// The descriptor a signal handler may shut down to end ``run()``.
    public var listeningDescriptor: Int32 { listening.withLock { $0 } }

    /// Accepts connections until ``stop()`` (or a shutdown of the listening socket), then closes every keychain
    /// (in-flight calls finish first; the WAL is folded back) and removes the socket.
    public func run() {
        // Idle keychains lock on time, not only at their next use: the keys leave the daemon's memory.
        // And, as gpg-agent does, a daemon whose socket was removed or replaced (the runtime directory cleaned at
        // logout, a test's home deleted) can no longer be reached: it closes its keychains and ends.
        let socketAtStart = Self.identity(of: socket.path)
        // Keychains set to lock on sleep lock when the machine wakes (SleepDetector).
        let idleLocker = Thread { [self] in
            var sleepDetector = SleepDetector()
            while !stopped.load(ordering: .relaxed) {
                sleep(1)
                let slept = sleepDetector.sleptSinceLastLook()
                let paths = files
                if slept { lockForSleep() }
                for file in OpenKeychains.shared.all where paths.contains(file.url.standardizedFileURL.path) {
                    if file.lockIfIdle() {
                        publish(KeychainEvent(kind: .lock, keychain: file.url.standardizedFileURL.path, pid: getpid()))
                    }
                }
                if socketAtStart != nil, Self.identity(of: socket.path) != socketAtStart {
                    FileHandle.standardError.write(Data("keychaind: \(socket.path) was removed or replaced; stopping\n".utf8))
                    stop()
                    return
                }
            }
        }
        idleLocker.start()
        let listeningStopped = DispatchSemaphore(value: 0)
        let fd = listeningDescriptor
        if !DetachedThread.start(name: "keychaind", stackSize: 1 << 20, { [self] in accept(on: fd, until: listeningStopped) }) {
            accept(on: fd, until: listeningStopped)  // no thread to spare: accept (and serve) here
        }
        listeningStopped.wait()
        stopped.store(true, ordering: .relaxed)
        // The files the daemon's clients used (in keychaind that is every open file; a server run inside another
        // program, as in the tests, leaves that program's own handles alone).
        for path in files { OpenKeychains.shared.close(URL(fileURLWithPath: path)) }
        // Only our own socket: a daemon started after ours lost its directory may already serve a new one there.
        if Self.identity(of: socket.path) == socketAtStart { unlink(socket.path) }
    }

    public func stop() { _ = shutdown(listeningDescriptor, Int32(SHUT_RDWR)) }

    /// One accepting thread at a time (leader and followers): the thread that takes a connection first starts the
    /// next accepting thread, then serves its client, so a new thread's start overlaps the client's first call
    /// instead of delaying it. Signals `stopped` once the listening socket is shut down.
    private func accept(on fd: Int32, until stopped: DispatchSemaphore) {
        while true {
            let client = Glibc.accept(fd, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                // Out of descriptors or memory: a resource error, never a reason to stop serving. The connection
                // stays queued; wait for some to close and try again.
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                    usleep(50_000)
                    continue
                }
                stopped.signal()  // the listening socket was shut down (stop) or is gone
                return
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            let handedOver = DetachedThread.start(name: "keychaind", stackSize: 1 << 20) { [self] in
                accept(on: fd, until: stopped)
            }
            serve(client)
            if handedOver { return }  // else no thread could be made: this one accepts again
        }
    }

    /// Device and inode of the file at `path`, or nil when there is none.
    private static func identity(of path: String) -> [UInt64]? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return [UInt64(info.st_dev), UInt64(info.st_ino)]
    }

    private let stopped = Atomic(false)
    private let events = EventHub()
    private var registry: ApplicationRegistry { ApplicationRegistry(stateDirectory: locations.stateDirectory) }
    /// The services of the connections being served, and the files of those that ended: what the daemon locks when
    /// idle and closes when it stops (in keychaind, every open file; a server run inside another program, as in the
    /// tests, leaves that program's own handles alone).
    private let active = Mutex<[ObjectIdentifier: EmbeddedKeychainService]>([:])
    private let endedFiles = Mutex<Set<String>>([])

    private var files: Set<String> {
        active.withLock { $0.values.reduce(into: endedFiles.withLock { $0 }) { $0.formUnion($1.usedFiles) } }
    }

    /// Locks the keychains set to lock on sleep (`security set-keychain-settings -l`).
    private func lockForSleep() {
        let paths = files
        for file in OpenKeychains.shared.all where paths.contains(file.url.standardizedFileURL.path) && file.lockForSleep() {
            publish(KeychainEvent(kind: .lock, keychain: file.url.standardizedFileURL.path, pid: getpid()))
        }
    }

    /// Follows logind's PrepareForSleep on the system bus, so that keychains set to lock on sleep lock *before* the
    /// machine sleeps and their keys are not in memory while it is suspended (the wake-up detector of run() stays
    /// for machines without logind). Only the signal from the owner of org.freedesktop.login1 counts (only logind
    /// may own that name on the system bus): any program can send a signal of that name to us.
    ///
    /// keychaind holds a *delay* inhibitor lock meanwhile (logind's Inhibit, when the connection passes file
    /// descriptors): logind then waits for it (at most its InhibitDelayMaxSec, 5 s by default) before suspending, so
    /// the locking is not raced by a fast suspend. Released once the keychains are locked, taken again on waking and
    /// whenever logind (re)starts.
    public func watchForSleep(on systemBus: DBusConnection) throws {
        let logind = "org.freedesktop.login1"
        @Sendable func owner() -> String? {
            let reply = try? systemBus.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                        interface: "org.freedesktop.DBus", member: "GetNameOwner",
                                                        body: [.string(logind)]))
            return reply?.kind == .methodReturn ? reply?.body.first?.stringValue : nil
        }
        let known = Mutex(owner())
        _ = try systemBus.call(.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "AddMatch", body: [.string("type='signal',sender='\(logind)',path='/org/freedesktop/login1',"
                                                + "interface='org.freedesktop.login1.Manager',member='PrepareForSleep'")]))
        // logind starting later, or restarting: its inhibitor locks went with it, so a new one is taken.
        _ = try systemBus.call(.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "AddMatch", body: [.string("type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',"
                                                + "arg0='\(logind)'")]))
        systemBus.startReceiving { [self] message in
            if message.kind == .signal, message.member == "NameOwnerChanged", message.sender == "org.freedesktop.DBus",
               message.body.count == 3, message.body[0].stringValue == logind, let newOwner = message.body[2].stringValue {
                known.withLock { $0 = newOwner.isEmpty ? nil : newOwner }
                if newOwner.isEmpty {
                    sleepInhibitor.withLock { $0.lock.take() }?.close()
                } else {
                    takeSleepInhibitor(on: systemBus)
                }
                return
            }
            guard message.kind == .signal, message.member == "PrepareForSleep", message.path == "/org/freedesktop/login1",
                  message.interface == "org.freedesktop.login1.Manager", case .boolean(let sleeping)? = message.body.first,
                  let sender = message.sender
            else { return }
            // logind restarted: its new unique name is looked up once more.
            if known.withLock({ $0 }) != sender { known.withLock { $0 = owner() } }
            guard known.withLock({ $0 }) == sender else { return }
            sleepInhibitor.withLock { $0.sleeping = sleeping }
            if sleeping {
                lockForSleep()
                sleepInhibitor.withLock { $0.lock.take() }?.close()  // locked: logind may go on
            } else {
                takeSleepInhibitor(on: systemBus)
            }
        }
        takeSleepInhibitor(on: systemBus)
    }

    /// logind's delay inhibitor lock while keychaind holds it (closing the descriptor releases it), and whether the
    /// machine is on its way to sleep (a lock that arrives then is let go at once).
    private let sleepInhibitor = Mutex<(lock: UnixFileDescriptor?, sleeping: Bool)>((nil, false))

    /// Asks logind for a delay inhibitor on sleep, on a thread of its own: a slow or absent logind never holds up
    /// keychaind's start or the signals behind it. Refused (no logind, a policy that says no, a bus that passes no
    /// descriptors): the signal alone still locks, only without the guarantee of going first.
    private func takeSleepInhibitor(on systemBus: DBusConnection) {
        guard systemBus.passesFileDescriptors else { return }
        DispatchQueue.global(qos: .utility).async { [self] in
            let lock: UnixFileDescriptor
            do {
                let reply = try systemBus.call(.methodCall(
                    destination: "org.freedesktop.login1", path: "/org/freedesktop/login1",
                    interface: "org.freedesktop.login1.Manager", member: "Inhibit",
                    body: [.string("sleep"), .string("keychaind"), .string("Locking keychains set to lock on sleep"),
                           .string("delay")]))
                guard let value = reply.body.first, let answered = reply.fileDescriptor(value) else {
                    FileHandle.standardError.write(Data("keychaind: logind's Inhibit answered no descriptor\n".utf8))
                    return
                }
                lock = answered
            } catch {
                FileHandle.standardError.write(Data("keychaind: no sleep inhibitor from logind: \(error)\n".utf8))
                return
            }
            let released = sleepInhibitor.withLock { state -> UnixFileDescriptor? in
                if state.sleeping { return lock }  // too late for this sleep: the next waking asks again
                defer { state.lock = lock }
                return state.lock
            }
            released?.close()
        }
    }

    /// Serves the Secret Service on `connection` (the session bus) from this daemon's keychains: each caller the
    /// bus names is identified like a socket peer and gets a service that sees every access group (as `security`
    /// does: the Secret Service has no groups) with its own program for the items' trusted-application lists.
    public func serveSecretService(on connection: DBusConnection, replace: Bool) throws(SecretServiceServer.StartError) {
        // What the collection list is (read as keychaind itself sees the preferences).
        let observer = EmbeddedKeychainService(locations: locations, caller: Caller(accessGroups: []),
                                               asker: Asker(prompter: nil), baseConfiguration: fileConfiguration)
        let server = SecretServiceServer(connection: connection, observer: observer,
                                         publish: { [self] event in publish(event) }) { [self] peer in
            guard let claimed = policy.caller(for: peer) else { return nil }
            let caller = Caller(accessGroups: ["org.freedesktop.secrets", Caller.wildcardGroup], application: claimed.application)
            // Its questions are its prompts' (Unlock, CreateCollection): a call itself never asks.
            return register(EmbeddedKeychainService(locations: locations, caller: caller, asker: Asker(prompter: nil),
                                                    baseConfiguration: fileConfiguration))
        }
        // A bus that goes away (the session ended) leaves no server behind: the next hand-over serves the new one.
        try server.start(replace: replace, onClose: { [self] in
            secretService.withLock { if $0 === server { $0 = nil } }
        })
        secretService.withLock { $0 = server }
    }

    private let secretService = Mutex<SecretServiceServer?>(nil)

    /// A keychaind started for the Secret Service (by D-Bus activation, or systemd for it) found this one serving
    /// the socket: this one takes org.freedesktop.secrets on that bus, so that one process holds the keys and the
    /// name. Only the same program may ask (another program could point keychaind at a bus of its own), and the
    /// bus must be the system's bus daemon (``DBusConnection/isSystemBusDaemon``), which reports callers truly.
    private func takeOverSecretService(for peer: PeerIdentity, busAddress: String, replace: Bool) -> Response {
        let own = PeerIdentity.of(pid: getpid(), uid: geteuid())
        guard let own, peer.foreignCode.isEmpty, peer.executable == own.executable,
              peer.executableDigest == own.executableDigest
        else {
            return .failure(KeychainError(.authFailed, "only keychaind itself may hand over the Secret Service"))
        }
        // One hand-over at a time; a second asker finds the first one's bus served.
        guard takingOverSecretService.withLock({ taking in defer { taking = true }; return !taking }) else {
            return .failure(KeychainError(.notAvailable, "keychaind is taking the Secret Service already"))
        }
        defer { takingOverSecretService.withLock { $0 = false } }
        if secretService.withLock({ $0 != nil }) { return .done }
        do {
            let connection = try DBusConnection(address: busAddress)
            guard let listener = connection.listenerProcess, listener.uid == geteuid() || listener.uid == 0,
                  let executable = PeerIdentity.executable(of: listener.pid),
                  Self.busDaemons.contains(URL(fileURLWithPath: executable).lastPathComponent),
                  ProtectedPath.isProtected(executable)
            else {
                connection.close()
                return .failure(KeychainError(.notAvailable, "the bus at \(busAddress) is not the system's bus daemon"))
            }
            try serveSecretService(on: connection, replace: replace)
            return .done
        } catch {
            return .failure(KeychainError(.notAvailable, "cannot serve the Secret Service: \(error)"))
        }
    }

    /// The programs that may listen on a session bus keychaind is told about: the reference bus, dbus-broker, and
    /// systemd when it opened the socket for either (socket activation of the user's bus).
    static let busDaemons: Set<String> = ["dbus-daemon", "dbus-broker", "dbus-broker-launch", "systemd"]
    private let takingOverSecretService = Mutex(false)

    /// A change to the keychains, from any door: to the socket's event subscribers and the Secret Service's bus.
    private func publish(_ event: KeychainEvent) {
        events.publish(event)
        secretService.withLock { $0 }?.announce(event)
    }

    private func register(_ service: EmbeddedKeychainService) -> EmbeddedKeychainService {
        active.withLock { $0[ObjectIdentifier(service)] = service }
        return service
    }

    private func retire(_ service: EmbeddedKeychainService) {
        endedFiles.withLock { $0.formUnion(service.usedFiles) }
        active.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(service)) }
    }

    private func serve(_ fd: Int32) {
        defer { close(fd) }
        guard let peer = PeerIdentity.of(socket: fd) else { return refuse(fd, "cannot identify the caller") }
        guard peer.uid == geteuid() else { return refuse(fd, "keychaind serves only its own user") }
        guard let claimed = policy.caller(for: peer) else {
            // /proc/PID/exe is unreadable for a process that made itself non-dumpable before connecting.
            return refuse(fd, "cannot identify the caller's program (connect before PR_SET_DUMPABLE 0)")
        }
        // Everything is read with the sender's pid checked against the caller's, counting from here: what was
        // queued before the caller was identified can only be its greeting and session (requests wait for them).
        var stream = ClientStream(fd: fd, peer: peer.pid)
        do {
            guard let hello = try stream.receive(limit: 64) else { return }
            try Framing.checkHello(hello)
        } catch {
            return refuse(fd, error.message)
        }
        guard Framing.send(Framing.hello(), on: fd) else { return }
        // Made at the first request, so that a client that opens its session first (every client of ours does)
        // gets one service, not one before and one after.
        var connectionService: EmbeddedKeychainService?
        defer { if let connectionService { retire(connectionService) } }
        var contexts = ConnectionContexts()
        while true {
            var frame: [UInt8]
            let start = stream.consumed
            do {
                guard let received = try stream.receive(limit: WireLimits.maximumRequest) else { return }
                frame = received
            } catch {
                return  // an oversized or torn frame, or one another process sent, ends this connection only
            }
            let response: Response
            do {
                let request = try Request.decode(frame)
                // A request sent before the caller was identified could have come from a program that then executed
                // another (trusted) one, which the identification saw instead: none is answered.
                if stream.sentBeforeIdentification(start), !request.isSession {
                    return refuse(fd, "a request was sent before the caller was identified")
                }
                // Still the process that was identified (not a reused pid; no other program executed since).
                guard peer.isStillSameProgram() else {
                    return refuse(fd, "the calling process is no longer the program it was identified as")
                }
                // A traced process's memory is its tracer's: nothing is given to it (PR_SET_DUMPABLE 0 of its own
                // can be undone by a tracer attached from its start).
                if let tracer = peer.tracer(), tracer != 0 {
                    response = .failure(KeychainError(
                        .authFailed, "the calling process is being traced (by pid \(tracer)): keychaind answers it nothing"))
                } else {
                    if case .session(let session) = request {
                        // Passwords on the client's own terminal or display; decisions only where the client cannot
                        // answer them itself (finding: a program that names its own pseudo-terminal said yes to
                        // itself).
                        let asker = Asker(prompter: Self.prompter(for: session),
                                          confirmer: Self.confirmer(for: peer, session: session))
                        // Groups bound to other programs are left out until the user says yes (a decision: asked
                        // only where the client cannot answer it).
                        let caller = registry.admit(claimed) { group, members in
                            guard let program = claimed.application?.path else { return .unavailable }
                            let others = members.map(\.path).joined(separator: ", ")
                            return asker.confirm(
                                "\(program) claims the keychain access group \u{201C}\(group)\u{201D}, which holds items of \(others).")
                        }
                        if let connectionService { retire(connectionService) }
                        connectionService = register(EmbeddedKeychainService(
                            locations: locations, caller: caller, asker: asker, baseConfiguration: fileConfiguration))
                        contexts = ConnectionContexts()
                    }
                    // A client that never opened a session: nobody to ask about groups bound to other programs.
                    let service = connectionService ?? register(EmbeddedKeychainService(
                        locations: locations, caller: registry.admit(claimed) { _, _ in .unavailable },
                        asker: Asker(prompter: nil), baseConfiguration: fileConfiguration))
                    connectionService = service
                    if case .subscribe = request { return streamEvents(to: fd) }
                    if case .serveSecretService(let address, let replace) = request {
                        response = takeOverSecretService(for: peer, busAddress: address, replace: replace)
                        _ = Framing.send(response.encode(), on: fd)
                        return
                    }
                    response = RequestDispatcher.handle(contexts.substitute(request), service: service, contexts: contexts)
                    if case .failure = response {} else if let event = RequestDispatcher.event(of: request, service: service,
                                                                                               pid: peer.pid) {
                        publish(event)
                    }
                }
            } catch {
                response = .failure(KeychainError(.param, error.message))
            }
            frame.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } }
            var answer = response.encode()
            let sent = Framing.send(answer, on: fd)
            answer.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } }
            if !sent { return }
        }
    }

    /// A subscribed connection: `done`, then events until the client closes it (it sends nothing more).
    private func streamEvents(to fd: Int32) {
        guard Framing.send(Response.done.encode(), on: fd) else { return }
        events.add(fd)
        defer { events.remove(fd) }
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || stopped.load(ordering: .relaxed) { return }
        }
    }

    /// The daemon's own pinentry (PINENTRY_PROGRAM of the daemon's environment, else `pinentry`), drawn on the
    /// client's terminal or display; nil when the client has neither (calls that need the user then answer
    /// errSecInteractionNotAllowed).
    static func prompter(for session: ClientSession) -> (any Prompter)? {
        guard session.canAsk else { return nil }
        let own = ProcessInfo.processInfo.environment
        var environment = pinentryEnvironment(own)
        for key in ["DISPLAY", "WAYLAND_DISPLAY"] { environment.removeValue(forKey: key) }
        if let display = session.display { environment["DISPLAY"] = display }
        if let wayland = session.waylandDisplay { environment["WAYLAND_DISPLAY"] = wayland }
        if let term = session.term { environment["TERM"] = term }
        return PinentryPrompter(program: pinentryProgram(own),
                                arguments: session.terminal.map { ["--ttyname", $0] } ?? [], environment: environment)
    }

    /// The pinentry keychaind runs: PINENTRY_PROGRAM when only root can change that file (a program of the user
    /// that started keychaind with its own "pinentry" would see every password and answer every question), else
    /// `pinentry` from the system's directories (never from a PATH the starter chose).
    public static func pinentryProgram(_ environment: [String: String]) -> String {
        if let chosen = environment["PINENTRY_PROGRAM"], chosen.hasPrefix("/") {
            // The file itself, not a link to it that its owner could point elsewhere after this check.
            let resolved = URL(fileURLWithPath: chosen).resolvingSymlinksInPath().path
            if ProtectedPath.isProtected(resolved) { return resolved }
        }
        if let chosen = environment["PINENTRY_PROGRAM"] {
            FileHandle.standardError.write(Data(
                "keychaind: PINENTRY_PROGRAM \(chosen) is not used: only a program that root alone can change is\n".utf8))
        }
        return ["/usr/bin/pinentry", "/bin/pinentry"].first { FileManager.default.isExecutableFile(atPath: $0) }
            ?? "/usr/bin/pinentry"
    }

    /// Where keychaind asks for a decision about a client: never a place the client names (it could be a
    /// pseudo-terminal or a display it controls). The session's display as keychaind itself knows it (its own
    /// DISPLAY / WAYLAND_DISPLAY), else the client's controlling terminal when it is a login terminal of this user
    /// (``LoginTerminal``); nil: nobody can be asked, and the call answers errSecInteractionNotAllowed.
    static func confirmer(for peer: PeerIdentity, session: ClientSession) -> (any Prompter)? {
        let own = ProcessInfo.processInfo.environment
        let program = pinentryProgram(own)
        var environment = pinentryEnvironment(own)
        if own["DISPLAY"] != nil || own["WAYLAND_DISPLAY"] != nil {
            return PinentryPrompter(program: program, environment: environment)
        }
        // A login terminal only where the kernel refuses TIOCSTI (a program on that terminal could otherwise type
        // the answer into it).
        guard LoginTerminal.injectionRefused(), let terminal = LoginTerminal.of(pid: peer.pid, user: peer.uid) else { return nil }
        if let term = session.term { environment["TERM"] = term }
        return PinentryPrompter(program: program, arguments: ["--ttyname", terminal], environment: environment)
    }

    /// What keychaind's pinentry gets of keychaind's environment: where to draw (display, Wayland, X authority,
    /// the user's runtime and bus), the locale and a fixed PATH; nothing a starter could use to load code into it
    /// (GTK_MODULES, QT_PLUGIN_PATH, …).
    static func pinentryEnvironment(_ own: [String: String]) -> [String: String] {
        let kept = ["DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "HOME",
                    "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TERM"]
        var environment = own.filter { kept.contains($0.key) }
        environment["PATH"] = "/usr/local/bin:/usr/bin:/bin"
        return environment
    }

    private func refuse(_ fd: Int32, _ reason: String) {
        _ = Framing.send([0] + Array(reason.utf8), on: fd)
    }

    private static func makePrivateDirectory(_ url: URL) throws(StartError) {
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
