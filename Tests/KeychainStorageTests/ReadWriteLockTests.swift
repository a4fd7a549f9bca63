import Foundation
import KeychainThreads
import Synchronization
import Testing

/// The lock every call on a keychain file holds shared and close() holds exclusively (KeychainFile.closed).
@Suite("ReadWriteLock")
struct ReadWriteLockTests {
    /// Waits up to 10 s for `condition`, checking every 10 ms.
    func eventually(_ condition: () -> Bool) -> Bool {
        for _ in 0..<1000 {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }

    @Test("readers hold it at the same time; a writer waits for them, and no reader starts while a writer waits")
    func readersShareWritersExclude() throws {
        let lock = ReadWriteLock(0)
        let inside = Atomic(0)
        let mostInside = Atomic(0)
        let readersInside = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        // Threads of their own (not a dispatch pool, which a loaded machine may not grow in time).
        for _ in 0..<2 {
            Thread {
                lock.withReadLock { _ in
                    let now = inside.add(1, ordering: .sequentiallyConsistent).newValue
                    _ = mostInside.max(now, ordering: .sequentiallyConsistent)
                    readersInside.signal()
                    _ = release.wait(timeout: .now() + 30)
                    inside.subtract(1, ordering: .sequentiallyConsistent)
                }
                finished.signal()
            }.start()
        }
        // Both readers inside at once: the second got in while the first held it.
        #expect(readersInside.wait(timeout: .now() + 10) == .success)
        #expect(readersInside.wait(timeout: .now() + 10) == .success)
        let both = mostInside.load(ordering: .sequentiallyConsistent)
        #expect(both == 2)
        #expect(!lock.readerWouldWait())
        // A writer waits for both; what it saw inside is checked here, on the test's thread.
        let readersLeftForWriter = Atomic(-1)
        let writerDone = Atomic(false)
        Thread {
            lock.withWriteLock { value in
                readersLeftForWriter.store(inside.load(ordering: .sequentiallyConsistent), ordering: .sequentiallyConsistent)
                value = 1
                writerDone.store(true, ordering: .sequentiallyConsistent)
            }
            finished.signal()
        }.start()
        // Once the writer waits, a new reader would wait too (writers are preferred): then the late reader starts.
        #expect(eventually { lock.readerWouldWait() })
        let lateReaderSaw = Atomic(-1)
        Thread {
            lock.withReadLock { value in lateReaderSaw.store(value, ordering: .sequentiallyConsistent) }
            finished.signal()
        }.start()
        usleep(50_000)
        let writerEarly = writerDone.load(ordering: .sequentiallyConsistent)
        #expect(!writerEarly)
        release.signal()
        release.signal()
        for _ in 0..<4 { #expect(finished.wait(timeout: .now() + 10) == .success) }
        let readersLeft = readersLeftForWriter.load(ordering: .sequentiallyConsistent)
        let lateValue = lateReaderSaw.load(ordering: .sequentiallyConsistent)
        #expect(readersLeft == 0)
        #expect(lateValue == 1)
        #expect(lock.withReadLock { $0 } == 1)
    }

    @Test("an error thrown inside releases the lock")
    func throwingReleases() {
        struct Failure: Error {}
        let lock = ReadWriteLock("open")
        #expect(throws: Failure.self) { try lock.withReadLock { (_: String) throws(Failure) in throw Failure() } }
        #expect(!lock.readerWouldWait())
        #expect(throws: Failure.self) { try lock.withWriteLock { (_: inout String) throws(Failure) in throw Failure() } }
        #expect(!lock.readerWouldWait())
        lock.withWriteLock { $0 = "closed" }
        #expect(lock.withReadLock { $0 } == "closed")
    }
}
