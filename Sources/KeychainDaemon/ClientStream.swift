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
final class ClientStream {
    let fd: Int32
    let peer: pid_t
    /// Bytes of frames handed out so far: where the next frame starts.
    private(set) var consumed = 0
    /// Bytes that were already queued when the caller was identified (sent before, or at that moment).
    let queuedAtIdentification: Int
    /// What one read brought beyond the bytes asked for: a small request's header and body come in one read
    /// (`ahead[aheadStart..<aheadEnd]`, every byte checked as the connecting process's when it was read).
    private var ahead = [UInt8](repeating: 0, count: ClientStream.readAhead)
    private var aheadStart = 0
    private var aheadEnd = 0
    static let readAhead = 4096
    /// The frame being received: its announced length (nil between frames), what arrived of it so far.
    private var pendingLength: Int?
    private var pendingBody: [UInt8] = []
    private var pendingFilled = 0
    /// How much of the frame being received has arrived (for tests).
    var pendingBytes: Int { pendingFilled }
    /// Whether bytes were read ahead that no frame has taken yet: only then can another frame be whole without a
    /// read (a client sends its next request after this one's answer; a look at the socket would find nothing).
    var hasBytesAhead: Bool { aheadEnd > aheadStart }

    /// Starts reading `fd`, whose caller `peer` has just been identified.
    init(fd: Int32, peer: pid_t) {
        self.fd = fd
        self.peer = peer
        _ = ckeychain_pass_credentials(fd)
        queuedAtIdentification = max(Int(ckeychain_queued_bytes(fd)), 0)
    }

    deinit {
        ahead.withUnsafeMutableBytes { if let base = $0.baseAddress { wipe(base, $0.count) } }
        pendingBody.withUnsafeMutableBytes { if let base = $0.baseAddress { wipe(base, $0.count) } }
    }

    /// Whether a frame that starts at `offset` was (at least partly) sent before the caller was identified.
    func sentBeforeIdentification(_ offset: Int) -> Bool { offset < queuedAtIdentification }

    /// What one look at the connection gave.
    enum Received: Equatable {
        /// A whole frame (its body).
        case frame([UInt8])
        /// Nothing more has arrived yet: what did arrive of a frame is kept for the next look.
        case waiting
        /// The client closed the connection between frames.
        case end
    }

    /// Takes one frame of at most `limit` bytes if all of it has arrived, without waiting: a client that sends half
    /// a frame and stops costs the bytes it sent, not a thread. A frame from another process is an error that ends
    /// the connection.
    func receiveAvailable(limit: Int) throws(WireError) -> Received {
        if pendingLength == nil {
            switch try fillAhead(atLeast: 4) {
            case .waiting: return .waiting
            case .end: return .end
            case .ready: break
            }
            let length = ahead[aheadStart..<(aheadStart + 4)].reduce(0) { Int($0) << 8 | Int($1) }
            guard length <= limit else { throw .tooLarge(length) }
            aheadStart += 4
            startBody(length)
        }
        guard let length = pendingLength else { return .waiting }
        while pendingFilled < length {
            if pendingFilled == pendingBody.count {
                // Twice the size (at most the frame's), the old buffer wiped: a frame may carry a secret.
                var bigger = [UInt8](repeating: 0, count: min(length, pendingBody.count * 2))
                bigger.withUnsafeMutableBytes { target in pendingBody.withUnsafeBytes { target.copyMemory(from: $0) } }
                pendingBody.withUnsafeMutableBytes { if let base = $0.baseAddress { wipe(base, $0.count) } }
                pendingBody = bigger
            }
            guard let n = try read(into: &pendingBody, from: pendingFilled, upTo: pendingBody.count) else { return .waiting }
            if n == 0 { throw .truncated }
            pendingFilled += n
        }
        let frame = pendingBody
        pendingBody = []
        pendingLength = nil
        pendingFilled = 0
        consumed += 4 + length
        return .frame(frame)
    }

    /// Memory grows with the bytes that arrive, not with the length a header announces: a client that announces
    /// megabytes and sends nothing costs one chunk.
    static let chunk = 64 << 10

    /// A frame of `count` bytes begins: its first chunk, with the bytes already read ahead moved in.
    private func startBody(_ count: Int) {
        pendingBody = [UInt8](repeating: 0, count: min(count, Self.chunk))
        let buffered = min(count, aheadEnd - aheadStart)
        if buffered > 0 {
            pendingBody.withUnsafeMutableBytes { target in
                ahead.withUnsafeMutableBytes { source in
                    let taken = UnsafeMutableRawBufferPointer(rebasing: source[aheadStart..<(aheadStart + buffered)])
                    target.baseAddress!.copyMemory(from: taken.baseAddress!, byteCount: buffered)
                    wipe(taken.baseAddress!, buffered)  // a frame may carry a secret
                }
            }
            aheadStart += buffered
        }
        pendingLength = count
        pendingFilled = buffered
    }

    private enum Fill { case ready, waiting, end }

    /// Reads what has arrived until at least `count` bytes are read ahead; `.end` at a clean end of stream (nothing
    /// of a frame read).
    private func fillAhead(atLeast count: Int) throws(WireError) -> Fill {
        if aheadStart == aheadEnd {
            aheadStart = 0
            aheadEnd = 0
        }
        while aheadEnd - aheadStart < count {
            if aheadEnd == ahead.count {  // move what is left to the front, and wipe where it was
                let left = aheadEnd - aheadStart
                ahead.withUnsafeMutableBytes { raw in
                    raw.baseAddress!.copyMemory(from: raw.baseAddress! + aheadStart, byteCount: left)
                    wipe(raw.baseAddress! + left, raw.count - left)
                }
                aheadStart = 0
                aheadEnd = left
            }
            guard let n = try read(into: &ahead, from: aheadEnd, upTo: ahead.count) else { return .waiting }
            if n == 0 {
                if aheadEnd == aheadStart { return .end }
                throw .truncated
            }
            aheadEnd += n
        }
        return .ready
    }

    /// One read into `buffer[from..<upTo]` of bytes the connecting process sent, without waiting: nil when none
    /// are queued, 0 at the end of the stream.
    private func read(into buffer: inout [UInt8], from start: Int, upTo end: Int) throws(WireError) -> Int? {
        while true {
            var sender: pid_t = 0
            var uid: uid_t = 0
            let n = buffer[start..<end].withUnsafeMutableBytes {
                ckeychain_recv_available_with_sender(fd, $0.baseAddress, $0.count, &sender, &uid)
            }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return nil }
                throw .truncated
            }
            if n == 0 { return 0 }
            guard sender == peer else { throw .malformed("frame from another process (pid \(sender))") }
            return n
        }
    }
}
