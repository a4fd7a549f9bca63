import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A file descriptor that came with (or goes with) a message (the `h` type; logind's inhibitor locks are one):
/// owned by this object and closed when it is released, so a descriptor nobody asked for never leaks.
public final class UnixFileDescriptor: Sendable, Hashable, CustomStringConvertible {
    private let descriptor: Mutex<Int32>

    /// Takes ownership of `fd`.
    public init(taking fd: Int32) { descriptor = Mutex(fd) }

    /// A duplicate of `fd` (close-on-exec), owned by the new object; nil when it cannot be duplicated.
    public convenience init?(duplicating fd: Int32) {
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { return nil }
        self.init(taking: copy)
    }

    /// The descriptor, -1 once closed.
    public var fd: Int32 { descriptor.withLock { $0 } }

    /// Closes it now (an inhibitor released); later calls do nothing.
    public func close() {
        let fd = descriptor.withLock { fd in
            defer { fd = -1 }
            return fd
        }
        if fd >= 0 { _ = Glibc.close(fd) }
    }

    deinit { close() }

    public var description: String { "fd \(fd)" }
    public static func == (a: UnixFileDescriptor, b: UnixFileDescriptor) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
