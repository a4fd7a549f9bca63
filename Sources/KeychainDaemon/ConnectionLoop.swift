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
        /// Held connections with whole frames already read ahead, which epoll cannot report: served next.
        var ready: [Entry] = []
        var members: [Member] = []
        var stopped = false
    }

    /// Threads to keep serving: one per CPU this process may run on.
    let size: Int
    /// How long every thread must have been on its current request before the watch adds one.
    static let stuckAfter: UInt64 = 20_000_000  // 20 ms
    /// The most threads the watch adds on top of the pool (each one a request stuck on something slow).
    static let maximumExtra = 64
    static let stack = 1 << 20

    private let poll: Int32
    /// Readable from stop() on (never read: every thread sees it).
    private let wake: Int32
    /// Readable while `ready` may hold connections (read empty by the thread that wakes for it).
    private let readyWake: Int32
    private let listening: Int32
    private let state = Mutex(State())
    /// `state.members.count` and `state.ready.count`, for looks without the lock.
    private let memberCount = Atomic(0)
    private let readyCount = Atomic(0)
    /// Set by ``stop()``; the threads end once its wake-up reaches them.
    private let stopRequested = Atomic(false)
    private let ended = Condition()
    private let endedFlag = Atomic(false)
    /// The watch sleeps while no thread is busy and the pool is whole; a thread that starts work wakes it.
    private let watchCondition = Condition()
    private let watchAsleep = Atomic(false)

    /// Watches `listening` (made non-blocking here: a thread accepts only when a connection is queued).
    init(listening: Int32) throws(KeychainDaemonServer.StartError) {
        let cpus = ckeychain_cpu_count()
        size = cpus > 0 ? Int(cpus) : 2
        self.listening = listening
        poll = ckeychain_poll_open()
        wake = ckeychain_wake_open()
        readyWake = ckeychain_wake_open()
        guard poll >= 0, wake >= 0, readyWake >= 0 else { throw .failed("cannot make an epoll set (errno \(errno))") }
        _ = fcntl(listening, F_SETFL, fcntl(listening, F_GETFL) | O_NONBLOCK)
        guard ckeychain_poll_add(poll, wake, 0) == 0, ckeychain_poll_add(poll, readyWake, 0) == 0,
            ckeychain_poll_add(poll, listening, 1) == 0
        else { throw .failed("cannot watch the socket (errno \(errno))") }
    }

    deinit {
        close(poll)
        close(wake)
        close(readyWake)
    }

    /// Serves until ``stop()`` (or the listening socket is shut down), then ends the pool and closes every connection
    /// that no thread has.
    func run(host: some ConnectionHost) {
        let threads = state.withLock { state in
            state.members = (0..<size).map { _ in Member(loop: self, host: host) }
            memberCount.store(state.members.count, ordering: .relaxed)
            return state.members
        }
        for member in threads.dropFirst() { start(member) }
        _ = DetachedThread.start(name: "keychaind-watch", parks: false) { [self] in watch(host: host) }
        work(as: threads[0])  // this thread is one of the pool
        ended.lock()
        while !endedFlag.load(ordering: .relaxed) { ended.wait() }
        ended.unlock()
        let idle = state.withLock { state -> [Entry] in
            state.stopped = true
            let idle = state.connections.values.filter { !$0.held } + state.ready
            for entry in idle { state.connections[entry.connection.fd] = nil }
            state.ready = []
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
            defer { loop.memberCount.store(state.members.count, ordering: .relaxed) }
            guard !state.stopped, state.members.count < loop.size else { return nil }
            let next = Member(loop: loop, host: member.host)
            state.members.append(next)
            return next
        }
        if let replacement { loop.start(replacement) }
    }

    /// Starts `member`'s thread; a thread that cannot be made leaves the pool short, which the watch tops up.
    private func start(_ member: Member) {
        let started = DetachedThread.start(name: "keychaind", stackSize: Self.stack, parks: false) {
            member.loop.work(as: member)
        }
        if !started { leave(member) }
    }

    private func leave(_ member: Member) {
        state.withLock { state in
            state.members.removeAll { $0 === member }
            memberCount.store(state.members.count, ordering: .relaxed)
        }
    }

    private func work(as member: Member) {
        Self.$member.withValue(member) {
            // Connections with frames read ahead and those epoll reports take turns, so neither kind starves.
            var readyFirst = true
            while !stopRequested.load(ordering: .relaxed) {
                let anyReady = readyCount.load(ordering: .relaxed) > 0
                if anyReady && readyFirst, let entry = nextReady() {
                    readyFirst = false
                    busy(member)
                    settle(entry, entry.connection.serveAvailable())
                } else {
                    readyFirst = true
                    let fd = ckeychain_poll_next(poll, anyReady ? 0 : -1)
                    if fd < 0 {
                        if errno == EINTR || errno == EAGAIN { continue }
                        stop()  // the epoll set is unusable: nothing more can be served
                        break
                    }
                    if fd == wake { break }
                    if fd == readyWake {
                        ckeychain_drain(readyWake)
                        continue
                    }
                    busy(member)
                    if fd == listening { acceptOne(host: member.host) } else { serve(fd) }
                }
                let began = member.busySince.exchange(0, ordering: .relaxed)
                guard stays(member, busyFor: Self.now() &- began) else { return }
            }
            // Stopping: the first thread out tells run() (the listening socket takes no more connections).
            leave(member)
            ended.lock()
            endedFlag.store(true, ordering: .relaxed)
            ended.broadcast()
            ended.unlock()
        }
    }

    /// Marks `member` busy from now on, and wakes the watch if it sleeps.
    private func busy(_ member: Member) {
        member.busySince.store(Self.now(), ordering: .sequentiallyConsistent)
        if watchAsleep.load(ordering: .sequentiallyConsistent) { wakeWatch() }
    }

    private func wakeWatch() {
        watchCondition.lock()
        watchAsleep.store(false, ordering: .sequentiallyConsistent)
        watchCondition.signal()
        watchCondition.unlock()
    }

    /// Whether `member` goes on after its work: one that left the pool comes back if the pool is short; one that was
    /// stuck ends if the watch has added threads since (the pool is over its size).
    private func stays(_ member: Member, busyFor elapsed: UInt64) -> Bool {
        if member.inPool.load(ordering: .relaxed) {
            guard elapsed >= Self.stuckAfter, memberCount.load(ordering: .relaxed) > size else { return true }
            return state.withLock { state in
                guard state.members.count > size else { return true }
                state.members.removeAll { $0 === member }
                memberCount.store(state.members.count, ordering: .relaxed)
                return false
            }
        }
        return state.withLock { state in
            guard !state.stopped, state.members.count < size else { return false }
            member.inPool.store(true, ordering: .relaxed)
            state.members.append(member)
            memberCount.store(state.members.count, ordering: .relaxed)
            return true
        }
    }

    /// Every few milliseconds while a thread is busy: when every thread of the pool has been on its current request
    /// for ``stuckAfter``, one more is started; a pool short of its size (a thread that could not be made) is
    /// topped up. Sleeps while no thread is busy and the pool is whole.
    private func watch(host: any ConnectionHost) {
        while !stopRequested.load(ordering: .relaxed) {
            let (since, short) = busyTimes()
            let now = Self.now()  // after the looks: a thread that became busy since is not counted as stuck
            let stuck = !since.isEmpty && since.allSatisfy { $0 != 0 && now &- min($0, now) >= Self.stuckAfter }
            if short || stuck {
                let added = state.withLock { state -> Member? in
                    guard !state.stopped, state.members.count < size + Self.maximumExtra else { return nil }
                    let next = Member(loop: self, host: host)
                    state.members.append(next)
                    memberCount.store(state.members.count, ordering: .relaxed)
                    return next
                }
                if let added { start(added) }
            } else if since.allSatisfy({ $0 == 0 }) {
                watchCondition.lock()
                watchAsleep.store(true, ordering: .sequentiallyConsistent)
                // Looked at again after saying so: a thread that became busy before it could see the flag is seen.
                let (again, shortNow) = busyTimes()
                if again.allSatisfy({ $0 == 0 }) && !shortNow && !stopRequested.load(ordering: .relaxed) {
                    watchCondition.wait()
                }
                watchAsleep.store(false, ordering: .sequentiallyConsistent)
                watchCondition.unlock()
                continue
            }
            usleep(5_000)
        }
    }

    /// When each thread of the pool began its current work (0: waiting), and whether the pool is short of its size.
    private func busyTimes() -> ([UInt64], Bool) {
        state.withLock { state in
            (state.members.map { $0.busySince.load(ordering: .sequentiallyConsistent) },
             !state.stopped && state.members.count < size)
        }
    }

    // MARK: - Connections

    private func acceptOne(host: any ConnectionHost) {
        let client = ckeychain_accept_cloexec(listening)
        if client < 0 {
            switch errno {
            case EAGAIN, EWOULDBLOCK, EINTR, ECONNABORTED, EPROTO:
                armListening()
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                // Out of descriptors or memory: a resource error, never a reason to stop serving. The connection
                // stays queued; wait for some to close and try again (off the pool meanwhile).
                Self.willWait()
                usleep(50_000)
                armListening()
            default:
                stop()  // the listening socket was shut down, or is gone
            }
            return
        }
        // Armed again at once, so that another thread accepts the next connection while this one identifies.
        armListening()
        guard let connection = host.admit(client) else { return }
        let entry = Entry(connection)
        state.withLock { $0.connections[client] = entry }
        // Its greeting has usually arrived by now: served here, then left to the set.
        settle(entry, connection.serveAvailable())
    }

    /// Arms the listening socket for its next connection; a failure (out of kernel memory) is tried again, off the
    /// pool, until it works or keychaind stops.
    private func armListening() {
        while ckeychain_poll_rearm(poll, listening) != 0 && !stopRequested.load(ordering: .relaxed) {
            Self.willWait()
            usleep(50_000)
        }
    }

    private func serve(_ fd: Int32) {
        let entry = state.withLock { state -> Entry? in
            guard let entry = state.connections[fd], !entry.held else { return nil }
            entry.held = true
            return entry
        }
        guard let entry else { return }
        settle(entry, entry.connection.serveAvailable())
    }

    /// The next held connection with frames read ahead, if any.
    private func nextReady() -> Entry? {
        state.withLock { state in
            guard !state.ready.isEmpty else { return nil }
            let entry = state.ready.removeFirst()
            readyCount.store(state.ready.count, ordering: .relaxed)
            return entry
        }
    }

    /// After a thread served `entry`: armed for its next report, queued for another turn, or (ended, stopping, or
    /// not armable) taken out and closed.
    private func settle(_ entry: Entry, _ next: DaemonConnection.Next) {
        let fd = entry.connection.fd
        let closing = state.withLock { state -> Bool in
            guard next != .end, !state.stopped else {
                state.connections[fd] = nil
                return true
            }
            if next == .turn {
                state.ready.append(entry)
                readyCount.store(state.ready.count, ordering: .relaxed)
                _ = ckeychain_wake(readyWake)
                return false
            }
            let armed = entry.registered ? ckeychain_poll_rearm(poll, fd) : ckeychain_poll_add(poll, fd, 1)
            guard armed == 0 else {
                state.connections[fd] = nil
                return true
            }
            entry.registered = true
            entry.held = false
            return false
        }
        if closing { entry.connection.close() }
    }

    private static func now() -> UInt64 { ckeychain_monotonic_nanoseconds() }
}
