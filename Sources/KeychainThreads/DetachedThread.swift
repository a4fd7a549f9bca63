import CKeychainLinux
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A detached POSIX thread running a closure to its end. (Foundation's `Thread` is not in FoundationEssentials, which
/// is all the tools link, so that they start fast.)
///
/// A thread whose work is done waits a little while (``parkTime``) for the next work of the same stack size before it
/// ends: making a thread and ending it (its stack mapped and unmapped, the allocator's per-thread cache built and
/// given back) costs more than a short call's work, and keychaind starts several per Secret Service client (its
/// identification, its calls, a session key). At most ``maxParked`` wait, so an idle process keeps none after
/// ``parkTime``.
package enum DetachedThread {
    package static let maxParked = 8
    package static let parkTime: Int = 1  // seconds

    private final class Work {
        let name: String
        let parks: Bool
        let body: @Sendable () -> Void
        init(name: String, parks: Bool, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.parks = parks
            self.body = body
        }
    }

    /// A parked thread's mailbox: the next work, handed over under its own lock.
    private final class Slot: @unchecked Sendable {
        // SAFETY: `work` is only read and written with `condition` locked.
        let stackSize: Int?
        private let condition = Condition()
        private var work: Work?

        init(stackSize: Int?) { self.stackSize = stackSize }

        func hand(_ next: Work) {
            condition.lock()
            work = next
            condition.signal()
            condition.unlock()
        }

        /// The next work; nil when none came within `parkTime` and `retire` took this slot out of the park. When
        /// `retire` finds it already taken, work is on its way and is waited for.
        func next(retire: () -> Bool) -> Work? {
            let deadline = Condition.Deadline.after(seconds: Double(DetachedThread.parkTime))
            var timed = true
            condition.lock()
            defer { condition.unlock() }
            while work == nil {
                if timed {
                    if !condition.wait(until: deadline) && work == nil {
                        condition.unlock()
                        let retired = retire()
                        condition.lock()
                        if retired { return nil }
                        timed = false
                    }
                } else {
                    condition.wait()
                }
            }
            defer { work = nil }
            return work
        }
    }

    private static let parked = Mutex<[Slot]>([])

    /// How many threads wait for work now (for tests and diagnostics).
    package static var parkedCount: Int { parked.withLock { $0.count } }

    /// Runs `body` on a parked thread of the same stack size, else on a new detached thread, named `name` (15 bytes
    /// are kept) with `stackSize` bytes of stack when given; false when no thread could be made. With `parks` false
    /// the work gets a new thread that ends with it (for work that has its own idle wait, or lasts a connection's life).
    package static func start(name: String, stackSize: Int? = nil, parks: Bool = true,
                              _ body: @escaping @Sendable () -> Void) -> Bool {
        let work = Work(name: name, parks: parks, body: body)
        let waiting = !parks ? nil : parked.withLock { slots -> Slot? in
            guard let index = slots.lastIndex(where: { $0.stackSize == stackSize }) else { return nil }
            return slots.remove(at: index)
        }
        if let waiting {
            waiting.hand(work)
            return true
        }
        let slot = Slot(stackSize: stackSize)
        let context = Unmanaged.passRetained(Runner(slot: slot, first: work)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        if let stackSize { pthread_attr_setstacksize(&attributes, stackSize) }
        var thread = pthread_t()
        let created = pthread_create(&thread, &attributes, { raw in
            Unmanaged<Runner>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, context)
        if created != 0 { Unmanaged<Runner>.fromOpaque(context).release() }
        return created == 0
    }

    /// One thread's life: its first work, then whatever is handed to it while it is parked.
    private final class Runner {
        let slot: Slot
        let first: Work
        init(slot: Slot, first: Work) {
            self.slot = slot
            self.first = first
        }

        func run() {
            var work: Work? = first
            while let current = work {
                _ = ckeychain_set_process_name(current.name)  // PR_SET_NAME names the calling thread
                current.body()
                work = nil
                guard current.parks else { return }
                let parkedNow = DetachedThread.parked.withLock { slots -> Bool in
                    guard slots.count < DetachedThread.maxParked else { return false }
                    slots.append(slot)
                    return true
                }
                guard parkedNow else { return }
                work = slot.next(retire: { [slot] in
                    DetachedThread.parked.withLock { slots in
                        guard let index = slots.firstIndex(where: { $0 === slot }) else { return false }
                        slots.remove(at: index)
                        return true
                    }
                })
            }
        }
    }
}
