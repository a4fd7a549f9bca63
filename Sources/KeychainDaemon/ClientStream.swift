import CKeychainLinux
import KeychainCore
import KeychainWire

#if canImport(Glibc)
import Glibc
#endif

/// One client's connection as keychaind reads it: frames every byte of which the connecting process sent itself.
///
/// The kernel attaches the sender's pid to what it queues (SO_PASSCRED), and never hands over bytes of two senders
/// in one read, so a descriptor passed to a child, or inherited by one, cannot speak for the process that
/// connected: such a frame ends the connection. Together with the rule that no request may have been sent before
/// the caller was identified (``sentBeforeIdentification``), a program that connects and then executes a trusted
/// program cannot have its requests credited to that program.
struct ClientStream {
    let fd: Int32
    let peer: pid_t
    /// Bytes read so far: where the next frame starts.
    private(set) var consumed = 0
    /// Bytes that were already queued when the caller was identified (sent before, or at that moment).
    let queuedAtIdentification: Int

    /// Starts reading `fd`, whose caller `peer` has just been identified.
    init(fd: Int32, peer: pid_t) {
        self.fd = fd
        self.peer = peer
        _ = ckeychain_pass_credentials(fd)
        queuedAtIdentification = max(Int(ckeychain_queued_bytes(fd)), 0)
    }

    /// Whether a frame that starts at `offset` was (at least partly) sent before the caller was identified.
    func sentBeforeIdentification(_ offset: Int) -> Bool { offset < queuedAtIdentification }

    /// Reads one frame of at most `limit` bytes; nil at a clean end of stream. A frame from another process is an
    /// error that ends the connection.
    mutating func receive(limit: Int) throws(WireError) -> [UInt8]? {
        guard let header = try readExactly(4, allowEnd: true) else { return nil }
        let length = header.reduce(0) { Int($0) << 8 | Int($1) }
        guard length <= limit else { throw .tooLarge(length) }
        return try readExactly(length, allowEnd: false) ?? []
    }

    /// Memory grows with the bytes that arrive, not with the length a header announces: a client that announces
    /// megabytes and sends nothing costs one chunk.
    static let chunk = 64 << 10

    private mutating func readExactly(_ count: Int, allowEnd: Bool) throws(WireError) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: min(count, Self.chunk))
        var offset = 0
        while offset < count {
            if offset == out.count {
                // Twice the size (at most the frame's), the old buffer wiped: a frame may carry a secret.
                var bigger = [UInt8](repeating: 0, count: min(count, out.count * 2))
                bigger.withUnsafeMutableBytes { target in out.withUnsafeBytes { target.copyMemory(from: $0) } }
                out.withUnsafeMutableBytes { if let base = $0.baseAddress { wipe(base, $0.count) } }
                out = bigger
            }
            var sender: pid_t = 0
            var uid: uid_t = 0
            let n = out[offset...].withUnsafeMutableBytes {
                ckeychain_recv_with_sender(fd, $0.baseAddress, $0.count, &sender, &uid)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw .truncated
            }
            if n == 0 {
                if allowEnd && offset == 0 { return nil }
                throw .truncated
            }
            guard sender == peer else { throw .malformed("frame from another process (pid \(sender))") }
            offset += n
            consumed += n
        }
        return out
    }
}
