import CKeychainLinux
import KeychainThreads
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// A connection to a message bus over a Unix socket: SASL EXTERNAL authentication, `Hello`, then messages.
///
/// Blocking and thread-based like the rest of keychaind. Before ``startReceiving(_:)`` a call reads replies inline
/// (a client); after it, one thread reads every message, hands replies to the calls waiting for them and everything
/// else to the handler (a service). Writes are serialized; nothing here ever holds a keychain lock.
public final class DBusConnection: @unchecked Sendable {
    // SAFETY: `fd` is immutable; mutable state is guarded by `condition`; reads happen on one thread at a time
    // (the caller before startReceiving, the receiving thread after).
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// An error reply to a call, with its D-Bus name.
    public struct ErrorReply: Error, Sendable, CustomStringConvertible {
        public let name: String
        public let message: String
        public var description: String { "\(name): \(message)" }
    }

    private let fd: Int32
    private let condition = Condition()
    private var nextSerial: UInt32 = 1
    private var replies: [UInt32: DBusMessage] = [:]
    private var waiting: Set<UInt32> = []
    private var queued: [DBusMessage] = []
    private var receiving = false
    /// The thread that reads every message once receiving has started.
    private var readingThread: pthread_t?
    private var closed = false
    private var buffer: [UInt8] = []
    /// Descriptors received and not yet claimed by their message (they arrive with its first bytes).
    private var receivedFDs: [UnixFileDescriptor] = []
    public private(set) var uniqueName = ""
    /// Whether the bus agreed to pass file descriptors on this connection (asked for with `fileDescriptors:`).
    public private(set) var passesFileDescriptors = false
    /// The most descriptors one message may carry (the reference bus's own limit).
    public static let maximumFileDescriptors = 16

    /// The process that listens on the bus's socket, as the kernel recorded it (SO_PEERCRED): the bus daemon, or
    /// the service manager that opened the socket for it.
    public var listenerProcess: (pid: pid_t, uid: uid_t)? {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        guard ckeychain_peer_credentials(fd, &pid, &uid, &gid) == 0, pid > 0 else { return nil }
        return (pid, uid)
    }

    /// The session bus of `DBUS_SESSION_BUS_ADDRESS` (with `fileDescriptors`, passing them: the Secret portal's
    /// calls carry one).
    public static func sessionBus(environment: [String: String] = ProcessInfo.processInfo.environment,
                                  fileDescriptors: Bool = false) throws(Failure) -> DBusConnection
    {
        guard let address = environment["DBUS_SESSION_BUS_ADDRESS"] else {
            throw Failure("no session bus (DBUS_SESSION_BUS_ADDRESS is not set)")
        }
        return try DBusConnection(address: address, fileDescriptors: fileDescriptors)
    }

    /// The system bus: `DBUS_SYSTEM_BUS_ADDRESS`, else the standard `/run/dbus/system_bus_socket`.
    public static func systemBus(environment: [String: String] = ProcessInfo.processInfo.environment,
                                 fileDescriptors: Bool = false) throws(Failure) -> DBusConnection
    {
        try DBusConnection(address: environment["DBUS_SYSTEM_BUS_ADDRESS"] ?? "unix:path=/run/dbus/system_bus_socket",
                           fileDescriptors: fileDescriptors)
    }

    /// Connects to the first `unix:path=` or `unix:abstract=` of a bus address, authenticates and says Hello.
    /// With `fileDescriptors`, asks the bus to pass file descriptors too (NEGOTIATE_UNIX_FD), for calls whose
    /// answer is one (logind's Inhibit); without, a message that carries some ends the connection.
    public init(address: String, fileDescriptors: Bool = false) throws(Failure) {
        var target: (path: String, abstract: Bool)?
        for entry in address.split(separator: ";") where entry.hasPrefix("unix:") {
            for pair in entry.dropFirst(5).split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { continue }
                let value = Self.unescape(String(parts[1]))
                if parts[0] == "path" { target = (value, false) }
                if parts[0] == "abstract" { target = (value, true) }
            }
            if target != nil { break }
        }
        guard let target else { throw Failure("no unix: address in \(address)") }
        let socketFD = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socketFD >= 0 else { throw Failure("socket: \(String(cString: strerror(errno)))") }
        fd = socketFD
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(target.path.utf8)
        let offset = target.abstract ? 1 : 0
        guard pathBytes.count + offset < MemoryLayout.size(ofValue: address.sun_path) else {
            Glibc.close(socketFD)
            throw Failure("bus address too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in pathBytes.enumerated() { raw[i + offset] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + offset + pathBytes.count + (target.abstract ? 0 : 1))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socketFD, $0, length) }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(socketFD)
            throw Failure("cannot connect to the bus: \(reason)")
        }
        do {
            try authenticate(askingForFileDescriptors: fileDescriptors)
            let hello = try call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                             interface: "org.freedesktop.DBus", member: "Hello"))
            guard let name = hello.body.first?.stringValue else { throw Failure("Hello gave no name") }
            uniqueName = name
        } catch let error as Failure {
            Glibc.close(socketFD)
            throw error
        } catch {
            Glibc.close(socketFD)
            throw Failure("\(error)")
        }
    }

    deinit { close() }

    public func close() {
        condition.lock()
        let wasOpen = !closed
        closed = true
        condition.broadcast()
        condition.unlock()
        if wasOpen {
            shutdown(fd, Int32(SHUT_RDWR))
            Glibc.close(fd)
        }
    }

    // MARK: - Authentication

    /// SASL EXTERNAL with our uid (the bus checks it against the socket's credentials), NEGOTIATE_UNIX_FD when
    /// asked for (a bus that does not agree leaves it off), then BEGIN.
    private func authenticate(askingForFileDescriptors: Bool) throws(Failure) {
        let uid = String(getuid())
        let hexUID = uid.utf8.map { String($0, radix: 16) }.joined()
        try writeAll([0] + Array("AUTH EXTERNAL \(hexUID)\r\n".utf8))
        let answer = try readLine()
        guard answer.hasPrefix("OK ") else { throw Failure("the bus refused authentication: \(answer)") }
        if askingForFileDescriptors {
            try writeAll(Array("NEGOTIATE_UNIX_FD\r\n".utf8))
            passesFileDescriptors = try readLine() == "AGREE_UNIX_FD"
        }
        try writeAll(Array("BEGIN\r\n".utf8))
    }

    private func readLine() throws(Failure) -> String {
        var line: [UInt8] = []
        while !(line.count >= 2 && line.suffix(2) == [0x0D, 0x0A]) {
            guard line.count < 4096 else { throw Failure("authentication line too long") }
            var byte: UInt8 = 0
            let n = Glibc.read(fd, &byte, 1)
            if n < 0, errno == EINTR { continue }
            guard n == 1 else { throw Failure("the bus closed the connection during authentication") }
            line.append(byte)
        }
        return String(decoding: line.dropLast(2), as: UTF8.self)
    }

    // MARK: - Sending

    /// Sends `message` with the next serial and returns that serial.
    @discardableResult
    public func send(_ message: DBusMessage) throws(Failure) -> UInt32 {
        try send(message, awaitingReply: false)
    }

    /// Takes the serial, registers the wait for its reply (so that a fast reply is never taken for an unexpected
    /// message) and writes, all under the lock: writes never interleave.
    private func send(_ message: DBusMessage, awaitingReply: Bool) throws(Failure) -> UInt32 {
        condition.lock()
        defer { condition.unlock() }
        guard !closed else { throw Failure("the bus connection is closed") }
        let serial = nextSerial
        nextSerial = nextSerial == UInt32.max ? 1 : nextSerial + 1
        let bytes: [UInt8]
        do { bytes = try message.encoded(serial: serial) } catch { throw Failure("cannot encode the message: \(error)") }
        if !message.fileDescriptors.isEmpty {
            guard passesFileDescriptors, message.fileDescriptors.count <= Self.maximumFileDescriptors else {
                throw Failure("file descriptors cannot be sent on this connection")
            }
        }
        if awaitingReply { waiting.insert(serial) }
        do throws(Failure) {
            if message.fileDescriptors.isEmpty {
                try writeAll(bytes)
            } else {
                try writeAll(bytes, fileDescriptors: message.fileDescriptors.map(\.fd))
            }
        } catch {
            waiting.remove(serial)
            throw error
        }
        return serial
    }

    /// Writes every byte; descriptors go with the first write (the receiver gets them with the message's first byte).
    private func writeAll(_ bytes: [UInt8], fileDescriptors: [Int32] = []) throws(Failure) {
        var offset = 0
        var descriptors = fileDescriptors
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { raw in
                if descriptors.isEmpty { return Glibc.send(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL)) }
                return ckeychain_send_with_fds(fd, raw.baseAddress, raw.count, descriptors, Int32(descriptors.count))
            }
            if n > 0 { descriptors = [] }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw Failure("the bus connection is closed") }
            offset += n
        }
    }

    /// Calls a method and returns its reply; an error reply throws ``ErrorReply``.
    public func call(_ message: DBusMessage, timeout: Double = 25) throws -> DBusMessage {
        condition.lock()
        let threaded = receiving
        let onReadingThread = readingThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
        condition.unlock()
        // Its reply would come through this very thread, which would be waiting: refused at once, not after the
        // timeout (a handler run on the reading thread must only hand work on).
        guard !onReadingThread else { throw Failure("a method call from the thread that reads its reply") }
        var message = message
        message.flags.remove(.noReplyExpected)
        let reply: DBusMessage
        if threaded {
            let sent = try send(message, awaitingReply: true)
            condition.lock()
            let deadline = Condition.Deadline.after(seconds: timeout)
            while replies[sent] == nil, !closed {
                if !condition.wait(until: deadline) { break }
            }
            waiting.remove(sent)
            let found = replies.removeValue(forKey: sent)
            let isClosed = closed
            condition.unlock()
            guard let found else { throw Failure(isClosed ? "the bus connection is closed" : "no reply within \(Int(timeout)) s") }
            reply = found
        } else {
            let sent = try send(message)
            while true {
                let next = try readMessage()
                if (next.kind == .methodReturn || next.kind == .error), next.replySerial == sent {
                    reply = next
                    break
                }
                condition.lock()
                queued.append(next)
                condition.unlock()
            }
        }
        if reply.kind == .error {
            throw ErrorReply(name: reply.errorName ?? "", message: reply.body.first?.stringValue ?? "")
        }
        return reply
    }

    // MARK: - Receiving

    /// The next message that is not a reply to one of our calls (clients without a receiving thread).
    public func receive() throws(Failure) -> DBusMessage {
        condition.lock()
        if !queued.isEmpty {
            let first = queued.removeFirst()
            condition.unlock()
            return first
        }
        condition.unlock()
        return try readMessage()
    }

    /// How a handler of received messages runs (``startReceiving(_:handler:onClose:)``).
    public enum HandlerThread: Sendable {
        /// On a thread of its own (``SerialWorker``), in order: the handler may block, and may itself call methods
        /// (the bus's GetConnectionUnixProcessID), whose replies the reading thread still delivers.
        case own
        /// On the reading thread itself: for a handler that only hands each message on and never waits (the
        /// Secret Service's, which queues it on its caller's lane). Each message then costs one thread hand-off
        /// less; a handler that called a method here would wait for a reply that nobody reads.
        case reading
    }

    /// Starts the thread that reads every message from now on: replies go to the calls waiting for them, anything
    /// else to `handler`, in order (on a thread of its own unless `handlerThread` says otherwise). `onClose` runs
    /// when the connection ends. False when no thread could be made: the connection is closed (`onClose` has run).
    @discardableResult
    public func startReceiving(_ handlerThread: HandlerThread = .own,
                               handler: @escaping @Sendable (DBusMessage) -> Void,
                               onClose: @escaping @Sendable () -> Void = {}) -> Bool {
        condition.lock()
        receiving = true
        let backlog = queued
        queued = []
        condition.unlock()
        let handlers: Handlers = handlerThread == .reading ? .inline : .worker(SerialWorker(name: "dbus-handler"))
        let started = DetachedThread.start(name: "dbus-receive", parks: false) { [self] in
            condition.lock()
            readingThread = pthread_self()
            condition.unlock()
            for message in backlog { handlers.submit { handler(message) } }
            while true {
                let message: DBusMessage
                do { message = try readMessage() } catch { break }
                if message.kind == .methodReturn || message.kind == .error, let serial = message.replySerial {
                    condition.lock()
                    if waiting.contains(serial) {
                        replies[serial] = message
                        condition.broadcast()
                        condition.unlock()
                        continue
                    }
                    condition.unlock()
                }
                handlers.submit { handler(message) }
            }
            close()
            handlers.submit { onClose() }
        }
        if !started {  // no thread for it: the connection cannot serve, so it ends as if the bus had closed it
            close()
            handlers.submit { onClose() }
        }
        return started
    }

    /// Where the receiving thread hands each message: to the handler's worker, or straight to the handler.
    private enum Handlers {
        case worker(SerialWorker)
        case inline

        func submit(_ work: @escaping @Sendable () -> Void) {
            switch self {
            case .worker(let worker): worker.submit(work)
            case .inline: work()
            }
        }
    }

    /// The largest message this connection takes in whole; a larger one has its header read and its body skipped
    /// (``DBusMessage/bodyTooLarge``), so it costs no more memory than a chunk and leaves the connection up.
    public var maximumMessageSize: Int {
        get { condition.lock(); defer { condition.unlock() }; return acceptedSize }
        set { condition.lock(); acceptedSize = min(newValue, DBusMessage.maximumSize); condition.unlock() }
    }
    private var acceptedSize = DBusMessage.maximumSize

    /// Reads one whole message. A message we cannot parse ends the connection (the stream cannot be resynchronized).
    private func readMessage() throws(Failure) -> DBusMessage {
        while true {
            if buffer.count >= 16 {
                guard let (header, body) = DBusMessage.lengths(buffer[..<16]) else {
                    throw Failure("malformed message from the bus")
                }
                if header + body > maximumMessageSize {
                    guard header <= 1 << 16 else { throw Failure("a message from the bus with oversized header fields") }
                    if buffer.count >= header { return try skipBody(header: header, body: body) }
                } else if buffer.count >= header + body {
                    let length = header + body
                    let frame = Array(buffer[..<length])
                    buffer.removeFirst(length)
                    do {
                        var message = try DBusMessage.decode(frame)
                        try claimFileDescriptors(of: &message)
                        return message
                    } catch let error as DBusReader.Malformed {
                        throw Failure("malformed message from the bus: \(error.reason)")
                    } catch {
                        throw Failure("\(error)")
                    }
                }
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            guard let n = try receive(into: &chunk, upTo: chunk.count) else { continue }
            buffer.append(contentsOf: chunk[..<n])
        }
    }

    /// One read from the bus of at most `limit` bytes into `chunk`, taking the descriptors that come with them; nil
    /// when interrupted.
    private func receive(into chunk: inout [UInt8], upTo limit: Int) throws(Failure) -> Int? {
        let n: Int
        if passesFileDescriptors {
            var fds = [Int32](repeating: -1, count: Self.maximumFileDescriptors * 4)
            var count: Int32 = 0
            n = chunk.withUnsafeMutableBytes { raw in
                ckeychain_recv_with_fds(fd, raw.baseAddress, limit, &fds, Int32(fds.count), &count)
            }
            receivedFDs += fds.prefix(Int(max(0, count))).map { UnixFileDescriptor(taking: $0) }
            guard receivedFDs.count <= Self.maximumFileDescriptors * 4 else {
                throw Failure("more file descriptors than the messages claim")
            }
        } else {
            n = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, limit, 0) }
        }
        if n < 0, errno == EINTR { return nil }
        guard n > 0 else { throw Failure("the bus connection is closed") }
        return n
    }

    /// A message too large to keep: its header decoded, its body read and dropped as it arrives.
    private func skipBody(header: Int, body: Int) throws(Failure) -> DBusMessage {
        var message: DBusMessage
        do { message = try DBusMessage.decodeHeader(Array(buffer[..<header])) } catch {
            throw Failure("malformed message from the bus: \(error.reason)")
        }
        var remaining = header + body
        let held = min(buffer.count, remaining)
        buffer.removeFirst(held)
        remaining -= held
        var chunk = [UInt8](repeating: 0, count: 65536)
        while remaining > 0 {
            guard let n = try receive(into: &chunk, upTo: min(remaining, chunk.count)) else { continue }
            remaining -= n
        }
        try claimFileDescriptors(of: &message)  // handed to the message, closed with it
        return message
    }

    /// Hands a message the descriptors its header announces, in the order they came. Descriptors on a connection
    /// that did not negotiate them, too many, or missing ones end the connection: only a broken bus sends those
    /// (it refuses to pass descriptors to a connection that did not ask), and the stream's descriptors could no
    /// longer be matched to its messages. An `h` that names none is the reader's to refuse
    /// (``DBusMessage/fileDescriptor(_:)`` is nil), not a reason to drop everyone's connection.
    private func claimFileDescriptors(of message: inout DBusMessage) throws(Failure) {
        let count = Int(message.unixFDs)
        guard count > 0 else { return }
        guard passesFileDescriptors else { throw Failure("file descriptors are not accepted") }
        guard count <= Self.maximumFileDescriptors, receivedFDs.count >= count else {
            throw Failure("a message announces file descriptors that did not come")
        }
        message.fileDescriptors = Array(receivedFDs.prefix(count))
        receivedFDs.removeFirst(count)
    }

    /// Bus addresses escape bytes as %XX.
    static func unescape(_ value: String) -> String {
        var out: [UInt8] = []
        var bytes = Array(value.utf8)[...]
        while let byte = bytes.popFirst() {
            if byte == UInt8(ascii: "%"), bytes.count >= 2,
               let decoded = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16) {
                out.append(decoded)
                bytes = bytes.dropFirst(2)
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
