import Foundation
import KeychainThreads
import Synchronization
import Testing

/// The lock every call on a keychain file holds shared and close() holds exclusively (KeychainFile.closed).
@Suite("ReadWriteLock")
struct ReadWriteLockTests {
    @Test("readers hold it at the same time; a writer waits for them, and no reader starts while a writer waits")
    func readersShareWritersExclude() throws {
        let lock = ReadWriteLock(0)
        let inside = Atomic(0)
        let mostInside = Atomic(0)
        let readersIn = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let group = DispatchGroup()
        for _ in 0..<2 {
            DispatchQueue.global().async(group: group) {
                lock.withReadLock { _ in
                    let now = inside.add(1, ordering: .sequentiallyConsistent).newValue
                    _ = mostInside.max(now, ordering: .sequentiallyConsistent)
                    readersIn.signal()
                    release.wait()
                    inside.subtract(1, ordering: .sequentiallyConsistent)
                }
            }
        }
        // Both readers inside at once: the second got in while the first held it.
        readersIn.wait()
        #expect(readersIn.wait(timeout: .now() + 10) == .success)
        let both = mostInside.load(ordering: .sequentiallyConsistent)
        #expect(both == 2)
        // A writer now waits for both; a reader that comes after the writer waits for the writer.
        let writerDone = Atomic(false)
        let lateReaderSawWriter = Atomic(false)
        DispatchQueue.global().async(group: group) {
            lock.withWriteLock { value in
                let readersLeft = inside.load(ordering: .sequentiallyConsistent)
                #expect(readersLeft == 0)
                value = 1
                writerDone.store(true, ordering: .sequentiallyConsistent)
            }
        }
        usleep(100_000)  // the writer is queued behind the readers
        DispatchQueue.global().async(group: group) {
            lock.withReadLock { value in lateReaderSawWriter.store(value == 1, ordering: .sequentiallyConsistent) }
        }
        usleep(100_000)
        let writerEarly = writerDone.load(ordering: .sequentiallyConsistent)
        #expect(!writerEarly)
        release.signal()
        release.signal()
        #expect(group.wait(timeout: .now() + 10) == .success)
        let writerRan = writerDone.load(ordering: .sequentiallyConsistent)
        let lateReaderAfterWriter = lateReaderSawWriter.load(ordering: .sequentiallyConsistent)
        #expect(writerRan)
        #expect(lateReaderAfterWriter)
        #expect(lock.withReadLock { $0 } == 1)
    }

    @Test("an error thrown inside releases the lock")
    func throwingReleases() {
        struct Failure: Error {}
        let lock = ReadWriteLock("open")
        #expect(throws: Failure.self) { try lock.withReadLock { (_: String) throws(Failure) in throw Failure() } }
        #expect(throws: Failure.self) { try lock.withWriteLock { (_: inout String) throws(Failure) in throw Failure() } }
        lock.withWriteLock { $0 = "closed" }
        #expect(lock.withReadLock { $0 } == "closed")
    }
}
