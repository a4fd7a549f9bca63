import Foundation
import KeychainDBus
import KeychainTestSupport
import Testing

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

    @Test("a connection that cannot reach a bus says why")
    func noBus() {
        #expect(throws: DBusConnection.Failure.self) { try DBusConnection(address: "unix:path=/nonexistent/bus") }
        #expect(throws: DBusConnection.Failure.self) { try DBusConnection(address: "tcp:host=localhost,port=1") }
        #expect(throws: DBusConnection.Failure.self) { try DBusConnection.sessionBus(environment: [:]) }
    }
}
