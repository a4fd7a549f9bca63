#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A reader-writer lock (POSIX) that prefers writers: many threads hold it shared at once; one holds it exclusively
/// once the shared holders are done, and no new shared holder starts while it waits.
///
/// For a lock held across work that is long next to taking it (a database call): `Synchronization.Mutex` spins on
/// contention and then sleeps on a priority-inheritance futex, whose kernel path costs more than the short sections
/// it is made for; under 64 clients that was about 5% of keychaind's CPU time. Not reentrant: a thread that holds
/// it shared must not take it again (a waiting writer would block it).
package final class ReadWriteLock<Value>: @unchecked Sendable {
    // SAFETY: `value` is read only under the lock (shared) and changed only under it held exclusively; the pthread
    // object is made once, used only through its own calls, and freed in deinit.
    private let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        #if canImport(Glibc)
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        #endif
        pthread_rwlock_init(lock, &attributes)
        pthread_rwlockattr_destroy(&attributes)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    /// Runs `body` with the lock held shared (other readers may run at the same time).
    package func withReadLock<Result, Failure: Error>(_ body: (Value) throws(Failure) -> Result)
        throws(Failure) -> Result
    {
        // EDEADLK (this thread holds it exclusively) or EAGAIN: a body run unlocked would be a silent race.
        let status = pthread_rwlock_rdlock(lock)
        precondition(status == 0, "ReadWriteLock: a shared hold failed (\(status)); it is not reentrant")
        defer { pthread_rwlock_unlock(lock) }
        return try body(value)
    }

    /// Whether a shared hold would wait now (held exclusively, or a writer waits): for tests.
    package func readerWouldWait() -> Bool {
        guard pthread_rwlock_tryrdlock(lock) == 0 else { return true }
        pthread_rwlock_unlock(lock)
        return false
    }

    /// Runs `body` with the lock held exclusively.
    package func withWriteLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result)
        throws(Failure) -> Result
    {
        let status = pthread_rwlock_wrlock(lock)
        precondition(status == 0, "ReadWriteLock: an exclusive hold failed (\(status)); it is not reentrant")
        defer { pthread_rwlock_unlock(lock) }
        return try body(&value)
    }
}
