import Foundation
import KeychainDBus
import KeychainTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("D-Bus connections on a real bus", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")))
struct DBusBusTests {
    @Test("Hello, RequestName, a method served and called, a signal matched, the caller's pid from the bus")
    func service() throws {
        let bus = try PrivateSessionBus()
        let server = try DBusConnection(address: bus.address)
        let client = try DBusConnection(address: bus.address)
        #expect(server.uniqueName.hasPrefix(":1."))
        #expect(server.uniqueName != client.uniqueName)
        let owned = try server.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                interface: "org.freedesktop.DBus", member: "RequestName",
                                                body: [.string("org.example.KeychainTest"), .uint32(4)]))
        #expect(owned.body == [.uint32(1)])  // DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER

        server.startReceiving { [server] message in
            guard message.kind == .methodCall else { return }
            if message.member == "Echo" {
                _ = try? server.send(message.methodReturn(message.body))
            } else if message.member == "WhoAmI", let sender = message.sender {
                // A call back to the bus from the receiving side: its reply must still arrive.
                let pid = try? server.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                       interface: "org.freedesktop.DBus", member: "GetConnectionUnixProcessID",
                                                       body: [.string(sender)]))
                _ = try? server.send(message.methodReturn(pid?.body ?? []))
            } else {
                _ = try? server.send(message.errorReply("org.freedesktop.DBus.Error.UnknownMethod", "no such method"))
            }
        }

        let body: [DBusValue] = [.dictionary(keySignature: "s", valueSignature: "v", [
            .init(.string("label"), .variant(.string("mine"))), .init(.string("attrs"), .variant(.stringDictionary(["a": "b"]))),
        ]), .bytes(Array(0...255))]
        let echoed = try client.call(.methodCall(destination: "org.example.KeychainTest", path: "/org/example",
                                                 interface: "org.example.Test", member: "Echo", body: body))
        #expect(echoed.body == body)
        #expect(echoed.sender == server.uniqueName)

        #expect(throws: DBusConnection.ErrorReply.self) {
            try client.call(.methodCall(destination: "org.example.KeychainTest", path: "/", interface: "org.example.Test",
                                        member: "Nope"))
        }

        // GetConnectionUnixProcessID from a handler thread: the receiving thread routes that reply.
        let pid = try client.call(.methodCall(destination: "org.example.KeychainTest", path: "/", interface: "org.example.Test",
                                              member: "WhoAmI"))
        #expect(pid.body == [.uint32(UInt32(getpid()))])

        // A signal matched by a rule reaches the client.
        _ = try client.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                        interface: "org.freedesktop.DBus", member: "AddMatch",
                                        body: [.string("type='signal',interface='org.example.Test'")]))
        try server.send(.signal(path: "/org/example", interface: "org.example.Test", member: "Changed",
                                body: [.objectPath("/org/example/item/1")]))
        var signal: DBusMessage?
        for _ in 0..<10 {
            let message = try client.receive()
            if message.kind == .signal, message.member == "Changed" { signal = message; break }
        }
        #expect(signal?.body == [.objectPath("/org/example/item/1")])
        client.close()
        server.close()
    }

    @Test("a handler run on the reading thread that calls a method is refused at once, not left waiting for its own reply")
    func callFromReadingThread() throws {
        let bus = try PrivateSessionBus()
        let server = try DBusConnection(address: bus.address)
        let client = try DBusConnection(address: bus.address)
        server.startReceiving(.reading, handler: { [server] message in
            guard message.kind == .methodCall else { return }
            do {
                _ = try server.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                interface: "org.freedesktop.DBus", member: "GetId"))
                _ = try? server.send(message.methodReturn([.string("called")]))
            } catch {
                _ = try? server.send(message.errorReply("org.example.Error.Refused", "\(error)"))
            }
        })
        // Without the refusal the handler would wait out the 25 s call timeout, and this call its own 5 s.
        do {
            _ = try client.call(.methodCall(destination: server.uniqueName, path: "/", interface: "org.example.Test",
                                            member: "CallBack"), timeout: 5)
            Issue.record("the handler's call was answered from the thread that reads the answer")
        } catch let error as DBusConnection.ErrorReply {
            #expect(error.name == "org.example.Error.Refused")
            #expect(error.message.contains("thread that reads its reply"))
        }
        client.close()
        server.close()
    }

    @Test("file descriptors: passed both ways where negotiated; refused by the bus for a connection that did not ask, which stays up")
    func fileDescriptors() throws {
        let bus = try PrivateSessionBus()
        let server = try DBusConnection(address: bus.address, fileDescriptors: true)
        let plain = try DBusConnection(address: bus.address)
        let client = try DBusConnection(address: bus.address, fileDescriptors: true)
        #expect(server.passesFileDescriptors && client.passesFileDescriptors && !plain.passesFileDescriptors)
        // The server writes a line into the descriptor it is given and answers with a descriptor of its own.
        server.startReceiving { [server] message in
            guard message.kind == .methodCall else { return }
            guard let value = message.body.first, let given = message.fileDescriptor(value) else {
                _ = try? server.send(message.errorReply("org.example.Error.NoDescriptor", "no descriptor"))
                return
            }
            _ = "written by the server\n".withCString { write(given.fd, $0, strlen($0)) }
            guard let ends = closeOnExecPipe() else { return }
            _ = "answered\n".withCString { write(ends.write, $0, strlen($0)) }
            Glibc.close(ends.write)
            var reply = message.methodReturn([.string("here"), .unixFD(0)])
            reply.fileDescriptors = [UnixFileDescriptor(taking: ends.read)]
            _ = try? server.send(reply)
        }
        plain.startReceiving { [plain] message in
            if message.kind == .methodCall { _ = try? plain.send(message.methodReturn([.string("alive")])) }
        }
        func readAll(_ fd: Int32) -> String {
            var bytes: [UInt8] = [], chunk = [UInt8](repeating: 0, count: 256)
            while true {
                let n = read(fd, &chunk, chunk.count)
                if n <= 0 { break }
                bytes += chunk[..<n]
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        let ends = try #require(closeOnExecPipe())
        let readEnd = UnixFileDescriptor(taking: ends.read)
        var call = DBusMessage.methodCall(destination: server.uniqueName, path: "/", interface: "org.example.Test",
                                          member: "Take", body: [.unixFD(0)])
        call.fileDescriptors = [UnixFileDescriptor(taking: ends.write)]
        let reply = try client.call(call)
        call.fileDescriptors = []  // our copy of the write end closed: the server's is the last one
        #expect(reply.body.first == .string("here"))
        let answered = try #require(reply.fileDescriptor(reply.body[1]))
        #expect(readAll(answered.fd) == "answered\n")
        #expect(reply.fileDescriptor(.unixFD(1)) == nil)  // an index past the descriptors names none
        // A descriptor for the connection that did not negotiate them: the bus refuses it, the connection lives on.
        var refused = DBusMessage.methodCall(destination: plain.uniqueName, path: "/", interface: "org.example.Test",
                                             member: "Take", body: [.unixFD(0)])
        refused.fileDescriptors = [UnixFileDescriptor(duplicating: 1)!]
        #expect(throws: DBusConnection.ErrorReply.self) { try client.call(refused) }
        let alive = try client.call(.methodCall(destination: plain.uniqueName, path: "/", interface: "org.example.Test",
                                                member: "Ping"))
        #expect(alive.body == [.string("alive")])
        // And one without: nothing to send them on.
        #expect(throws: DBusConnection.Failure.self) { try plain.send(refused) }
        server.close()
        #expect(readAll(readEnd.fd) == "written by the server\n")
        client.close()
        plain.close()
    }

    @Test("a connection that cannot reach a bus says why")
    func noBus() {
        #expect(throws: DBusConnection.Failure.self) { try DBusConnection(address: "unix:path=/nonexistent/bus") }
        #expect(throws: DBusConnection.Failure.self) { try DBusConnection(address: "tcp:host=localhost,port=1") }
        #expect(throws: DBusConnection.Failure.self) { try DBusConnection.sessionBus(environment: [:]) }
    }
}
