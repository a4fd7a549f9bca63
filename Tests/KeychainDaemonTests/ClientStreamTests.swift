import Foundation
import KeychainClient
import KeychainWire
import Testing
@testable import KeychainDaemon

#if canImport(Glibc)
import Glibc
#endif

/// How keychaind cuts a client's bytes into frames: read ahead (a small request's header and body in one read), but
/// never more of a frame than arrived, and whatever way the client's writes split them.
@Suite("Client stream")
struct ClientStreamTests {
    /// A connected pair of stream sockets: keychaind's end and the client's.
    func pair() throws -> (server: Int32, client: Int32) {
        var fds: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        return (fds[0], fds[1])
    }

    func frame(_ body: [UInt8]) -> [UInt8] {
        let n = body.count
        return [UInt8(n >> 24 & 0xff), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + body
    }

    func write(_ fd: Int32, _ bytes: ArraySlice<UInt8>) {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            // No SIGPIPE when the reading end was closed by a failed expectation: the failure is reported instead.
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    @Test("frames come out whole and in order however the writes split them: one byte at a time, many in one write, a large one")
    func framesAcrossWrites() throws {
        let bodies: [[UInt8]] = [[], [1], Array(repeating: 7, count: 4091), Array(repeating: 8, count: 4092),
                                 (0..<200_000).map { UInt8(truncatingIfNeeded: $0) }, [9, 9, 9]]
        let bytes = bodies.flatMap(frame)
        // Every way of cutting: byte by byte for the small ones, then odd-sized writes, then all at once.
        for cut in [1, 3, 4095, 4097, bytes.count] {
            let (server, client) = try pair()
            defer { close(server) }
            let stream = ClientStream(fd: server, peer: getpid())
            let writer = Thread {
                var at = 0
                while at < bytes.count {
                    // Byte-sized cuts only over the first frames (the large one would take long).
                    let size = at < 8200 ? cut : max(cut, 65536)
                    write(client, bytes[at..<min(bytes.count, at + size)])
                    at += size
                }
                close(client)
            }
            writer.start()
            var offset = 0
            for body in bodies {
                #expect(stream.consumed == offset)
                let received = try stream.receive(limit: 1 << 20)
                #expect(received == body, "cut \(cut): a frame of \(body.count) bytes")
                offset += 4 + body.count
            }
            #expect(try stream.receive(limit: 1 << 20) == nil)  // the client closed after its last frame
            #expect(stream.consumed == bytes.count)
        }
    }

    @Test("a frame over the limit is refused from its header; one cut short is an error, not a clean end")
    func limitsAndTruncation() throws {
        let (server, client) = try pair()
        defer { close(server); close(client) }
        let stream = ClientStream(fd: server, peer: getpid())
        write(client, frame([1, 2, 3])[...])
        write(client, frame(Array(repeating: 0, count: 100))[...])
        #expect(try stream.receive(limit: 10) == [1, 2, 3])
        #expect(throws: WireError.tooLarge(100)) { try stream.receive(limit: 10) }

        let (server2, client2) = try pair()
        defer { close(server2) }
        let torn = ClientStream(fd: server2, peer: getpid())
        write(client2, frame([1, 2, 3, 4, 5]).prefix(6))
        close(client2)
        #expect(throws: WireError.truncated) { try torn.receive(limit: 10) }
    }

    @Test("a header cut by the end of what one read brought is completed by the next read (the read-ahead moved to the front)")
    func headerAcrossReads() throws {
        let (server, client) = try pair()
        defer { close(server); close(client) }
        let stream = ClientStream(fd: server, peer: getpid())
        // Queued before the first read: the first frame and two bytes of the next fill the 4,096 bytes read ahead.
        let first = Array(repeating: UInt8(5), count: ClientStream.readAhead - 6)
        write(client, (frame(first) + frame([1, 2, 3]))[...])
        #expect(try stream.receive(limit: 1 << 20) == first)
        #expect(try stream.receive(limit: 1 << 20) == [1, 2, 3])
        #expect(stream.consumed == 4 + first.count + 7)
    }

    @Test("bytes from a process other than the one identified end the connection, also right after its own frame")
    func otherSender() throws {
        let (server, client) = try pair()
        defer { close(server); close(client) }
        // Identified as pid 1: every byte this process sends is another process's.
        let stream = ClientStream(fd: server, peer: 1)
        write(client, frame([1])[...])
        #expect(throws: WireError.malformed("frame from another process (pid \(getpid()))")) { try stream.receive(limit: 10) }

        // This process's frame, then one from a child on an inherited descriptor, both queued before the first read:
        // one read takes only the first (the kernel never joins two senders' bytes), and the second is refused.
        let (server2, client2) = try pair()
        defer { close(server2); close(client2) }
        let own = ClientStream(fd: server2, peer: getpid())
        write(client2, frame([7, 7])[...])
        let child = try ChildProcess.spawn("/bin/sh", arguments: ["-c", #"printf '\000\000\000\001\005'"#], stdout: client2)
        #expect(child.wait() == .exited(0))
        #expect(try own.receive(limit: 10) == [7, 7])
        #expect(throws: WireError.malformed("frame from another process (pid \(child.pid))")) { try own.receive(limit: 10) }
    }
    @Test("without waiting: half a frame is kept and reported as waiting, and comes out whole once the rest arrives; a clean end between frames is the end")
    func availableWithoutWaiting() throws {
        let (server, client) = try pair()
        defer { close(server) }
        let stream = ClientStream(fd: server, peer: getpid())
        #expect(try stream.receiveAvailable(limit: 1 << 20) == .waiting)
        let body = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let bytes = frame(body)
        // Two bytes of the header, then all but the last byte, then the last one.
        write(client, bytes[0..<2])
        #expect(try stream.receiveAvailable(limit: 1 << 20) == .waiting)
        var taken = [UInt8]()
        let writer = Thread { write(client, bytes[2..<(bytes.count - 1)]) }
        writer.start()
        // The writer fills the socket's buffer in turns with these reads.
        for _ in 0..<10_000 {
            let got = try stream.receiveAvailable(limit: 1 << 20)
            #expect(got == .waiting)
            if got != .waiting { break }
            if stream.pendingBytes == bytes.count - 5 { break }
            usleep(1_000)
        }
        write(client, bytes[(bytes.count - 1)...])
        if case .frame(let whole) = try stream.receiveAvailable(limit: 1 << 20) { taken = whole }
        #expect(taken == body)
        #expect(stream.consumed == bytes.count)
        close(client)
        #expect(try stream.receiveAvailable(limit: 1 << 20) == .end)
    }
}

extension ClientStream {
    /// One frame of at most `limit` bytes, waiting for it (keychaind itself never waits: its loop calls
    /// ``receiveAvailable(limit:)`` when bytes arrive); nil at a clean end of stream.
    func receive(limit: Int) throws(WireError) -> [UInt8]? {
        while true {
            switch try receiveAvailable(limit: limit) {
            case .frame(let frame): return frame
            case .end: return nil
            case .waiting:
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                while poll(&descriptor, 1, -1) < 0 && errno == EINTR {}
            }
        }
    }
}
