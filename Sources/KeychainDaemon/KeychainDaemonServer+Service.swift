import Foundation
import KeychainInterface
import Logging
import ServiceLifecycle

/// keychaind's lifetime under a ServiceGroup: the group starts the server, turns SIGTERM and SIGINT into a graceful
/// shutdown, and ends the services in the reverse order of their start. The server's work stays on its own threads
/// (one per client: a client that stalls holds only its own); `run()` only waits for them.
extension KeychainDaemonServer: Service, CustomStringConvertible {
    public var description: String { "keychaind on \(socket.path)" }

    /// Serves until a graceful shutdown (or a cancellation, or the socket going away), then closes every keychain
    /// after the calls under way have finished (``serveUntilStopped()``).
    public func run() async throws {
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
