import Foundation
import KeychainDBus
import KeychainInterface
import KeychainTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A stand-in for xdg-desktop-portal: Debian's Python copied into a directory of root's under the portal's name (so
/// keychaind's rule, a root-owned program named xdg-desktop-portal, holds for it), running a script that takes the
/// portal's bus name and calls RetrieveSecret as the portal does, with jeepney (python3-jeepney). Needs root.
private enum PortalStandIn {
    static let python = "/usr/bin/python3"
    static var available: Bool {
        geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")
            && (try? ChildProcess.run(python, arguments: ["-c", "import jeepney"]))?.termination == .exited(0)
    }

    /// The script: `xdg-desktop-portal SCRIPT ADDRESS APP_ID [--no-name] [--close DIR]` prints
    /// `{"response": N, "secret": HEX}` or `{"error": NAME}`. With `--close`, the portal closes its request once
    /// DIR/close-now appears (with "closeError": the error's name, or null), then makes DIR/go and waits for the answer.
    static let script = #"""
    import json, os, sys, time
    from jeepney import DBusAddress, MessageType, new_method_call
    from jeepney.bus_messages import message_bus
    from jeepney.io.blocking import open_dbus_connection
    from jeepney.low_level import HeaderFields
    address, app_id = sys.argv[1], sys.argv[2]
    connection = open_dbus_connection(bus=address, enable_fds=True)
    if "--no-name" not in sys.argv:
        connection.send_and_get_reply(message_bus.RequestName("org.freedesktop.portal.Desktop", 4))
    read_end, write_end = os.pipe()
    portal = DBusAddress("/org/freedesktop/portal/desktop", bus_name="org.freedesktop.secrets",
                         interface="org.freedesktop.impl.portal.Secret")
    call = new_method_call(portal, "RetrieveSecret", "osha{sv}",
                           ("/org/freedesktop/portal/desktop/request/1_2/t", app_id, write_end, {}))
    close_error = None
    if "--close" in sys.argv:
        directory = sys.argv[sys.argv.index("--close") + 1]
        connection.send(call, serial=1000)
        for _ in range(300):
            if os.path.exists(os.path.join(directory, "close-now")):
                break
            time.sleep(0.1)
        request = DBusAddress("/org/freedesktop/portal/desktop/request/1_2/t", bus_name="org.freedesktop.secrets",
                              interface="org.freedesktop.impl.portal.Request")
        connection.send(new_method_call(request, "Close"), serial=1001)
        replies = {}
        while 1000 not in replies:
            message = connection.receive(timeout=30)
            serial = message.header.fields.get(HeaderFields.reply_serial)
            if serial is not None:
                replies[serial] = message
            if serial == 1001:
                if message.header.message_type == MessageType.error:
                    close_error = message.header.fields[HeaderFields.error_name]
                open(os.path.join(directory, "go"), "w").close()
        reply = replies[1000]
    else:
        reply = connection.send_and_get_reply(call, timeout=30)
    os.close(write_end)
    secret = b""
    while True:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        secret += chunk
    if reply.header.message_type == MessageType.error:
        print(json.dumps({"error": reply.header.fields[HeaderFields.error_name]}))
    else:
        print(json.dumps({"response": reply.body[0], "secret": secret.hex(), "closeError": close_error}))
    """#

    /// The directory of root's with the program and the script; removed by `cleanUp`.
    final class Installed: Sendable {
        let directory = URL(fileURLWithPath: "/tmp/kc-portal-\(UUID().uuidString)")
        var program: String { directory.appendingPathComponent("xdg-desktop-portal").path }
        var scriptPath: String { directory.appendingPathComponent("retrieve.py").path }

        init() throws {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false,
                                                    attributes: [.posixPermissions: 0o755])
            let real = URL(fileURLWithPath: PortalStandIn.python).resolvingSymlinksInPath().path
            try FileManager.default.copyItem(atPath: real, toPath: program)
            chmod(program, 0o755)
            try Data(PortalStandIn.script.utf8).write(to: URL(fileURLWithPath: scriptPath))
        }

        deinit { try? FileManager.default.removeItem(at: directory) }

        struct Answer: Decodable, Sendable {
            var response: UInt32?
            var secret: String?
            var error: String?
            var closeError: String?
        }

        func retrieve(address: String, appID: String, takingName: Bool = true, closingWith control: URL? = nil) throws -> Answer {
            let options = (takingName ? [] : ["--no-name"]) + (control.map { ["--close", $0.path] } ?? [])
            let output = try ChildProcess.run(program, arguments: [scriptPath, address, appID] + options,
                                              environment: ["PATH": "/usr/bin:/bin"])
            guard output.termination == .exited(0) else {
                throw StandInFailed(description: String(decoding: output.stderr, as: UTF8.self))
            }
            return try JSONDecoder().decode(Answer.self, from: output.stdout)
        }
    }

    struct StandInFailed: Error, CustomStringConvertible {
        let description: String
    }
}

/// The Secret portal's backend (`org.freedesktop.impl.portal.Secret`), called as xdg-desktop-portal calls it, by the
/// stand-in above; and by this test process, which is not the portal.
@Suite("Secret portal backend", .serialized, .enabled(if: PortalStandIn.available))
struct SecretPortalTests {
    typealias Desktop = SecretServiceTests.Desktop

    /// A call from this test process (not the portal): the D-Bus error's name, or nil when it was answered.
    static func errorFromThisProcess(_ bus: DBusConnection, body: [DBusValue], sendDescriptor: Bool) -> String? {
        guard let ends = closeOnExecPipe() else { return "no pipe" }
        let reader = UnixFileDescriptor(taking: ends.read)
        defer { reader.close() }
        var call = DBusMessage.methodCall(
            destination: "org.freedesktop.secrets", path: "/org/freedesktop/portal/desktop",
            interface: "org.freedesktop.impl.portal.Secret", member: "RetrieveSecret", body: body)
        call.fileDescriptors = sendDescriptor ? [UnixFileDescriptor(taking: ends.write)] : []
        if !sendDescriptor { close(ends.write) }
        do {
            _ = try bus.call(call)
            return nil
        } catch let error as DBusConnection.ErrorReply {
            return error.name
        } catch {
            return "\(error)"
        }
    }

    /// A private session bus with keychaind serving it, a login keychain with the password `pw`, and the stand-in.
    fileprivate static func portalDesktop() throws -> (Desktop, PortalStandIn.Installed) {
        let desktop = try Desktop()
        let portal = try PortalStandIn.Installed()
        #expect(try desktop.startDaemon() == "ready")
        #expect(try desktop.run("security", "create-keychain", "-p", "pw", "login").status == 0)
        return (desktop, portal)
    }

    static let request = DBusValue.objectPath("/org/freedesktop/portal/desktop/request/1_2/t")
    static let noOptions = DBusValue.dictionary(keySignature: "s", valueSignature: "v", [])

    @Test("two applications get different secrets of 64 bytes; one application the same one, also after keychaind restarts")
    func perApplicationSecrets() throws {
        let (desktop, portal) = try Self.portalDesktop()
        let first = try portal.retrieve(address: desktop.address, appID: "org.example.Mail")
        #expect(first.response == 0)
        #expect(first.secret?.count == 128)  // hex of 64 bytes
        let other = try portal.retrieve(address: desktop.address, appID: "org.example.Chat")
        #expect(other.response == 0 && other.secret?.count == 128 && other.secret != first.secret)
        #expect(try portal.retrieve(address: desktop.address, appID: "org.example.Mail").secret == first.secret)

        // Kept in the login keychain, listed as what it is; keychaind's next run hands out the same one.
        let listed = try desktop.run("security", "dump-keychain", "login")
        #expect(listed.stdout.contains("\"org.example.Mail (Secret portal)\""))
        #expect(listed.stdout.contains("org.freedesktop.portal.Secret"))
        desktop.stopDaemon()
        #expect(try desktop.startDaemon() == "ready")
        #expect(try desktop.run("security", "unlock-keychain", "-p", "pw", "login").status == 0)
        #expect(try portal.retrieve(address: desktop.address, appID: "org.example.Mail").secret == first.secret)
    }

    @Test("only the portal may ask: another program, or the portal's program on a connection that does not own the portal's name, gets AccessDenied and no byte")
    func onlyThePortal() throws {
        let (desktop, portal) = try Self.portalDesktop()
        let bus = try DBusConnection(address: desktop.address, fileDescriptors: true)
        defer { bus.close() }
        let denied = "org.freedesktop.DBus.Error.AccessDenied"
        #expect(Self.errorFromThisProcess(bus, body: [Self.request, .string("org.example.App"), .unixFD(0), Self.noOptions],
                                          sendDescriptor: true) == denied)
        // The portal's program, but its connection is not the portal's (as after a connect, fork and exec of it).
        let unnamed = try portal.retrieve(address: desktop.address, appID: "org.example.App", takingName: false)
        #expect(unnamed.error == denied && unnamed.secret == nil)
        // Nothing was made for either: the portal's first request later makes the secret.
        #expect(try desktop.run("security", "find-generic-password", "-s", "org.freedesktop.portal.Secret").status == 44)
    }

    @Test("bad arguments are D-Bus errors: wrong types, no descriptor, an id that is no application's; the service stays")
    func badArguments() throws {
        let (desktop, portal) = try Self.portalDesktop()
        let bus = try DBusConnection(address: desktop.address, fileDescriptors: true)
        defer { bus.close() }
        let invalid = "org.freedesktop.DBus.Error.InvalidArgs"
        #expect(Self.errorFromThisProcess(bus, body: [.string("not a path"), .string("org.example.App")],
                                          sendDescriptor: false) == invalid)
        #expect(Self.errorFromThisProcess(bus, body: [Self.request, .string("org.example.App"), .unixFD(0), Self.noOptions],
                                          sendDescriptor: false) == invalid)
        for notAnApplication in ["", "no-dots", "org.example.9lives", "org..example"] {  // "": a program outside a sandbox
            #expect(try portal.retrieve(address: desktop.address, appID: notAnApplication).error == invalid, "\(notAnApplication)")
        }
        // Still serving, and the version property as the portal reads it.
        let version = try bus.call(.methodCall(destination: "org.freedesktop.secrets", path: "/org/freedesktop/portal/desktop",
                                               interface: "org.freedesktop.DBus.Properties", member: "Get",
                                               body: [.string("org.freedesktop.impl.portal.Secret"), .string("version")]))
        #expect(version.body.first == .variant(.uint32(1)))
        #expect(try portal.retrieve(address: desktop.address, appID: "org.example.App").response == 0)
    }

    @Test("a login keychain not unlocked since keychaind started: with nobody to ask, response 2 at once and no byte; after an unlock, the secret")
    func lockedLoginKeychain() throws {
        let (desktop, portal) = try Self.portalDesktop()
        desktop.stopDaemon()  // its keys go with it: the next one has never had the keychain unlocked
        #expect(try desktop.startDaemon() == "ready")
        let locked = try portal.retrieve(address: desktop.address, appID: "org.example.App")
        #expect(locked.response == 2 && locked.secret == "")
        #expect(try desktop.run("security", "unlock-keychain", "-p", "pw", "login").status == 0)
        let open = try portal.retrieve(address: desktop.address, appID: "org.example.App")
        #expect(open.response == 0 && open.secret?.count == 128)
    }

    @Test("no program plants an application's secret: its own item of that service and account stays apart")
    func noPlanting() throws {
        let (desktop, portal) = try Self.portalDesktop()
        // A program stores "its" secret for the application first, with the portal's service and the app id.
        #expect(try desktop.run("keychain-example", "set", "org.freedesktop.portal.Secret", "org.example.Mail",
                                stdin: "planted-by-someone").status == 0)
        let retrieved = try portal.retrieve(address: desktop.address, appID: "org.example.Mail")
        #expect(retrieved.response == 0 && retrieved.secret?.count == 128)
        #expect(retrieved.secret != Data("planted-by-someone".utf8).map { String(format: "%02x", $0) }.joined())
    }

    @Test("the login keychain at its standard place, whatever the preferences say: a keychain whose password a program knows is not used")
    func standardLoginKeychainOnly() throws {
        let (desktop, portal) = try Self.portalDesktop()
        #expect(try desktop.run("security", "create-keychain", "-p", "known", "other").status == 0)
        #expect(try desktop.run("security", "login-keychain", "-s", "other").status == 0)
        #expect(try portal.retrieve(address: desktop.address, appID: "org.example.Mail").response == 0)
        #expect(try desktop.run("security", "dump-keychain", "other").stdout.contains("Secret portal") == false)
        #expect(try desktop.run("security", "dump-keychain", "login").stdout.contains("org.example.Mail (Secret portal)"))
    }

    @Test("the portal closes a request while the login keychain's password is asked for: response 1 and no byte; the password typed into the question still unlocks; no other connection can close it")
    func closedWhileAsking() throws {
        let desktop = try Desktop()
        let portal = try PortalStandIn.Installed()
        let pinentry = try DaemonTests.ScriptedPinentry(in: desktop.home.tool.home)
        let asking = ["PINENTRY_PROGRAM": pinentry.program.path, "DISPLAY": ":kc-test"]
        #expect(try desktop.startDaemon(settings: asking) == "ready")
        #expect(try desktop.run("security", "create-keychain", "-p", "pw", "login").status == 0)
        desktop.stopDaemon()  // the next keychaind has never had the login keychain unlocked
        #expect(try desktop.startDaemon(settings: asking) == "ready")

        // The question stays up until the portal has closed its request; then the right password comes.
        let control = desktop.home.tool.home.appendingPathComponent("portal-control")
        try FileManager.default.createDirectory(at: control, withIntermediateDirectories: true)
        try pinentry.answer("hold:\(control.appendingPathComponent("go").path)", "pin:pw")
        let answer = Mutex<Result<PortalStandIn.Installed.Answer, any Error>?>(nil)
        let address = desktop.address
        let caller = Thread {
            let result = Result { try portal.retrieve(address: address, appID: "org.example.Mail", closingWith: control) }
            answer.withLock { $0 = result }
        }
        caller.start()
        let deadline = Date().addingTimeInterval(15)
        while pinentry.passwordRequests == 0 && Date() < deadline { usleep(50_000) }
        #expect(pinentry.passwordRequests == 1)

        // Another connection finds no request at the portal's handle.
        let bus = try DBusConnection(address: desktop.address)
        defer { bus.close() }
        var close = DBusMessage.methodCall(destination: "org.freedesktop.secrets", path: "/org/freedesktop/portal/desktop/request/1_2/t",
                                           interface: "org.freedesktop.impl.portal.Request", member: "Close", body: [])
        close.flags.remove(.noReplyExpected)
        #expect {
            _ = try bus.call(close)
        } throws: { error in
            (error as? DBusConnection.ErrorReply)?.name == "org.freedesktop.DBus.Error.UnknownObject"
        }

        #expect(FileManager.default.createFile(atPath: control.appendingPathComponent("close-now").path, contents: Data()))
        while answer.withLock({ $0 == nil }) && Date() < deadline.addingTimeInterval(30) { usleep(50_000) }
        let closed = try #require(try answer.withLock { $0 }?.get())
        #expect(closed.closeError == nil)
        #expect(closed.response == 1 && closed.secret == "")

        // The password the user typed after the close unlocked the keychain: the application's next call gets its
        // secret without a second question.
        let delivered = try portal.retrieve(address: desktop.address, appID: "org.example.Mail")
        #expect(delivered.response == 0 && delivered.secret?.count == 128)
        #expect(pinentry.passwordRequests == 1)
    }
}
