#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Where a long operation (a backup, a restore) tells how far it got, for a progress line. Whoever shows it binds
/// one for the call: `security` (its terminal line, or keychaind's progress frames arriving), or keychaind's
/// connection, which passes each update to its client as a frame. The work only calls ``update(_:of:)``; updates
/// closer together than ``interval`` are dropped, so reporting every item costs a clock read.
public final class OperationProgress: Sendable {
    @TaskLocal public static var current: OperationProgress?

    public static let interval: Duration = .milliseconds(100)
    private let show: @Sendable (_ done: Int64, _ total: Int64) -> Void
    private let last = Mutex<ContinuousClock.Instant?>(nil)

    public init(_ show: @escaping @Sendable (_ done: Int64, _ total: Int64) -> Void) { self.show = show }

    /// `done` of `total` units (items, bytes); the last update (`done == total`) always passes.
    public func update(_ done: Int64, of total: Int64) {
        let now = ContinuousClock.now
        let due = last.withLock { last in
            if done < total, let previous = last, now - previous < Self.interval { return false }
            last = now
            return true
        }
        if due { show(done, total) }
    }
}
