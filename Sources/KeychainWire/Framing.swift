import KeychainCore

#if canImport(Glibc)
import Glibc
#endif

/// Length-prefixed frames over a stream socket: a 4-byte big-endian length, then the payload. A frame longer than
/// the receiver's limit is refused before anything is allocated for it.
public enum Framing {
    /// The greeting each side sends first: "KCW" and the protocol version.
    public static func hello() -> [UInt8] { Array("KCW".utf8) + [UInt8(keychainProtocolVersion)] }

    /// Checks the daemon's greeting, in a client.
    public static func checkHello(_ bytes: [UInt8]) throws(WireError) {
        let version = try helloVersion(bytes)
        guard version == keychainProtocolVersion else {
            throw .versionMismatch(client: keychainProtocolVersion, daemon: version)
        }
    }

    /// Checks a client's greeting, in keychaind: the mismatch is told from the client's side, which shows it.
    public static func checkClientHello(_ bytes: [UInt8]) throws(WireError) {
        let version = try helloVersion(bytes)
        guard version == keychainProtocolVersion else {
            throw .versionMismatch(client: version, daemon: keychainProtocolVersion)
        }
    }

    /// The protocol version a greeting names.
    private static func helloVersion(_ bytes: [UInt8]) throws(WireError) -> Int {
        guard bytes.count == 4, Array(bytes.prefix(3)) == Array("KCW".utf8) else { throw .malformed("greeting") }
        return Int(bytes[3])
    }

    /// keychaind's answer to a client's greeting: its own greeting, then the directories it serves (keychains,
    /// state, configuration, each ended by a NUL). A client that checks which keychaind answers compares them with
    /// its own: the installed keychaind, started with another HOME by a program of the user, would otherwise keep
    /// what the user stores where that program reads it.
    public static func daemonGreeting(directories: [String]) -> [UInt8] {
        hello() + directories.flatMap { Array($0.utf8) + [0] }
    }

    /// Checks keychaind's greeting as ``checkHello`` does and returns the directories it names.
    public static func checkDaemonGreeting(_ bytes: [UInt8]) throws(WireError) -> [String] {
        guard bytes.count >= 4 else { throw .malformed("greeting") }
        try checkHello(Array(bytes.prefix(4)))
        guard bytes.count == 4 || bytes.last == 0 else { throw .malformed("greeting") }
        return bytes.dropFirst(4).split(separator: 0, omittingEmptySubsequences: false).dropLast().map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    /// `payload` as one frame (its length, then itself): for a frame sent with credentials of the sender's choice.
    public static func framed(_ payload: [UInt8]) -> [UInt8] {
        withUnsafeBytes(of: UInt32(payload.count).bigEndian) { Array($0) } + payload
    }

    /// Writes one frame; false when the peer has gone.
    public static func send(_ payload: [UInt8], on fd: Int32) -> Bool {
        send([payload], on: fd)
    }

    /// Writes frames back to back in one write (one system call and one wake-up of the reader for a request and
    /// its header, or for requests sent ahead of their answers); false when the peer has gone. The buffer is wiped:
    /// a payload may carry a secret.
    public static func send(_ payloads: [[UInt8]], on fd: Int32) -> Bool {
        var frames: [UInt8] = []
        frames.reserveCapacity(payloads.reduce(0) { $0 + 4 + $1.count })
        for payload in payloads {
            withUnsafeBytes(of: UInt32(payload.count).bigEndian) { frames.append(contentsOf: $0) }
            frames.append(contentsOf: payload)
        }
        defer { frames.withUnsafeMutableBytes { if let base = $0.baseAddress { wipe(base, $0.count) } } }
        return writeAll(frames, fd)
    }

    /// Sends a small frame only if the socket has room for it now (a unix stream socket reports writable while
    /// three quarters of its buffer are free): a progress report is dropped rather than wait for a client that
    /// stopped reading (suspended, its terminal paused) while the sender holds a keychain's locks.
    public static func sendIfRoom(_ payload: [UInt8], on fd: Int32) -> Bool {
        var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&descriptor, 1, 0) == 1, descriptor.revents & Int16(POLLOUT) != 0 else { return false }
        return send([payload], on: fd)
    }

    /// Reads one frame of at most `limit` bytes; nil at a clean end of stream.
    public static func receive(on fd: Int32, limit: Int) throws(WireError) -> [UInt8]? {
        guard let header = try readExactly(4, fd, allowEnd: true) else { return nil }
        let length = header.reduce(0) { Int($0) << 8 | Int($1) }
        guard length <= limit else { throw .tooLarge(length) }
        return try readExactly(length, fd, allowEnd: false) ?? []
    }

    private static func writeAll(_ bytes: [UInt8], _ fd: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }

    private static func readExactly(_ count: Int, _ fd: Int32, allowEnd: Bool) throws(WireError) -> [UInt8]? {
        try readExactly(count, allowEnd: allowEnd) { recv(fd, $0.baseAddress, $0.count, 0) }
    }

    /// Reads `count` bytes with `read` (a recv(2) into the buffer it is given: bytes read, 0 at the end, or -1 with
    /// errno set), retrying on EINTR; nil when the stream ended before the first byte and `allowEnd`.
    public static func readExactly(_ count: Int, allowEnd: Bool, using read: (UnsafeMutableRawBufferPointer) -> Int)
        throws(WireError) -> [UInt8]?
    {
        var out = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let n = out[offset...].withUnsafeMutableBytes { read($0) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .truncated
            }
            if n == 0 {
                if allowEnd && offset == 0 { return nil }
                throw .truncated
            }
            offset += n
        }
        return out
    }
}
