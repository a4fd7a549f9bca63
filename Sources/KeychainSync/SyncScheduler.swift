import Dispatch
import Foundation
import KeychainClient
import KeychainCore
import KeychainInterface
import KeychainStorage
import Logging
import KeychainSyncProtocol
import NIOHTTP1
import Synchronization
import KeychainThreads

/// keychaind's background rounds: soon after a change to a keychain that syncs (its own writes go up within a
/// few tens of milliseconds), at once when the server's push tells of another device's change, and on a timer for
/// what the push missed. One thread for rounds and one for the push; a round holds no keychain lock while it waits
/// for the network, and a keychain that is locked or does not sync is passed over quietly.
final class SyncScheduler: Sendable {
    private let engine: SyncEngine
    private let interval: Duration
    private let files: @Sendable () -> [KeychainFile]
    private let logger: Logger
    private let wake = DispatchSemaphore(value: 0)
    /// Keychains changed since the last pass (their paths), and whether a write here is among the changes.
    private let pending = Mutex(Pending())
    private let stopping = Atomic(false)
    /// Wakes the watch when a keychain may have begun to sync (set up, joined, unlocked, changed).
    private let watchWake = DispatchSemaphore(value: 0)
    /// Signalled when the rounds' thread has ended (after ``stop()``).
    private let ended = DispatchSemaphore(value: 0)

    /// Writes that come this soon after one here join its round (an import, a delete and add): fewer rounds, and
    /// what comes during a round makes the next one. A change another device made starts a round at once.
    static let localBatchWindow = 0.05
    /// A keychain another operation held (a sync command) is looked at again this soon.
    static let busyRetry = 0.5
    /// A round that failed (offline, refused, locked) is tried again after this, doubling up to the interval: the
    /// push has told of its change already, and will not tell again.
    static let failedRetry = 1.0
    /// The push waits this long before asking again after two failures in a row (the server is down or refuses).
    static let watchRetry = 5.0

    struct Pending {
        var paths: Set<String> = []
        var local = false
    }

    init(engine: SyncEngine, interval: Duration, files: @escaping @Sendable () -> [KeychainFile], logger: Logger) {
        self.engine = engine
        self.interval = interval
        self.files = files
        self.logger = logger
    }

    func start() {
        _ = DetachedThread.start(name: "keychaind-sync") { [self] in run() }
        _ = DetachedThread.start(name: "keychaind-syncw") { [self] in watch() }
    }

    /// The server's push: a request that waits (up to 25 s) for a change after the newest one this device knows
    /// of, then a round. So a change made on another device arrives here in about a second, without a short timer.
    private func watch() {
        // Per keychain and account: the newest change the push told of. The next request asks only after it, so
        // a change that comes while the round is still taking the last one is told of at once (no pause here).
        var told: [String: Int64] = [:]
        // Keychains whose last request failed. One failure is asked again at once (a pooled connection the server
        // had closed fails once); two in a row wait out the outage, while the timer's rounds go on.
        var failing: Set<String> = []
        while !stopping.load(ordering: .relaxed) {
            var asked = false
            for file in files() where !stopping.load(ordering: .relaxed) {
                guard let secret = try? file.syncState(), let state = try? SyncState.decode(secret),
                      state.joinCode == nil, let transport = try? SyncTransport(state)
                else { continue }
                asked = true
                let key = file.url.path + "#" + state.account.hexString
                let after = max(state.cursor, told[key] ?? 0)
                let path = "/v1/accounts/\(state.account.hexString)/changes?after=\(after)&limit=1&wait=25"
                let reply = try? transport.send(.GET, path)
                if reply?.status == 410 {
                    // The server forgot tombstones after `after`: a round resyncs in full. Told again before a
                    // request succeeded, the watch leaves that round (and its retries) to the run loop, and waits.
                    told[key] = nil
                    if failing.insert(key).inserted {
                        otherDeviceChanged(at: file.url.path)
                        Thread.sleep(forTimeInterval: 1)
                    } else {
                        _ = watchWake.wait(timeout: .now() + Self.watchRetry)
                    }
                    continue
                }
                guard let reply, reply.status == 200, let page = try? SyncTransport.decode(ChangePage.self, reply),
                      page.last >= after
                else {
                    logger.debug("sync.watch.failed", metadata: ["status": "\(reply?.status ?? 0)"])
                    if !failing.insert(key).inserted {
                        while watchWake.wait(timeout: .now()) == .success {}  // earlier writes' signals
                        _ = watchWake.wait(timeout: .now() + Self.watchRetry)  // a write here asks again sooner
                    }
                    continue
                }
                failing.remove(key)
                guard !page.changes.isEmpty else { continue }
                told[key] = page.last
                otherDeviceChanged(at: file.url.path)
                // More than one change waits: the round takes them all in pages. Asking one by one meanwhile
                // would only repeat what it takes.
                if page.more { Thread.sleep(forTimeInterval: 1) }
            }
            if !asked {
                // No keychain syncs: nothing to watch until one may (no polling meanwhile; the interval bounds a
                // keychain opened without an event).
                _ = watchWake.wait(timeout: .now() + Self.seconds(interval))
                while watchWake.wait(timeout: .now()) == .success {}
            }
        }
    }

    /// A write to the keychain at `path` here.
    func keychainChanged(at path: String) {
        pending.withLock {
            $0.paths.insert(path)
            $0.local = true
        }
        wake.signal()
        watchWake.signal()
    }

    /// The server told of another device's change to the account of the keychain at `path`.
    private func otherDeviceChanged(at path: String) {
        pending.withLock { _ = $0.paths.insert(path) }
        wake.signal()
    }

    /// keychaind opened the keychain at `path`: if it syncs, the watch includes it now and a round takes what other
    /// devices wrote meanwhile.
    func keychainOpened(at path: String) {
        otherDeviceChanged(at: path)
        watchWake.signal()
    }

    /// A sync command ran: a keychain may now sync (or no longer).
    func accountsMayHaveChanged() { watchWake.signal() }

    /// No round begins after this; waits (at most `timeout`) for the one under way to end. The watch for other
    /// devices' changes ends with its current request.
    func stop(timeout: Duration = .seconds(10)) {
        stopping.store(true, ordering: .relaxed)
        wake.signal()
        watchWake.signal()
        _ = ended.wait(timeout: .now() + Self.seconds(timeout))
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private func takePending() -> Pending {
        // Signals first, then the set: a change recorded after this take has its signal still to come.
        while wake.wait(timeout: .now()) == .success {}
        return pending.withLock { current in
            defer { current = Pending() }
            return current
        }
    }

    private func run() {
        defer { ended.signal() }
        var nextTimer = DispatchTime.now()  // a first pass at once, over the keychains already open
        var busy: Set<String> = []  // keychains another operation held last pass
        var failed: [String: Retry] = [:]  // keychains whose last round failed
        while !stopping.load(ordering: .relaxed) {
            var deadline = busy.isEmpty ? nextTimer : min(nextTimer, .now() + Self.busyRetry)
            for retry in failed.values { deadline = min(deadline, retry.at) }
            _ = wake.wait(timeout: deadline)
            var due = takePending()
            if due.local {
                Thread.sleep(forTimeInterval: Self.localBatchWindow)
                due.paths.formUnion(takePending().paths)
            }
            let now = DispatchTime.now()
            let everything = now >= nextTimer
            if everything { nextTimer = now + Self.seconds(interval) }
            let paths = due.paths.union(busy).union(failed.filter { $0.value.at <= now }.keys)
            busy = []
            for file in files() where (everything || paths.contains(file.url.path)) && !stopping.load(ordering: .relaxed) {
                let path = file.url.path
                switch syncQuietly(file) {
                case .done: failed[path] = nil
                case .busy: busy.insert(path)
                case .failed:
                    let delay = min((failed[path]?.delay).map { $0 * 2 } ?? Self.failedRetry, Self.seconds(interval))
                    failed[path] = Retry(at: .now() + delay, delay: delay)
                }
            }
            // A keychain no longer open is no longer retried.
            let open = Set(files().map(\.url.path))
            failed = failed.filter { open.contains($0.key) }
        }
    }

    private struct Retry {
        var at: DispatchTime
        var delay: Double
    }

    private enum Outcome { case done, busy, failed }

    /// One round on `file` if it syncs: busy when another operation on it was under way (what woke this pass may
    /// have come after that one began, so the keychain is looked at again soon), failed when the round could not be
    /// made (tried again later: the push does not tell of the same change twice).
    private func syncQuietly(_ file: KeychainFile) -> Outcome {
        // Locked (its unlock starts a round), not syncing, or still joining: nothing to try again.
        guard let secret = try? file.syncState(), let state = try? SyncState.decode(secret), state.joinCode == nil else {
            return .done
        }
        do throws(KeychainError) {
            guard let report = try engine.roundIfIdle(on: file) else { return .busy }
            if report.sent + report.received + report.deleted > 0 {
                logger.info("sync.round", metadata: ["sent": "\(report.sent)", "received": "\(report.received)",
                                                     "deleted": "\(report.deleted)"])
            }
        } catch {
            // Offline, refused, locked meanwhile: tried again soon, then less often. Never a secret in the message.
            logger.debug("sync.round.skipped", metadata: ["status": "\(error.status.rawValue)"])
            return .failed
        }
        return .done
    }
}

extension SyncEngine {
    /// Starts background rounds over `files` (keychaind's open keychains): after changes (``keychainChanged(at:)``)
    /// and every `interval`.
    public func startBackground(interval: Duration, files: @escaping @Sendable () -> [KeychainFile]) {
        let scheduler = SyncScheduler(engine: self, interval: interval, files: files, logger: logger)
        background.withLock { $0 = scheduler }
        scheduler.start()
    }

    /// Ends the background rounds: none begins after this, and the one under way is waited for (keychaind stopping).
    public func stopBackground() {
        background.withLock { $0.take() }?.stop()
    }

    public func keychainChanged(at path: String) {
        background.withLock { $0 }?.keychainChanged(at: path)
    }

    public func keychainOpened(at path: String) {
        background.withLock { $0 }?.keychainOpened(at: path)
    }
}
