import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A stream of keychain events from keychaind (``KeychainService/subscribe(_:)``). It runs until cancelled or until
/// the daemon goes away; its reader thread holds it until then.
public final class EventSubscription: Sendable {
    // SAFETY: shut down (never closed) while the reader may still read it; closed once the reader has finished.
    private let state: Mutex<(fd: Int32, readerDone: Bool, cancelled: Bool)>

    init(fd: Int32) { state = Mutex((fd, false, false)) }

    /// Ends the stream. Events already on their way may still be delivered while it winds down.
    public func cancel() {
        state.withLock { s in
            guard !s.cancelled else { return }
            s.cancelled = true
            _ = shutdown(s.fd, Int32(SHUT_RDWR))
            if s.readerDone { _ = close(s.fd) }
        }
    }

    /// Called by the reader when the stream ends (cancelled, or the daemon went away).
    func finished() {
        state.withLock { s in
            s.readerDone = true
            if s.cancelled { _ = close(s.fd) }
        }
    }

    /// Whether the stream has ended (the daemon stopped, or it was cancelled).
    public var isFinished: Bool { state.withLock { $0.readerDone } }

    deinit {
        // Only once the reader has finished (it holds `self`): close what cancel() did not.
        state.withLock { s in if !s.cancelled { _ = close(s.fd) } }
    }
}
