import Foundation
import KeychainDBus
import KeychainTestSupport
import Testing

@Suite("D-Bus marshalling")
struct DBusMarshallingTests {
    /// A message using every type, nested: what the Secret Service exchanges and more.
    static let sample: DBusMessage = {
        var message = DBusMessage.methodCall(
            destination: "org.freedesktop.secrets", path: "/org/freedesktop/secrets/collection/login",
            interface: "org.freedesktop.Secret.Collection", member: "CreateItem",
            body: [
                .dictionary(keySignature: "s", valueSignature: "v", [
                    .init(.string("org.freedesktop.Secret.Item.Label"), .variant(.string("Ünïcödé label"))),
                    .init(.string("org.freedesktop.Secret.Item.Attributes"),
                          .variant(.stringDictionary(["service": "s", "account": "a", "xdg:schema": "org.example.Password"]))),
                ]),
                .structure([.objectPath("/org/freedesktop/secrets/session/1"), .bytes([1, 2, 3]), .bytes(Array(repeating: 7, count: 300)),
                            .string("text/plain")]),
                .boolean(true),
                .byte(0xFF), .int16(-2), .uint16(65535), .int32(-70000), .uint32(4_000_000_000), .int64(-1 << 40),
                .uint64(1 << 63), .double(-0.5), .signature("a{sv}"), .unixFD(0),
                .array(elementSignature: "o", []), .array(elementSignature: "(yv)", [.structure([.byte(1), .variant(.variant(.uint64(9)))])]),
            ])
        message.sender = ":1.42"
        return message
    }()

    @Test("every type survives encoding and decoding, with the alignment the specification asks")
    func roundTrip() throws {
        let bytes = try Self.sample.encoded(serial: 7)
        #expect(bytes[0] == UInt8(ascii: "l") && bytes[3] == 1)
        #expect(DBusMessage.frameLength(bytes[..<16]) == bytes.count)
        var decoded = try DBusMessage.decode(bytes)
        #expect(decoded.serial == 7)
        decoded.serial = 0
        #expect(decoded == Self.sample)
        #expect(decoded.bodySignature == "a{sv}(oayays)bynqiuxtdghaoa(yv)")
    }

    @Test("a known message: Hello to the bus, byte for byte as the specification lays it out")
    func knownBytes() throws {
        let hello = DBusMessage.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                           interface: "org.freedesktop.DBus", member: "Hello")
        let bytes = try hello.encoded(serial: 1)
        // l, method call, no flags, version 1, body length 0, serial 1, then the fields array's length.
        #expect(Array(bytes[0..<12]) == [0x6C, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0])
        // Field 1 (path): code 1, signature "o", the path with its length and NUL.
        let path = "/org/freedesktop/DBus"
        #expect(Array(bytes[16..<24]) == [1, 1, UInt8(ascii: "o"), 0, UInt8(path.utf8.count), 0, 0, 0])
        #expect(String(decoding: bytes[24..<(24 + path.utf8.count)], as: UTF8.self) == path)
        #expect(bytes.count % 8 == 0)
    }

    @Test("signatures: valid ones split into complete types, invalid ones refused")
    func signatures() throws {
        #expect(try DBusSignature.completeTypes("a{sv}sao(ii)v") == ["a{sv}", "s", "ao", "(ii)", "v"])
        #expect(try DBusSignature.completeTypes("") == [])
        for bad in ["a", "(", "()", "a{vs}", "{ss}", "a{s}", "a{sss}", "z", "(i", String(repeating: "a", count: 33) + "y",
                    String(repeating: "(", count: 33) + "y" + String(repeating: ")", count: 33), String(repeating: "y", count: 256)] {
            #expect(throws: DBusSignature.Invalid.self, "\(bad)") { try DBusSignature.completeTypes(bad) }
        }
    }

    @Test("names and paths as the specification defines them")
    func names() {
        #expect(DBusNames.isValidObjectPath("/"))
        #expect(DBusNames.isValidObjectPath("/org/freedesktop/secrets/collection/login"))
        for bad in ["", "org", "/org/", "//", "/a//b", "/a-b", "/ä"] { #expect(!DBusNames.isValidObjectPath(bad), "\(bad)") }
        #expect(DBusNames.isValidBusName(":1.42") && DBusNames.isValidBusName("org.freedesktop.secrets"))
        #expect(!DBusNames.isValidBusName("org") && !DBusNames.isValidBusName("1org.x") && !DBusNames.isValidBusName("a..b"))
        #expect(DBusNames.isValidInterface("org.freedesktop.Secret.Error.IsLocked") && !DBusNames.isValidInterface("Lock"))
        #expect(DBusNames.isValidMember("GetSecrets") && !DBusNames.isValidMember("9x") && !DBusNames.isValidMember("a.b"))
    }

    @Test("we refuse to send what is malformed: bad names, paths, missing fields")
    func refusesToEncode() {
        #expect(throws: DBusMessage.EncodingError.self) {
            try DBusMessage.methodCall(destination: nil, path: "bad", interface: nil, member: "M").encoded(serial: 1)
        }
        #expect(throws: DBusMessage.EncodingError.self) {
            try DBusMessage.methodCall(destination: nil, path: "/", interface: "nodot", member: "M").encoded(serial: 1)
        }
        #expect(throws: DBusMessage.EncodingError.self) { try DBusMessage(kind: .methodReturn).encoded(serial: 1) }
        #expect(throws: DBusMessage.EncodingError.self) {
            try DBusMessage.methodCall(destination: nil, path: "/", interface: nil, member: "M").encoded(serial: 0)
        }
    }

    @Test("hostile bytes: every truncation, seeded flips, lying lengths and paddings: an error, never a crash")
    func hostile() throws {
        let bytes = try Self.sample.encoded(serial: 3)
        for length in 0..<bytes.count {
            #expect(throws: DBusReader.Malformed.self) { try DBusMessage.decode(Array(bytes[..<length])) }
        }
        var generator = SplitMix64(seed: 0x5EED)
        func next() -> UInt64 { generator.next() }
        for _ in 0..<3000 {
            var mutated = bytes
            for _ in 0..<(1 + Int(next() % 3)) {
                mutated[Int(next() % UInt64(mutated.count))] ^= UInt8(truncatingIfNeeded: next() | 1)
            }
            _ = try? DBusMessage.decode(mutated)  // either way; what matters is that it returns
        }
        // A body length that lies, a non-zero padding byte, a boolean of 2.
        var lying = bytes
        lying[4] &+= 8
        #expect(throws: DBusReader.Malformed.self) { try DBusMessage.decode(lying) }
        let boolean = try DBusMessage.methodCall(destination: nil, path: "/", interface: nil, member: "M", body: [.boolean(true)])
            .encoded(serial: 1)
        var two = boolean
        two[two.count - 4] = 2
        #expect(throws: DBusReader.Malformed.self) { try DBusMessage.decode(two) }
        let aligned = try DBusMessage.methodCall(destination: nil, path: "/", interface: nil, member: "M",
                                                 body: [.byte(1), .uint32(5)]).encoded(serial: 1)
        var padding = aligned
        padding[padding.count - 6] = 9  // a padding byte between the byte and the uint32
        #expect(throws: DBusReader.Malformed.self) { try DBusMessage.decode(padding) }
        #expect(DBusMessage.frameLength([UInt8](repeating: 0xFF, count: 16)[...]) == nil)
    }
}

@Suite("D-Bus messages written by the reference implementation")
struct DBusReferenceMessagesTests {
    /// Messages dbus-daemon and dbus-send put on a bus (captured with `dbus-monitor --binary`; the fuzzer's seeds):
    /// each decodes, and encodes back to a message that decodes the same.
    @Test("every captured message decodes and survives our own encoding")
    func captured() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/corpus/dbus").standardizedFileURL
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix("bus-") }
        #expect(files.count >= 10)
        var members: Set<String> = []
        for file in files {
            let bytes = [UInt8](try Data(contentsOf: directory.appendingPathComponent(file)))
            let message = try DBusMessage.decode(bytes)
            if let member = message.member { members.insert(member) }
            let again = try DBusMessage.decode(try message.encoded(serial: message.serial))
            #expect(again.body == message.body, "\(file)")
            #expect(again.member == message.member && again.path == message.path && again.kind == message.kind)
        }
        #expect(members.contains("Hello") && members.contains("ListNames") && members.contains("Changed"))
    }
}
