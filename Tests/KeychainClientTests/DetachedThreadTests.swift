import Foundation
import KeychainInterface
import Synchronization
import Testing
import KeychainThreads

#if canImport(Glibc)
import Glibc
#endif

/// Threads kept ready for the next work (keychaind starts several per Secret Service client). Each test uses a stack
/// size of its own, so that the other suites' threads in this process are never the ones it sees; one test at a
/// time, each starting once no thread waits (at most ``DetachedThread/maxParked`` do, whatever their stack size).
@Suite("DetachedThread: a finished thread waits a while for the next work", .serialized)
struct DetachedThreadTests {
    /// The kernel's id of the calling thread (/proc/thread-self is PID/task/TID).
    static func currentThreadID() -> pid_t {
        let link = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
        return pid_t(link.split(separator: "/").last.flatMap { Int32($0) } ?? -1)
    }

    /// Waits until no thread is parked (another test's have ended), so that the next one can be.
    static func noneParked() {
        for _ in 0..<(DetachedThread.parkTime * 10 + 100) where DetachedThread.parkedCount > 0 { usleep(100_000) }
    }

    /// The kernel's id of the thread that ran the work, once it has run.
    static func threadID(stackSize: Int, parks: Bool = true) throws -> pid_t {
        let ran = DispatchSemaphore(value: 0)
        let id = Mutex<pid_t>(0)
        try #require(DetachedThread.start(name: "kc-test", stackSize: stackSize, parks: parks) {
            id.withLock { $0 = Self.currentThreadID() }
            ran.signal()
        })
        #expect(ran.wait(timeout: .now() + 10) == .success)
        usleep(20_000)  // the thread parks after its work
        return id.withLock { $0 }
    }

    @Test("the next work of the same stack size runs on the thread that finished; another size gets a thread of its own")
    func reusesParkedThread() throws {
        let size = (1 << 20) + 3 * 65_536
        // A loaded machine may let the parked thread's second pass between two works: one reuse in five pairs is the
        // proof (before threads were kept, no pair ever shared one).
        var reused = false
        for _ in 0..<5 where !reused {
            Self.noneParked()
            let first = try Self.threadID(stackSize: size)
            reused = try Self.threadID(stackSize: size) == first
        }
        #expect(reused)
        let first = try Self.threadID(stackSize: size)
        let other = try Self.threadID(stackSize: size + 65_536)
        #expect(other != first)
    }

    @Test("a parked thread ends once no work came for parkTime: an idle process keeps none")
    func parkedThreadEnds() throws {
        Self.noneParked()
        let id = try Self.threadID(stackSize: (1 << 20) + 5 * 65_536)
        var waited = DetachedThread.parkedCount >= 1
        for _ in 0..<500 where !waited {
            usleep(10_000)
            waited = DetachedThread.parkedCount >= 1
        }
        #expect(waited, "the thread did not wait for more work")
        var gone = false
        for _ in 0..<(DetachedThread.parkTime * 10 + 100) where !gone {
            usleep(100_000)
            gone = !FileManager.default.fileExists(atPath: "/proc/self/task/\(id)")
        }
        #expect(gone, "thread \(id) still there \(DetachedThread.parkTime + 10) s after its work")
    }

    @Test("a thread started with parks: false ends with its work (as Foundation's Thread did for the D-Bus workers)")
    func unparkedThreadEnds() throws {
        Self.noneParked()
        let id = try Self.threadID(stackSize: (1 << 20) + 9 * 65_536, parks: false)
        var gone = false
        // Well within parkTime (1 s): a parked thread would still be there.
        for _ in 0..<50 where !gone {
            usleep(10_000)
            gone = !FileManager.default.fileExists(atPath: "/proc/self/task/\(id)")
        }
        #expect(gone, "thread \(id) still there 0.5 s after its work")
    }

    @Test("many works at once, each waiting for all the others: every one gets a thread")
    func manyAtOnce() throws {
        let count = 3 * DetachedThread.maxParked
        let started = Mutex(0)
        let allStarted = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        for _ in 0..<count {
            try #require(DetachedThread.start(name: "kc-test", stackSize: (1 << 20) + 7 * 65_536) {
                if started.withLock({ $0 += 1; return $0 }) == count { allStarted.signal() }
                _ = allStarted.wait(timeout: .now() + 10)
                allStarted.signal()
                finished.signal()
            })
        }
        for _ in 0..<count { #expect(finished.wait(timeout: .now() + 20) == .success) }
    }
}
