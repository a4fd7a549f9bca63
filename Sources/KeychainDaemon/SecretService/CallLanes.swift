import Foundation
import KeychainDBus
import KeychainInterface
import Synchronization
import KeychainThreads

/// The Secret Service's calls, one lane per client: a client's calls are handled in the order it sent them (a
/// libsecret client pipelines OpenSession, SearchItems and GetSecrets), and different clients' calls side by side,
/// so a call that waits (on the bus, on a file lock, on the disk) holds up that client alone.
///
/// A lane exists only while it has work: it is made by the first call that finds none and dropped by the last one
/// to finish, so thousands of short-lived clients (a secret-tool per lookup) leave nothing behind.
final class CallLanes: Sendable {
    private struct Lane {
        let worker: SerialWorker
        var pending: Int
    }

    private let lanes = Mutex<[String: Lane]>([:])

    /// Runs `work` after every call of `client` submitted before it, beside the other clients' calls; when no
    /// thread can be had for it, `unserved` instead, on the submitting thread (which reads the bus, so the work is
    /// never run there: a call waits for replies that only that thread reads).
    func submit(_ client: String, _ work: @escaping @Sendable () -> Void, unserved: @escaping @Sendable () -> Void = {}) {
        let worker = lanes.withLock { lanes -> SerialWorker in
            if var lane = lanes[client] {
                lane.pending += 1
                lanes[client] = lane
                return lane.worker
            }
            // A worker of its own: a thread while it has work, none otherwise.
            // (The lane goes once its calls are done, so its thread goes back to the ready ones at once.)
            let worker = SerialWorker(name: "keychaind-ss-lane", linger: 0, runsInlineWithoutThread: false) { body in
                DetachedThread.start(name: "keychaind-ss-lane", stackSize: 1 << 20, body)
            }
            let lane = Lane(worker: worker, pending: 1)
            lanes[client] = lane
            return lane.worker
        }
        let done: @Sendable () -> Void = { [self] in
            lanes.withLock { lanes in
                guard var lane = lanes[client] else { return }
                lane.pending -= 1
                if lane.pending == 0 { lanes.removeValue(forKey: client) } else { lanes[client] = lane }
            }
        }
        worker.submit({ work(); done() }, ifNotRun: { unserved(); done() })
    }

    /// Clients with calls queued or running (for tests and diagnostics).
    var busyClients: Int { lanes.withLock { $0.count } }
}
