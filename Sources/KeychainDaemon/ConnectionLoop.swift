import CKeychainLinux
import KeychainThreads
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What the connection loop needs of the server: a new connection identified (or refused and closed).
protocol ConnectionHost: Sendable {
    /// The connection on `fd`, just accepted: identified and ready to serve, or refused and closed (nil).
    func admit(_ fd: Int32) -> DaemonConnection?
}

/// Every connection of one keychaind, served by as many threads as there are CPUs rather than a thread each.
///
/// One epoll set holds the listening socket and every connection, each armed for one report at a time
/// (EPOLLONESHOT), so one thread at a time has a given connection and its requests run in order. Under load a
/// thread that finishes a request finds the next connection already waiting, without sleeping or waking anyone:
/// with a thread per connection, every request woke a thread of its own, and 64 of them queued at the keychain's
/// one SQLite connection, where each hand-off was another wake-up (docs/PERFORMANCE.md).
///
/// Nothing a client controls may hold one of these threads: a thread that is about to wait for a person (a
/// question), for a client that does not read, or on long work (a restore, a password's key derivation) leaves the
/// pool first (``willWait()``) and another takes its place; it comes back, or ends, when that work is done. A watch
/// adds a thread when every thread has been busy on one request for longer than ``stuckAfter`` (a wait nobody
/// foresaw: a keychain's lock held by another's long write), so a stall is short however it comes.
final class ConnectionLoop: Sendable {
    /// A thread of the pool.
    final class Member: Sendable {
        let loop: ConnectionLoop
        let host: any ConnectionHost
        /// When its current work began (monotonic nanoseconds); 0 while it waits for work.
        let busySince = Atomic<UInt64>(0)
        /// False once it left the pool for a wait (``willWait()``), until it comes back.
        let inPool = Atomic(true)
        init(loop: ConnectionLoop, host: any ConnectionHost) {
            self.loop = loop
            self.host = host
        }
    }

    /// A registered connection and whether a thread has it now (changed only with `state` locked).
    private final class Entry: @unchecked Sendable {
        // SAFETY: `held` and `registered` are read and written only with the loop's `state` locked; the
        // connection is used by the one thread that set `held`.
        let connection: DaemonConnection
        var held = true
        var registered = false
        init(_ connection: DaemonConnection) { self.connection = connection }
    }

    private struct State {
        var connections: [Int32: Entry] = [:]
        var members: [Member] = []
        /// Threads the watch added beyond the pool's size; the stuck ones end when their work ends.
        var extra = 0
        var stopped = false
    }

    /// Threads to keep serving: one per CPU this process may run on.
    let size: Int
    /// How long every thread must have been on its current request before the watch adds one.
    static let stuckAfter: UInt64 = 20_000_000  // 20 ms
    /// The most threads the watch adds on top of the pool (each one a request stuck on something slow).
    static let maximumExtra = 64

    private let poll: Int32
    private let wake: Int32
    private let listening: Int32
    private let state = Mutex(State())
    /// Set by ``stop()``; the workers end, once its wake-up reaches them.
    private let stopRequested = Atomic(false)
    private let listeningEnded = Condition()
    private let ended = Atomic(false)
    /// The watch sleeps while no thread is busy; a thread that starts work wakes it (``busy(_:)``).
    private let watchCondition = Condition()
    private let watchAsleep = Atomic(false)
    private let extraCount = Atomic(0)

    /// Watches `listening` (made non-blocking here: a thread only accepts when a connection is queued).
    init(listening: Int32) throws(KeychainDaemonServer.StartError) {
        let cpus = ckeychain_cpu_count()
        size = cpus > 0 ? Int(cpus) : 2
        self.listening = listening
        poll = ckeychain_poll_open()
        wake = ckeychain_wake_open()
        guard poll >= 0, wake >= 0 else { throw .failed("cannot make an epoll set (errno \(errno))") }
        _ = fcntl(listening, F_SETFL, fcntl(listening, F_GETFL) | O_NONBLOCK)
        // The wake-up is level-triggered and never read: once stop() writes it, every thread sees it.
        guard ckeychain_poll_add(poll, wake, 0) == 0, ckeychain_poll_add(poll, listening, 1) == 0 else {
            throw .failed("cannot watch the socket (errno \(errno))")
        }
    }

    deinit {
        close(poll)
        close(wake)
    }

    /// Serves until ``stop()`` (or the listening socket is shut down), then ends the pool and closes every connection
    /// that no thread has; a request under way finishes first.
    func run(host: some ConnectionHost) {
        let threads = state.withLock { state in
            state.members = (0..<size).map { _ in Member(loop: self, host: host) }
            return state.members
        }
        for member in threads.dropFirst() where !DetachedThread.start(name: "keychaind", stackSize: Self.stack, parks: false, {
            member.loop.work(as: member)
        }) {
            state.withLock { $0.members.removeAll { $0 === member } }
        }
        _ = DetachedThread.start(name: "keychaind-watch", parks: false) { [self] in watch(host: host) }
        work(as: threads[0])  // this thread is one of the pool
        listeningEnded.lock()
        while !ended.load(ordering: .relaxed) { listeningEnded.wait() }
        listeningEnded.unlock()
        let idle = state.withLock { state -> [Entry] in
            state.stopped = true
            let idle = state.connections.values.filter { !$0.held }
            for entry in idle { state.connections[entry.connection.fd] = nil }
            return idle
        }
        for entry in idle { entry.connection.close() }
        watchCondition.lock()
        watchCondition.signal()
        watchCondition.unlock()
    }

    /// Ends serving: the listening socket is shut down and every thread wakes to end.
    func stop() {
        stopRequested.store(true, ordering: .sequentiallyConsistent)
        _ = shutdown(listening, Int32(SHUT_RDWR))
        _ = ckeychain_wake(wake)
    }

    static let stack = 1 << 20

    // MARK: - The pool's threads

    @TaskLocal static var member: Member?

    /// The calling thread is about to wait on what keychaind does not control (a person, a client that does not
    /// read, long work): it leaves the pool for the rest of its current work and another thread takes its place.
    /// Does nothing on a thread that is not the pool's, or that already left.
    static func willWait() {
        guard let member, member.inPool.exchange(false, ordering: .relaxed) else { return }
        let loop = member.loop
        let replacement = loop.state.withLock { state -> Member? in
            state.members.removeAll { $0 === member }
            guard !state.stopped, state.members.count < loop.size else { return nil }
            let next = Member(loop: loop, host: member.host)
            state.members.append(next)
            return next
        }
        if let replacement { loop.start(replacement) }
    }

    private func start(_ member: Member) {
        let started = DetachedThread.start(name: "keychaind", stackSize: Self.stack, parks: false) {
            member.loop.work(as: member)
        }
        if !started { state.withLock { $0.members.removeAll { $0 === member } } }
    }

    private func work(as member: Member) {
        Self.$member.withValue(member) {
            while !stopRequested.load(ordering: .relaxed) {
                let fd = ckeychain_poll_next(poll)
                if fd < 0 {
                    if errno == EINTR { continue }
                    break
                }
                if fd == wake { break }
                busy(member)
                if fd == listening { acceptOne(host: member.host) } else { serve(fd) }
                let began = member.busySince.exchange(0, ordering: .relaxed)
                guard stays(member, busyFor: Self.now() &- began) else { return }
            }
            // Stopping: the first thread out tells run() (the listening socket takes no more connections).
            state.withLock { $0.members.removeAll { $0 === member } }
            listeningEnded.lock()
            ended.store(true, ordering: .relaxed)
            listeningEnded.broadcast()
            listeningEnded.unlock()
        }
    }

    /// Marks `member` busy from now on, and wakes the watch if it sleeps.
    private func busy(_ member: Member) {
        member.busySince.store(Self.now(), ordering: .sequentiallyConsistent)
        if watchAsleep.load(ordering: .sequentiallyConsistent) {
            watchCondition.lock()
            watchAsleep.store(false, ordering: .sequentiallyConsistent)
            watchCondition.signal()
            watchCondition.unlock()
        }
    }

    /// Whether `member` goes on after its work: one that left the pool comes back if a place is free; one of
    /// those the watch found stuck ends when the watch has added threads in their place.
    private func stays(_ member: Member, busyFor elapsed: UInt64) -> Bool {
        if member.inPool.load(ordering: .relaxed) {
            guard extraCount.load(ordering: .relaxed) > 0, elapsed >= Self.stuckAfter else { return true }
            return state.withLock { state in
                guard state.extra > 0 else { return true }
                state.extra -= 1
                extraCount.store(state.extra, ordering: .relaxed)
                state.members.removeAll { $0 === member }
                return false
            }
        }
        return state.withLock { state in
            guard !state.stopped, state.members.count < size else { return false }
            member.inPool.store(true, ordering: .relaxed)
            state.members.append(member)
            return true
        }
    }

    /// Every few milliseconds while a thread is busy: when every thread of the pool has been on its current request
    /// for ``stuckAfter``, one more is started. Sleeps while none is busy.
    private func watch(host: any ConnectionHost) {
        while !stopRequested.load(ordering: .relaxed) {
            let members = state.withLock { $0.members }
            let now = Self.now()
            let since = members.map { $0.busySince.load(ordering: .sequentiallyConsistent) }
            if since.allSatisfy({ $0 == 0 }) {
                watchCondition.lock()
                watchAsleep.store(true, ordering: .sequentiallyConsistent)
                // Looked at again after saying so: a thread that became busy before it could see the flag is seen.
                let anyBusy = members.contains { $0.busySince.load(ordering: .sequentiallyConsistent) != 0 }
                if !anyBusy && !stopRequested.load(ordering: .relaxed) { watchCondition.wait() }
                watchAsleep.store(false, ordering: .sequentiallyConsistent)
                watchCondition.unlock()
                continue
            }
            if !members.isEmpty, since.allSatisfy({ $0 != 0 && now &- $0 >= Self.stuckAfter }) {
                let added = state.withLock { state -> Member? in
                    guard !state.stopped, state.extra < Self.maximumExtra else { return nil }
                    state.extra += 1
                    extraCount.store(state.extra, ordering: .relaxed)
                    let next = Member(loop: self, host: host)
                    state.members.append(next)
                    return next
                }
                if let added { start(added) }
            }
            usleep(5_000)
        }
    }

    // MARK: - Connections

    private func acceptOne(host: any ConnectionHost) {
        let client = ckeychain_accept_cloexec(listening)
        if client < 0 {
            switch errno {
            case EAGAIN, EWOULDBLOCK, EINTR, ECONNABORTED, EPROTO:
                _ = ckeychain_poll_rearm(poll, listening)
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                // Out of descriptors or memory: a resource error, never a reason to stop serving. The connection
                // stays queued; wait for some to close and try again (on a thread out of the pool meanwhile).
                Self.willWait()
                usleep(50_000)
                _ = ckeychain_poll_rearm(poll, listening)
            default:
                stop()  // the listening socket was shut down, or is gone
            }
            return
        }
        // Armed again at once, so that another thread accepts the next connection while this one identifies.
        _ = ckeychain_poll_rearm(poll, listening)
        guard let connection = host.admit(client) else { return }
        let entry = Entry(connection)
        state.withLock { $0.connections[client] = entry }
        // Its greeting has usually arrived by now: served here, then left to the set.
        settle(entry, keep: connection.serveAvailable())
    }

    private func serve(_ fd: Int32) {
        let entry = state.withLock { state -> Entry? in
            guard let entry = state.connections[fd], !entry.held else { return nil }
            entry.held = true
            return entry
        }
        guard let entry else { return }
        settle(entry, keep: entry.connection.serveAvailable())
    }

    /// After a thread served `entry`: armed for its next report, or (ended, or stopping) taken out and closed.
    private func settle(_ entry: Entry, keep: Bool) {
        let fd = entry.connection.fd
        let closing = state.withLock { state -> Bool in
            if keep && !state.stopped {
                let armed = entry.registered ? ckeychain_poll_rearm(poll, fd) : ckeychain_poll_add(poll, fd, 1)
                if armed == 0 {
                    entry.registered = true
                    entry.held = false
                    return false
                }
            }
            state.connections[fd] = nil
            return true
        }
        if closing { entry.connection.close() }
    }

    private static func now() -> UInt64 { ckeychain_monotonic_nanoseconds() }
}
