import CKeychainLinux
import Foundation
import KeychainInterface
import KeychainStorage
import Logging
import Synchronization
import KeychainThreads

#if canImport(Glibc)
import Glibc
#endif

/// Locking on a schedule, on one thread that sleeps until something is due rather than looking once a second:
///
/// - an idle keychain locks at its deadline (its last use plus `set-keychain-settings -t`), which a use moves later
///   and an unlock or new settings may move sooner (``idleDeadlineMayBeSooner()`` wakes the thread to look again);
/// - the machine woke from suspend, or the wall clock was set: the kernel says so on a timerfd (CLOCK_REALTIME with
///   TFD_TIMER_CANCEL_ON_SET); the two clocks (``SleepDetector``) then tell a suspend from a clock change, and
///   keychains set to lock on sleep lock at once. Where logind runs they locked before the sleep already;
/// - the socket was removed or replaced (inotify on its directory): nobody can reach this daemon any more, so it
///   stops, as gpg-agent does;
/// - connections ended: the memory their threads freed goes back to the system, at most once a second.
///
/// Where the kernel offers none of these descriptors (no timerfd, inotify or eventfd), the thread looks once a second.
final class LockScheduler: Sendable {
    /// What the scheduler works on and reports to.
    struct Host: Sendable {
        /// The keychains open now.
        var keychains: @Sendable () -> [KeychainFile]
        /// `file` locked on its idle timer or for sleep (keychaind announces it).
        var locked: @Sendable (KeychainFile) -> Void
        /// The socket is gone: the daemon stops.
        var socketGone: @Sendable () -> Void
        var logger: Logger
    }

    private let wakeDescriptor: Int32
    private let stopping = Atomic(false)
    private let memoryToReturn = Atomic(false)
    private let running = Atomic(false)
    /// Signalled when the thread has ended (after ``stop()``).
    private let ended = DispatchSemaphore(value: 0)

    init() {
        wakeDescriptor = ckeychain_wake_open()
    }

    deinit {
        if wakeDescriptor >= 0 { close(wakeDescriptor) }
    }

    /// Starts the scheduler's thread; `socket` is watched for removal when `socketAtStart` names what was there.
    func start(_ host: Host, socket: URL, socketAtStart: [UInt64]?) {
        let started = DetachedThread.start(name: "keychaind-lock") { [self] in
            run(host, socket: socket, socketAtStart: socketAtStart)
            ended.signal()
        }
        running.store(started, ordering: .relaxed)
        if !started { host.logger.critical("no thread for locking on time: keychains lock at their next use") }
    }

    /// An unlock, a password change or new settings: some keychain's deadline may now be sooner.
    func idleDeadlineMayBeSooner() { wake() }

    /// A connection ended; once a second at most, what it freed is returned to the system.
    func connectionEnded() {
        if !memoryToReturn.exchange(true, ordering: .relaxed) { wake() }
    }

    /// Ends the thread and waits for it (a look under way finishes first), so that nothing is locked or announced
    /// while the host closes its keychains.
    func stop() {
        stopping.store(true, ordering: .relaxed)
        wake()
        if running.exchange(false, ordering: .relaxed) { _ = ended.wait(timeout: .now() + 5) }
    }

    private func wake() {
        if wakeDescriptor >= 0 { _ = ckeychain_wake(wakeDescriptor) }
    }

    private func run(_ host: Host, socket: URL, socketAtStart: [UInt64]?) {
        var clockChanges = ckeychain_clock_change_open()
        let directory = socketAtStart == nil ? -1 : ckeychain_directory_watch_open(socket.deletingLastPathComponent().path)
        defer {
            if clockChanges >= 0 { close(clockChanges) }
            if directory >= 0 { close(directory) }
        }
        // Without one of the three, a second is the longest wait (as the daemon did before it had them).
        var fallbackMilliseconds: Int32? =
            wakeDescriptor < 0 || clockChanges < 0 || (socketAtStart != nil && directory < 0) ? 1000 : nil
        var sleepDetector = SleepDetector()
        _ = sleepDetector.sleptSinceLastLook()
        var memoryReturned = ContinuousClock.now - .seconds(1)

        while !stopping.load(ordering: .relaxed) {
            if sleepDetector.sleptSinceLastLook() {
                for file in host.keychains() where file.lockForSleep() { host.locked(file) }
            }
            if socketAtStart != nil, KeychainDaemonServer.identity(of: socket.path) != socketAtStart {
                host.logger.notice("\(socket.path) was removed or replaced; stopping")
                host.socketGone()
                return
            }
            var nextDeadline: Date?
            for file in host.keychains() {
                if file.lockIfIdle() {
                    host.locked(file)
                } else if let deadline = file.idleLockDeadline {
                    nextDeadline = min(nextDeadline ?? deadline, deadline)
                }
            }
            var wait: Duration? = nextDeadline.map { .milliseconds(Int64(($0.timeIntervalSinceNow * 1000).rounded(.up)) + 1) }
            if memoryToReturn.load(ordering: .relaxed) {
                let due = memoryReturned + .seconds(1)
                if ContinuousClock.now >= due {
                    memoryToReturn.store(false, ordering: .relaxed)
                    _ = ckeychain_return_free_memory()
                    memoryReturned = .now
                } else {
                    wait = min(wait ?? .seconds(1), due - .now)
                }
            }
            var timeout = wait.map { Int32(clamping: max(0, $0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000)) } ?? -1
            if let fallbackMilliseconds { timeout = timeout < 0 ? fallbackMilliseconds : min(timeout, fallbackMilliseconds) }

            var descriptors = [wakeDescriptor, clockChanges, directory].map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&descriptors, nfds_t(descriptors.count), timeout)
            guard ready > 0 else { continue }  // the timeout, or a signal
            if descriptors[0].revents != 0 { ckeychain_drain(wakeDescriptor) }
            if descriptors[1].revents != 0, ckeychain_clock_change_rearm(clockChanges) < 0 {
                close(clockChanges)  // cannot be armed again: looking once a second instead of spinning on it
                clockChanges = -1
                fallbackMilliseconds = 1000
            }
            if descriptors[2].revents != 0 { ckeychain_drain(directory) }
        }
    }
}
