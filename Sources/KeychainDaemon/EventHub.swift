import KeychainCore
import KeychainWire
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The connections that asked for keychain events (`SecKeychainAddCallback` in other processes), and the fan-out.
///
/// An event is sent to each subscriber without waiting: a subscriber that does not read (its socket buffer full)
/// loses events rather than slowing the client whose call caused them.
final class EventHub: Sendable {
    private let subscribers = Mutex<Set<Int32>>([])

    func add(_ fd: Int32) { subscribers.withLock { _ = $0.insert(fd) } }
    func remove(_ fd: Int32) { subscribers.withLock { _ = $0.remove(fd) } }

    func publish(_ event: KeychainEvent) {
        let payload = Response.event(event).encode()
        var frame = withUnsafeBytes(of: UInt32(payload.count).bigEndian) { Array($0) }
        frame += payload
        // Under the lock, so that a subscriber's descriptor is not closed (and reused) while it is written to.
        subscribers.withLock { fds in
            for fd in fds {
                // One small frame, all or nothing: a partial write would corrupt the stream, so it ends it.
                let sent = frame.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
                if sent >= 0 && sent < frame.count { shutdown(fd, Int32(SHUT_RDWR)) }
            }
        }
    }
}
