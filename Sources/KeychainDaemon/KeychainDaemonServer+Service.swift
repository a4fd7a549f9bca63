import Foundation
import KeychainInterface
import Logging
import ServiceLifecycle
import Synchronization
import KeychainThreads

/// keychaind's lifetime under a ServiceGroup: the group starts the server, turns SIGTERM and SIGINT into a graceful
/// shutdown, and ends the services in the reverse order of their start. The server's work stays on its own threads
/// (one per client: a client that stalls holds only its own); `run()` only waits for them.
extension KeychainDaemonServer: Service, CustomStringConvertible {
    public var description: String { "keychaind on \(socket.path)" }

    /// Serves until a graceful shutdown (or a cancellation, or the socket going away), then closes every keychain
    /// after the calls under way have finished (``serveUntilStopped()``).
    public func run() async throws {
        // A SIGTERM or SIGINT that came before the group was listening for signals (``stopRequestedEarly``): the
        // group's own handling is in place now, so this one is honoured here.
        if Self.stopRequestedEarly.load(ordering: .relaxed) { stop() }
        await withTaskCancellationOrGracefulShutdownHandler {
            await withCheckedContinuation { (served: CheckedContinuation<Void, Never>) in
                let started = DetachedThread.start(name: "keychaind-main") { [self] in
                    serveUntilStopped()
                    served.resume()
                }
                if !started {
                    logger.critical("no thread to serve on")
                    served.resume()
                }
            }
        } onCancelOrGracefulShutdown: { [self] in
            stop()
        }
    }
}

extension KeychainDaemonServer {
    /// Set by keychaind's first signal handlers (``requestStopEarly()``, installed before the socket is bound), for a
    /// SIGTERM or SIGINT that arrives before the ServiceGroup handles signals: without them such a signal would end
    /// keychaind at once, leaving its socket and unfolded WAL behind.
    public static let stopRequestedEarly = Atomic(false)

    /// From a signal handler: only an atomic store, which is async-signal-safe.
    public static func requestStopEarly() { stopRequestedEarly.store(true, ordering: .relaxed) }
}
