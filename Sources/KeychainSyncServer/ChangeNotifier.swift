import Foundation
import KeychainSyncProtocol
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Wakes requests that wait for an account's next change (`changes?wait=S`): PostgreSQL's NOTIFY, sent by the
/// transaction that writes (delivered when it commits, to every server instance that listens), reaches the waiters
/// of this instance.
final class ChangeNotifier: Sendable {
    static let channel = "keychain_sync_changes"

    final class Waiter: Sendable {
        private let state = Mutex<(fired: Bool, continuation: CheckedContinuation<Void, Never>?)>((false, nil))

        func fire() {
            let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.fired = true
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume()
        }

        /// Returns once fired, or after `timeout`.
        func wait(timeout: Duration) async {
            let timer = Task {
                try? await Task.sleep(for: timeout)
                self.fire()
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.fired { return true }
                    state.continuation = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
            timer.cancel()
        }
    }

    private let waiters = Mutex<[String: [ObjectIdentifier: Waiter]]>([:])

    /// Registered before the request looks for changes, so a change that commits in between still wakes it.
    func register(_ account: Data) -> Waiter {
        let waiter = Waiter()
        waiters.withLock { $0[account.hexString, default: [:]][ObjectIdentifier(waiter)] = waiter }
        return waiter
    }

    func unregister(_ waiter: Waiter, account: Data) {
        waiters.withLock { all in
            all[account.hexString]?[ObjectIdentifier(waiter)] = nil
            if all[account.hexString]?.isEmpty == true { all[account.hexString] = nil }
        }
    }

    func notify(accountHex: String) {
        let woken = waiters.withLock { $0[accountHex].map { Array($0.values) } ?? [] }
        for waiter in woken { waiter.fire() }
    }
}

/// Holds one connection of the pool that LISTENs for changes, for the server's lifetime (reconnecting after a
/// failure).
struct ChangeListener: Service {
    let client: PostgresClient
    let notifier: ChangeNotifier
    let logger: Logger

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: ChangeNotifier.channel) { notifications in
                        for try await notification in notifications.cancelOnGracefulShutdown() {
                            notifier.notify(accountHex: notification.payload)
                        }
                    }
                }
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { return }
                logger.warning("listening for changes failed; again in 1 s", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }
}
