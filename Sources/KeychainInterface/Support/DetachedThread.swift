import CKeychainLinux

#if canImport(Glibc)
import Glibc
#endif

/// A detached POSIX thread running a closure to its end. (Foundation's `Thread` is not in FoundationEssentials, which
/// is all the client interface links, so that the tools start fast.)
package enum DetachedThread {
    private final class Work {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Starts `body` on a new detached thread named `name` (15 bytes are kept), with `stackSize` bytes of stack when
    /// given; false when no thread could be made.
    package static func start(name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) -> Bool {
        let work = Unmanaged.passRetained(Work(name: name, body: body)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        if let stackSize { pthread_attr_setstacksize(&attributes, stackSize) }
        var thread = pthread_t()
        let created = pthread_create(&thread, &attributes, { raw in
            let work = Unmanaged<Work>.fromOpaque(raw!).takeRetainedValue()
            _ = ckeychain_set_process_name(work.name)  // PR_SET_NAME names the calling thread
            work.body()
            return nil
        }, work)
        if created != 0 { Unmanaged<Work>.fromOpaque(work).release() }
        return created == 0
    }
}
