#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A mutex with a condition variable whose timed waits run on the monotonic clock (a change of the wall clock
/// neither shortens nor stretches them). Foundation's `NSCondition` is not in FoundationEssentials, which is all
/// the tools link, so that they start fast.
package final class Condition: @unchecked Sendable {
    // SAFETY: the pthread objects are made once, used only through their own calls, and freed in deinit.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    /// A point on the monotonic clock, for waits that share one deadline across wake-ups.
    package struct Deadline: Sendable {
        fileprivate var time: timespec

        /// `seconds` from now: 0 for a negative or NaN count, at most a day (no wait here is meant to be longer).
        package static func after(seconds: Double) -> Deadline {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let bounded = seconds.isNaN ? 0 : min(max(seconds, 0), 86_400)
            let whole = Int(bounded)
            var nanoseconds = now.tv_nsec + Int((bounded - Double(whole)) * 1e9)
            var secondsPart = now.tv_sec + whole
            if nanoseconds >= 1_000_000_000 {
                nanoseconds -= 1_000_000_000
                secondsPart += 1
            }
            return Deadline(time: timespec(tv_sec: secondsPart, tv_nsec: nanoseconds))
        }
    }

    package init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }
    /// Wakes one waiter; call with the lock held.
    package func signal() { pthread_cond_signal(condition) }
    /// Wakes every waiter; call with the lock held.
    package func broadcast() { pthread_cond_broadcast(condition) }
    /// Waits for a signal (or a spurious wake-up: callers loop on their own condition); call with the lock held.
    package func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits for a signal until `deadline`; false once it has passed. Call with the lock held.
    package func wait(until deadline: Deadline) -> Bool {
        var time = deadline.time
        return pthread_cond_timedwait(condition, mutex, &time) != ETIMEDOUT
    }
}
