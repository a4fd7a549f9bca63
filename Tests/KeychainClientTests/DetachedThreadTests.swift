import Foundation
import KeychainInterface
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Threads kept ready for the next work (keychaind starts several per Secret Service client). Each test uses a stack
/// size of its own, so that the other suites' threads in this process are never the ones it sees.
@Suite("DetachedThread: a finished thread waits a while for the next work")
struct DetachedThreadTests {
    /// The kernel's id of the calling thread (/proc/thread-self is PID/task/TID).
    static func currentThreadID() -> pid_t {
        let link = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
        return pid_t(link.split(separator: "/").last.flatMap { Int32($0) } ?? -1)
    }

    /// The kernel's id of the thread that ran the work, once it has run.
    static func threadID(stackSize: Int) throws -> pid_t {
        let ran = DispatchSemaphore(value: 0)
        let id = Mutex<pid_t>(0)
        try #require(DetachedThread.start(name: "kc-test", stackSize: stackSize) {
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
        let first = try Self.threadID(stackSize: size)
        let second = try Self.threadID(stackSize: size)
        #expect(first == second)
        let other = try Self.threadID(stackSize: size + 65_536)
        #expect(other != first)
    }

    @Test("a parked thread ends once no work came for parkTime: an idle process keeps none")
    func parkedThreadEnds() throws {
        let id = try Self.threadID(stackSize: (1 << 20) + 5 * 65_536)
        #expect(FileManager.default.fileExists(atPath: "/proc/self/task/\(id)"))
        usleep(useconds_t(DetachedThread.parkTime) * 1_000_000 + 700_000)
        #expect(!FileManager.default.fileExists(atPath: "/proc/self/task/\(id)"))
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
