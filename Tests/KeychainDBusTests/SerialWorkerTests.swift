import Foundation
import Synchronization
import Testing

@testable import KeychainDBus

@Suite("Serial workers: keychaind's threads for ordered work")
struct SerialWorkerTests {
    @Test("jobs run in the order submitted, one at a time, and the thread ends once there is no more work")
    func orderAndEnd() {
        let worker = SerialWorker(name: "test-worker")
        let seen = Mutex<[Int]>([])
        let running = Atomic(0)
        let overlapped = Atomic(false)
        let done = DispatchSemaphore(value: 0)
        for i in 0..<2_000 {
            worker.submit {
                if running.add(1, ordering: .relaxed).newValue > 1 { overlapped.store(true, ordering: .relaxed) }
                seen.withLock { $0.append(i) }
                running.subtract(1, ordering: .relaxed)
                if i == 1_999 { done.signal() }
            }
        }
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(seen.withLock { $0 } == Array(0..<2_000))
        let didOverlap = overlapped.load(ordering: .relaxed)
        #expect(!didOverlap)
        var idle = false
        for _ in 0..<200 where !idle {
            idle = !worker.isBusy
            if !idle { usleep(5_000) }
        }
        #expect(idle)
        // Idle, it starts again for the next job.
        let again = DispatchSemaphore(value: 0)
        worker.submit { again.signal() }
        #expect(again.wait(timeout: .now() + 10) == .success)
    }

    @Test("without a thread, jobs run inline, or (for a submitter that must never wait) are given up, each told so")
    func noThread() {
        let ran = Mutex<[String]>([])
        let inline = SerialWorker(name: "test-inline", startThread: { _ in false })
        inline.submit({ ran.withLock { $0.append("inline ran") } }, ifNotRun: { ran.withLock { $0.append("inline given up") } })
        let never = SerialWorker(name: "test-never", runsInlineWithoutThread: false, startThread: { _ in false })
        never.submit({ ran.withLock { $0.append("never ran") } }, ifNotRun: { ran.withLock { $0.append("never given up") } })
        #expect(ran.withLock { $0 } == ["inline ran", "never given up"])
        #expect(!inline.isBusy && !never.isBusy)
        // A worker that gave up may start again once threads are to be had.
        let threads = Atomic(false)
        let later = SerialWorker(name: "test-later", linger: 0, runsInlineWithoutThread: false) { body in
            guard threads.load(ordering: .relaxed) else { return false }
            Thread.detachNewThread(body)
            return true
        }
        later.submit({ ran.withLock { $0.append("later ran") } }, ifNotRun: { ran.withLock { $0.append("later given up") } })
        threads.store(true, ordering: .relaxed)
        let done = DispatchSemaphore(value: 0)
        later.submit({ ran.withLock { $0.append("later ran") }; done.signal() })
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(ran.withLock { $0 } == ["inline ran", "never given up", "later given up", "later ran"])
    }

    @Test("a job that blocks holds up only its own worker")
    func blockingJobHoldsOnlyItsWorker() {
        let blocked = SerialWorker(name: "blocked"), other = SerialWorker(name: "other")
        let release = DispatchSemaphore(value: 0), otherRan = DispatchSemaphore(value: 0)
        blocked.submit { release.wait() }
        other.submit { otherRan.signal() }
        #expect(otherRan.wait(timeout: .now() + 10) == .success)
        release.signal()
    }
}
