import Foundation
import Synchronization

/// Work run in the order it was submitted, on a plain thread that exists only while there is work: keychaind's one
/// model of concurrency (threads, never a shared pool), also for what arrives on a D-Bus connection.
///
/// The thread is made by the first submission that finds the worker idle and ends when the last job is done, so a
/// thousand short-lived clients (a secret-tool per lookup) leave no thread behind, and a job that blocks (on the bus,
/// a file lock, the disk, a question to the user) holds up only the jobs behind it on this worker.
package final class SerialWorker: Sendable {
    private let name: String
    private let state = Mutex<(jobs: [@Sendable () -> Void], running: Bool)>(([], false))

    package init(name: String) { self.name = name }

    /// Runs `work` after every job submitted before it.
    package func submit(_ work: @escaping @Sendable () -> Void) {
        let startThread = state.withLock { state -> Bool in
            state.jobs.append(work)
            defer { state.running = true }
            return !state.running
        }
        guard startThread else { return }
        let thread = Thread { [self] in drain() }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Whether a job is queued or running.
    package var isBusy: Bool { state.withLock { $0.running } }

    private func drain() {
        while true {
            // Every job queued so far, taken at once (in order); the next ones wait for the next turn.
            let batch = state.withLock { state -> [@Sendable () -> Void] in
                defer { state.jobs = [] }
                if state.jobs.isEmpty { state.running = false }
                return state.jobs
            }
            if batch.isEmpty { return }
            for job in batch { job() }
        }
    }
}
