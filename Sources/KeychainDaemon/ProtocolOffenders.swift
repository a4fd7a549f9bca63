import CKeychainLinux
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Processes whose connections broke the protocol (a bad greeting; an oversized, torn or undecodable frame; a
/// request sent before the caller was identified). Our own clients never do, short of API misuse that trips a
/// decoder limit: they check a request's size before sending it. For a while after each
/// offence, doubling with each one, that process's new connections are turned away with one short frame, right
/// after accept: a client that floods keychaind with bad frames then costs it an accept and a close per
/// connection, not a thread and an identification (reading /proc, hashing nothing new, mapping checks).
///
/// Kept by pid and start time, so that a pid reused by another process inherits nothing; bounded in size.
final class ProtocolOffenders: Sendable {
    struct Offender {
        var startTime: UInt64?
        var offences: Int
        var last: ContinuousClock.Instant
        var until: ContinuousClock.Instant
    }

    static let firstPenalty = Duration.milliseconds(50)
    static let longestPenalty = Duration.seconds(10)
    /// An offender that kept to the protocol this long starts again from the first penalty.
    static let forgiveAfter = Duration.seconds(60)
    static let capacity = 4096

    private let offenders = Mutex<[pid_t: Offender]>([:])

    /// Records one offence of `pid` (at most one per connection: the caller says it once, when the connection ends).
    func record(pid: pid_t, startTime: UInt64?) {
        let now = ContinuousClock.now
        offenders.withLock { offenders in
            var offender = offenders[pid].flatMap { $0.startTime == startTime ? $0 : nil }
                ?? Offender(startTime: startTime, offences: 0, last: now, until: now)
            if now - offender.last > Self.forgiveAfter { offender.offences = 0 }
            offender.offences += 1
            offender.last = now
            let doublings = min(offender.offences - 1, 8)
            offender.until = now + min(Self.firstPenalty * (1 << doublings), Self.longestPenalty)
            offenders[pid] = offender
            if offenders.count > Self.capacity { Self.trim(&offenders, now: now) }
        }
    }

    /// How long `pid`'s new connections are still turned away; nil when they are served. Reads the process's start
    /// time only for a pid on the list (the common case costs one dictionary lookup).
    func penalty(for pid: pid_t) -> Duration? {
        let now = ContinuousClock.now
        guard let offender = offenders.withLock({ $0[pid] }), offender.until > now else { return nil }
        guard PeerIdentity.startTime(of: pid) == offender.startTime else {
            offenders.withLock { _ = $0.removeValue(forKey: pid) }  // another process has that pid now
            return nil
        }
        return offender.until - now
    }

    /// Drops whoever is no longer turned away, then (a list full of live offenders: a fork bomb of them) the
    /// oldest offences.
    private static func trim(_ offenders: inout [pid_t: Offender], now: ContinuousClock.Instant) {
        offenders = offenders.filter { $0.value.until > now }
        if offenders.count > capacity {
            let keep = offenders.sorted { $0.value.last > $1.value.last }.prefix(capacity / 2)
            offenders = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
        }
    }
}
