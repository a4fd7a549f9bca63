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

/// keychaind's background rounds: soon after a change to a keychain that syncs (its own writes go up within a
/// second), and on a timer for what other devices wrote. One thread; a round holds no keychain lock while it
/// waits for the network, and a keychain that is locked or does not sync is passed over quietly.
final class SyncScheduler: Sendable {
    private let engine: SyncEngine
    private let interval: Duration
    private let files: @Sendable () -> [KeychainFile]
    private let logger: Logger
    private let wake = DispatchSemaphore(value: 0)
    /// Keychains changed since the last pass (their paths).
    private let changed = Mutex<Set<String>>([])
    private let stopping = Atomic(false)
    /// Wakes the watch when a keychain may have begun to sync (set up, joined, unlocked, changed).
    private let watchWake = DispatchSemaphore(value: 0)
    /// Signalled when the rounds' thread has ended (after ``stop()``).
    private let ended = DispatchSemaphore(value: 0)

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

    /// The server's push: a request that waits (up to 25 s) for the account's next change, then a round. So a change
    /// made on another device arrives here in about a second, without a short timer.
    private func watch() {
        while !stopping.load(ordering: .relaxed) {
            var asked = false
            for file in files() where !stopping.load(ordering: .relaxed) {
                guard let secret = try? file.syncState(), let state = try? SyncState.decode(secret),
                      state.joinCode == nil, let transport = try? SyncTransport(state)
                else { continue }
                asked = true
                let path = "/v1/accounts/\(state.account.hexString)/changes?after=\(state.cursor)&limit=1&wait=25"
                guard let reply = try? transport.send(.GET, path), reply.status == 200,
                      let page = try? SyncTransport.decode(ChangePage.self, reply)
                else {
                    Thread.sleep(forTimeInterval: 5)  // offline or refused: the timer's rounds go on meanwhile
                    continue
                }
                if !page.changes.isEmpty {
                    keychainChanged(at: file.url.path)
                    Thread.sleep(forTimeInterval: 1)  // let the round move the cursor before asking again
                }
            }
            if !asked {
                // No keychain syncs: nothing to watch until one may (no polling meanwhile; the interval bounds a
                // keychain opened without an event).
                let seconds = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
                _ = watchWake.wait(timeout: .now() + seconds)
                while watchWake.wait(timeout: .now()) == .success {}
            }
        }
    }

    func keychainChanged(at path: String) {
        changed.withLock { _ = $0.insert(path) }
        wake.signal()
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
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        _ = ended.wait(timeout: .now() + seconds)
    }

    private func run() {
        defer { ended.signal() }
        let seconds = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
        var retrySoon = false
        while !stopping.load(ordering: .relaxed) {
            // A keychain that was busy last pass is looked at again in half a second, not at the next timer.
            var woken = wake.wait(timeout: .now() + (retrySoon ? 0.5 : seconds)) == .success
            if retrySoon { woken = true }
            if woken {
                // A burst of writes (an import, a restore) makes one round, not one per write.
                Thread.sleep(forTimeInterval: 0.3)
                while wake.wait(timeout: .now()) == .success {}
            }
            let paths = changed.withLock { pending -> Set<String> in
                defer { pending.removeAll() }
                return pending
            }
            for file in files() where (!woken || paths.contains(file.url.path)) && !stopping.load(ordering: .relaxed) {
                syncQuietly(file)
            }
            retrySoon = changed.withLock { !$0.isEmpty }
        }
    }

    private func syncQuietly(_ file: KeychainFile) {
        do throws(KeychainError) {
            guard let secret = try file.syncState(), try SyncState.decode(secret).joinCode == nil else { return }
            guard let report = try engine.roundIfIdle(on: file) else {
                // Another operation on it is under way: what woke this pass may have come after it began, so the
                // keychain is looked at again once that is done.
                changed.withLock { _ = $0.insert(file.url.path) }
                return
            }
            if report.sent + report.received + report.deleted > 0 {
                logger.info("sync.round", metadata: ["sent": "\(report.sent)", "received": "\(report.received)",
                                                     "deleted": "\(report.deleted)"])
            }
        } catch {
            // Locked, offline, a round already running: the next pass tries again. Never a secret in the message.
            logger.debug("sync.round.skipped", metadata: ["status": "\(error.status.rawValue)"])
        }
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
}
