#if canImport(Glibc)
import Glibc
#endif

/// Notices that the machine was suspended, from the two clocks Linux keeps: CLOCK_BOOTTIME counts the time spent
/// asleep, CLOCK_MONOTONIC does not. When boot time has run ahead of monotonic time by more than `threshold` since
/// the last look, the machine slept in between.
///
/// This needs neither logind nor a bus, so it works in every session (a console, ssh, a container); the price is
/// that it acts on waking, not before sleeping. Where logind runs, keychaind also follows its PrepareForSleep
/// (KeychainDaemonServer.watchForSleep) and locks before the machine sleeps; this stays as the fallback.
struct SleepDetector {
    struct Reading: Equatable {
        var monotonic: Double
        var boottime: Double
    }

    let threshold: Double
    private var last: Reading?

    init(threshold: Double = 2) { self.threshold = threshold }

    /// Takes a reading; true when the machine slept since the previous one.
    mutating func sleptSinceLastLook(_ now: Reading = .now) -> Bool {
        defer { last = now }
        guard let last else { return false }
        let asleep = (now.boottime - last.boottime) - (now.monotonic - last.monotonic)
        return asleep > threshold
    }
}

extension SleepDetector.Reading {
    static var now: Self {
        func seconds(_ clock: clockid_t) -> Double {
            var time = timespec()
            clock_gettime(clock, &time)
            return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
        }
        return Self(monotonic: seconds(CLOCK_MONOTONIC), boottime: seconds(CLOCK_BOOTTIME))
    }
}
