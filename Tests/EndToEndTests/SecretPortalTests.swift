import Foundation
import KeychainDBus
import KeychainInterface
import KeychainTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// This test process: the stand-in for xdg-desktop-portal.
private let thisProgram = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path

/// The Secret portal's backend (`org.freedesktop.impl.portal.Secret`), called as xdg-desktop-portal calls it: this
/// test process stands in for the portal (keychaind is told its path in `KEYCHAIN_PORTAL_PROGRAM`, which it takes only
/// when root alone can change that file, as in CI).
@Suite("Secret portal backend", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")
           && ProtectedPath.isProtected(thisProgram)))
struct SecretPortalTests {
    typealias Desktop = SecretServiceTests.Desktop

    /// RetrieveSecret's answer and what came through the descriptor; an error reply is thrown.
    struct NoResponse: Error {}

    struct Retrieved {
        var response: UInt32
        var secret: [UInt8]
    }

    static func retrieve(_ bus: DBusConnection, appID: DBusValue = .string("org.example.App"),
                         body: [DBusValue]? = nil, sendDescriptor: Bool = true) throws -> Retrieved {
        let ends = try #require(closeOnExecPipe())
        let reader = UnixFileDescriptor(taking: ends.read)
        var call = DBusMessage.methodCall(
            destination: "org.freedesktop.secrets", path: "/org/freedesktop/portal/desktop",
            interface: "org.freedesktop.impl.portal.Secret", member: "RetrieveSecret",
            body: body ?? [.objectPath("/org/freedesktop/portal/desktop/request/1_2/t"), appID, .unixFD(0),
                           .dictionary(keySignature: "s", valueSignature: "v", [])])
        call.fileDescriptors = sendDescriptor ? [UnixFileDescriptor(taking: ends.write)] : []
        if !sendDescriptor { close(ends.write) }
        let reply = Result { try bus.call(call) }
        call.fileDescriptors = []  // ours closed: the daemon's copy is the last writer
        let answer = try reply.get()
        var secret: [UInt8] = [], chunk = [UInt8](repeating: 0, count: 256)
        while true {
            let n = read(reader.fd, &chunk, chunk.count)
            if n <= 0 { break }
            secret += chunk[..<n]
        }
        guard case .uint32(let response)? = answer.body.first else { throw NoResponse() }
        return Retrieved(response: response, secret: secret)
    }

    static func portalEnvironment() -> [String: String] { ["KEYCHAIN_PORTAL_PROGRAM": thisProgram] }

    @Test("two applications get different secrets of 64 bytes; one application the same one, also after keychaind restarts")
    func perApplicationSecrets() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon(settings: Self.portalEnvironment()) == "ready")
        #expect(try desktop.run("security", "create-keychain", "-p", "pw", "login").status == 0)
        let bus = try DBusConnection(address: desktop.address, fileDescriptors: true)
        defer { bus.close() }
        let first = try Self.retrieve(bus, appID: .string("org.example.Mail"))
        #expect(first.response == 0)
        #expect(first.secret.count == 64)
        let other = try Self.retrieve(bus, appID: .string("org.example.Chat"))
        #expect(other.response == 0 && other.secret.count == 64 && other.secret != first.secret)
        #expect(try Self.retrieve(bus, appID: .string("org.example.Mail")).secret == first.secret)

        // Kept in the login keychain, listed as what it is; keychaind's next run hands out the same one.
        let listed = try desktop.run("security", "dump-keychain", "login")
        #expect(listed.stdout.contains("\"org.example.Mail (Secret portal)\""))
        #expect(listed.stdout.contains("org.freedesktop.portal.Secret"))
        desktop.stopDaemon()
        #expect(try desktop.startDaemon(settings: Self.portalEnvironment()) == "ready")
        #expect(try desktop.run("security", "unlock-keychain", "-p", "pw", "login").status == 0)
        let again = try DBusConnection(address: desktop.address, fileDescriptors: true)
        defer { again.close() }
        #expect(try Self.retrieve(again, appID: .string("org.example.Mail")).secret == first.secret)
    }

    @Test("only the portal may ask: another program naming an application gets AccessDenied and no byte")
    func onlyThePortal() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")  // no KEYCHAIN_PORTAL_PROGRAM: this process is not the portal
        #expect(try desktop.run("security", "create-keychain", "-p", "pw", "login").status == 0)
        let bus = try DBusConnection(address: desktop.address, fileDescriptors: true)
        defer { bus.close() }
        #expect {
            try Self.retrieve(bus)
        } throws: { error in
            (error as? DBusConnection.ErrorReply)?.name == "org.freedesktop.DBus.Error.AccessDenied"
        }
        // Nothing was made for it either: the portal's first request later makes the secret.
        #expect(try desktop.run("security", "find-generic-password", "-s", "org.freedesktop.portal.Secret").status == 44)
    }

    @Test("bad arguments are D-Bus errors: wrong types, no descriptor, an id that is no application's; the service stays")
    func badArguments() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon(settings: Self.portalEnvironment()) == "ready")
        #expect(try desktop.run("security", "create-keychain", "-p", "pw", "login").status == 0)
        let bus = try DBusConnection(address: desktop.address, fileDescriptors: true)
        defer { bus.close() }
        func errorName(_ work: () throws -> Retrieved) -> String? {
            do {
                _ = try work()
                return nil
            } catch let error as DBusConnection.ErrorReply {
                return error.name
            } catch {
                return "\(error)"
            }
        }
        let invalid = "org.freedesktop.DBus.Error.InvalidArgs"
        #expect(errorName { try Self.retrieve(bus, body: [.string("not a path"), .string("org.example.App")]) } == invalid)
        #expect(errorName { try Self.retrieve(bus, appID: .string("")) } == invalid)  // a host program: no application
        #expect(errorName { try Self.retrieve(bus, appID: .string("no-dots")) } == invalid)
        #expect(errorName { try Self.retrieve(bus, appID: .string("org.example.9lives")) } == invalid)
        #expect(errorName { try Self.retrieve(bus, sendDescriptor: false) } == invalid)
        // Still serving, and the version property as the portal reads it.
        let version = try bus.call(.methodCall(destination: "org.freedesktop.secrets", path: "/org/freedesktop/portal/desktop",
                                               interface: "org.freedesktop.DBus.Properties", member: "Get",
                                               body: [.string("org.freedesktop.impl.portal.Secret"), .string("version")]))
        #expect(version.body.first == .variant(.uint32(1)))
        #expect(try Self.retrieve(bus).response == 0)
    }

    @Test("a login keychain not unlocked since keychaind started: with nobody to ask, response 2 at once and no byte; after an unlock, the secret")
    func lockedLoginKeychain() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon(settings: Self.portalEnvironment()) == "ready")
        #expect(try desktop.run("security", "create-keychain", "-p", "pw", "login").status == 0)
        desktop.stopDaemon()  // its keys go with it: the next one has never had the keychain unlocked
        #expect(try desktop.startDaemon(settings: Self.portalEnvironment()) == "ready")
        let bus = try DBusConnection(address: desktop.address, fileDescriptors: true)
        defer { bus.close() }
        let locked = try Self.retrieve(bus)
        #expect(locked.response == 2 && locked.secret.isEmpty)
        #expect(try desktop.run("security", "unlock-keychain", "-p", "pw", "login").status == 0)
        let open = try Self.retrieve(bus)
        #expect(open.response == 0 && open.secret.count == 64)
    }

    @Test("no program plants an application's secret: its own item of that service and account stays apart, and the group is not writable")
    func noPlanting() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon(settings: Self.portalEnvironment()) == "ready")
        #expect(try desktop.run("security", "create-keychain", "-p", "pw", "login").status == 0)
        // A program stores "its" secret for the application first, with the portal's service and the app id.
        #expect(try desktop.run("keychain-example", "set", "org.freedesktop.portal.Secret", "org.example.Mail",
                                stdin: "planted-by-someone").status == 0)
        let bus = try DBusConnection(address: desktop.address, fileDescriptors: true)
        defer { bus.close() }
        let retrieved = try Self.retrieve(bus, appID: .string("org.example.Mail"))
        #expect(retrieved.response == 0 && retrieved.secret.count == 64)
        #expect(retrieved.secret != Array("planted-by-someone".utf8))
    }
}
