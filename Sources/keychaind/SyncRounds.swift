import KeychainInterface
import KeychainStorage
import KeychainSync
import ServiceLifecycle
import KeychainThreads

/// Sync's background rounds (docs/SYNC.md) as one of keychaind's services: after changes, and every `interval` for
/// what other devices wrote, until keychaind shuts down; then no round begins and the one under way is waited for,
/// before the server closes the keychains.
struct SyncRounds: Service, CustomStringConvertible {
    let engine: SyncEngine
    let interval: Duration
    let keychains: @Sendable () -> [KeychainFile]

    var description: String { "sync rounds" }

    func run() async throws {
        engine.startBackground(interval: interval, files: keychains)
        try? await gracefulShutdown()  // a shutdown, or the group cancelled: either way the rounds end
        // Waiting for the round under way blocks: on a thread of its own, not on one of Swift's shared ones.
        await withCheckedContinuation { (ended: CheckedContinuation<Void, Never>) in
            let stop: @Sendable () -> Void = { [engine] in
                engine.stopBackground()
                ended.resume()
            }
            if !DetachedThread.start(name: "keychaind-syncstop", stop) { stop() }
        }
    }
}
