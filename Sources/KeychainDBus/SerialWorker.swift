import KeychainThreads

/// Work run in the order it was submitted, on a plain thread that exists only while there is work: keychaind's one
/// model of concurrency (threads, never a shared pool), also for what arrives on a D-Bus connection.
///
/// The thread is made by the first submission that finds the worker idle, and ends once no job has come for
/// ``linger`` (a client's next call usually comes within a round trip: one thread per burst, not per call). So a
/// thousand short-lived clients (a secret-tool per lookup) leave no thread behind, and a job that blocks (on the bus,
/// a file lock, the disk, a question to the user) holds up only the jobs behind it on this worker.
package final class SerialWorker: @unchecked Sendable {
    // SAFETY: `jobs` and `running` are only read and written under `condition`.
    private let condition = Condition()
    private var jobs: [Job] = []
    private var running = false
    private let name: String
    private let linger: Double
    private let runsInlineWithoutThread: Bool
    private let startThread: (@escaping @Sendable () -> Void) -> Bool

    private struct Job {
        let run: @Sendable () -> Void
        let giveUp: (@Sendable () -> Void)?
    }
    /// How long an idle thread waits for more work before it ends, by default.
    package static let linger: Double = 0.25  // seconds

    /// `startThread` runs its closure on a thread of its own (false when it cannot); by default a new detached
    /// thread with 1 MiB of stack that ends with the work (it lingers here instead). A caller that has threads kept
    /// ready (keychaind's parked ``DetachedThread``s) passes a `linger` of 0 and its own starter: the thread goes back
    /// at once instead of waiting here.
    ///
    /// When no thread can be made, the jobs run on the submitting thread, unless `runsInlineWithoutThread` is false
    /// (a submitter that must never wait: the thread that reads a bus connection's replies): then every job queued
    /// is given up instead, each told so through its `ifNotRun`.
    package init(name: String, linger: Double = SerialWorker.linger, runsInlineWithoutThread: Bool = true,
                 startThread: ((@escaping @Sendable () -> Void) -> Bool)? = nil)
    {
        self.name = name
        self.linger = linger
        self.runsInlineWithoutThread = runsInlineWithoutThread
        self.startThread = startThread ?? { body in
            DetachedThread.start(name: name, stackSize: 1 << 20, parks: false, body)
        }
    }

    /// Runs `work` after every job submitted before it; or, when it cannot be run (no thread, on a worker that does
    /// not run jobs inline), `ifNotRun` instead.
    package func submit(_ work: @escaping @Sendable () -> Void, ifNotRun: (@Sendable () -> Void)? = nil) {
        condition.lock()
        jobs.append(Job(run: work, giveUp: ifNotRun))
        let needsThread = !running
        running = true
        condition.signal()
        condition.unlock()
        guard needsThread else { return }
        if startThread({ [self] in drain() }) { return }
        if runsInlineWithoutThread { drain(); return }
        condition.lock()
        let givenUp = jobs
        jobs = []
        running = false
        condition.unlock()
        for job in givenUp { job.giveUp?() }
    }

    /// Whether a thread is running (working, or waiting for more work).
    package var isBusy: Bool {
        condition.lock()
        defer { condition.unlock() }
        return running
    }

    private func drain() {
        condition.lock()
        while true {
            if jobs.isEmpty {
                // Idle: a little while for the next job, then the thread ends. With no while at all, no wait: a
                // wait whose deadline has passed still puts the thread to sleep and wakes it, a pair of context
                // switches for each call of a Secret Service client.
                if linger > 0 {
                    let deadline = Condition.Deadline.after(seconds: linger)
                    while jobs.isEmpty && condition.wait(until: deadline) {}
                }
                if jobs.isEmpty {
                    running = false
                    condition.unlock()
                    return
                }
            }
            // Every job queued so far, taken at once (in order); the next ones wait for the next turn.
            let batch = jobs
            jobs = []
            condition.unlock()
            for job in batch { job.run() }
            condition.lock()
        }
    }
}
