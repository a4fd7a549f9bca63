import Foundation
import KeychainDBus
import KeychainInterface
import KeychainTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the real portal's tests need: Debian's xdg-desktop-portal (1.16 in bookworm), bubblewrap, dbus-daemon and
/// Debian's Python with jeepney (python3-jeepney) for the application in the sandbox. Root, as CI runs them: bwrap
/// makes its namespaces as root there, where a container need not allow unprivileged user namespaces.
private enum RealPortal {
    static let program = "/usr/libexec/xdg-desktop-portal"
    static let bubblewrap = "/usr/bin/bwrap"
    static let python = "/usr/bin/python3"
    static var available: Bool {
        geteuid() == 0
            && [program, bubblewrap, "/usr/bin/dbus-daemon", "/usr/bin/timeout"].allSatisfy {
                FileManager.default.isExecutableFile(atPath: $0)
            }
            && (try? ChildProcess.run(python, arguments: ["-c", "import jeepney"]))?.termination == .exited(0)
    }

    /// The application's side, as libsecret in a Flatpak asks: the Request's Response subscribed to first, then
    /// `org.freedesktop.portal.Secret.RetrieveSecret(h fd, a{sv} {handle_token})` on the portal with a pipe's write end.
    /// Prints `{"response": N, "secret": HEX}`, or `{"error": NAME}` when the portal refused the call. keychaind writes
    /// the secret before it replies, and the portal sends Response after that reply, so the bytes are in the pipe by
    /// then; they are read without waiting for the end of the pipe, which never comes (the portal keeps a copy of the
    /// write end).
    static let client = #"""
        import json, os, sys
        from jeepney import DBusAddress, MatchRule, MessageType, new_method_call
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection
        from jeepney.low_level import HeaderFields
        connection = open_dbus_connection(bus="SESSION", enable_fds=True)
        token = "kc%d" % os.getpid()
        request = "/org/freedesktop/portal/desktop/request/%s/%s" % (connection.unique_name[1:].replace(".", "_"), token)
        response_rule = MatchRule(type="signal", interface="org.freedesktop.portal.Request", member="Response", path=request)
        connection.send_and_get_reply(message_bus.AddMatch(response_rule))
        read_end, write_end = os.pipe()
        portal = DBusAddress("/org/freedesktop/portal/desktop", bus_name="org.freedesktop.portal.Desktop",
                             interface="org.freedesktop.portal.Secret")
        with connection.filter(response_rule) as responses:
            call = new_method_call(portal, "RetrieveSecret", "ha{sv}", (write_end, {"handle_token": ("s", token)}))
            reply = connection.send_and_get_reply(call, timeout=20)
            os.close(write_end)
            if reply.header.message_type == MessageType.error:
                print(json.dumps({"error": reply.header.fields[HeaderFields.error_name]}))
                sys.exit(0)
            response = connection.recv_until_filtered(responses, timeout=20).body[0]
        os.set_blocking(read_end, False)
        secret = b""
        while len(secret) < 64:
            try:
                chunk = os.read(read_end, 64 - len(secret))
            except BlockingIOError:
                break
            if not chunk:
                break
            secret += chunk
        print(json.dumps({"response": response, "secret": secret.hex()}))
        """#
}

/// keychaind with --secret-service on a private bus that starts nothing by itself (the stock configuration would
/// start the machine's own portals), a login keychain made with the password `pw` (so open in this keychaind: the
/// secret is given without asking anyone), and the real xdg-desktop-portal on that bus, which finds keychaind as the
/// Secret portal's backend through contrib's keychain.portal. Everything started here ends with it.
private final class PortalSession {
    /// The bus's socket in a directory of its own (the one given to each sandbox), keychain.portal, the client, the
    /// portal's log.
    let directory: URL
    let desktop: SecretServiceTests.Desktop
    private var portal: ChildProcess?

    var socketDirectory: URL { directory.appendingPathComponent("bus") }
    var portals: URL { directory.appendingPathComponent("portals") }
    var clientScript: URL { directory.appendingPathComponent("client.py") }
    var portalLog: URL { directory.appendingPathComponent("xdg-desktop-portal.log") }
    var portalOutput: String { (try? String(contentsOf: portalLog, encoding: .utf8)) ?? "" }

    struct Answer: Decodable {
        var response: UInt32?
        var secret: String?
        var error: String?
    }

    struct Failed: Error, CustomStringConvertible {
        let description: String
    }

    init() throws {
        // In /tmp, not $TMPDIR: the socket's path must stay within a socket address's 108 bytes.
        let directory = URL(fileURLWithPath: "/tmp/kc-real-portal-\(UUID().uuidString)")
        let desktop: SecretServiceTests.Desktop
        do {
            for name in ["bus", "portals"] {
                try FileManager.default.createDirectory(at: directory.appendingPathComponent(name),
                                                        withIntermediateDirectories: true)
            }
            try FileManager.default.copyItem(
                at: Built.packageRoot.appendingPathComponent("contrib/xdg-desktop-portal/keychain.portal"),
                to: directory.appendingPathComponent("portals/keychain.portal"))
            try Data(RealPortal.client.utf8).write(to: directory.appendingPathComponent("client.py"))
            let bus = try PrivateSessionBus(socket: directory.appendingPathComponent("bus/socket").path,
                                            serviceActivation: false)
            desktop = try SecretServiceTests.Desktop(bus: bus)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        self.directory = directory
        self.desktop = desktop
    }

    deinit {
        if let portal {
            portal.send(SIGKILL)
            _ = portal.wait()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts keychaind, makes the login keychain, then starts the portal and waits until it owns its bus name.
    func start() throws {
        try #require(try desktop.startDaemon() == "ready")
        try #require(try desktop.run("security", "create-keychain", "-p", "pw", "login").status == 0)
        // A clean environment, as a user's service manager gives the portal. It reads its backends from
        // XDG_DESKTOP_PORTAL_DIR and takes keychain.portal for this desktop (UseIn=swift-keychain).
        var environment = ["PATH": "/usr/bin:/bin", "DBUS_SESSION_BUS_ADDRESS": desktop.address,
                           "XDG_DESKTOP_PORTAL_DIR": portals.path, "XDG_CURRENT_DESKTOP": "swift-keychain"]
        for name in ["HOME", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME"] {
            environment[name] = desktop.environment[name]
        }
        let log = open(portalLog.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { if log >= 0 { close(log) } }
        let portal = try ChildProcess.spawn(RealPortal.program, arguments: [], environment: environment,
                                            stderr: log >= 0 ? log : nil)
        self.portal = portal
        // NameHasOwner starts nothing; the portal takes its name once its interfaces are on the bus.
        let bus = try DBusConnection(address: desktop.address)
        defer { bus.close() }
        for _ in 0..<500 {
            let owned = try bus.call(.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "NameHasOwner", body: [.string("org.freedesktop.portal.Desktop")]))
            if owned.body.first == .boolean(true) { return }
            if isZombie(portal.pid) { break }
            usleep(20_000)
        }
        throw Failed(description: "xdg-desktop-portal did not take org.freedesktop.portal.Desktop: \(portalOutput)")
    }

    /// RetrieveSecret from a bubblewrap sandbox whose /.flatpak-info names `appID`, given as Flatpak gives it
    /// (read-only data from a descriptor): the portal reads the application's id there, through /proc/PID/root.
    func retrieveInSandbox(appID: String) throws -> Answer {
        let arguments = [
            "30", RealPortal.bubblewrap, "--unshare-all", "--die-with-parent",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--ro-bind", clientScript.path, "/app/client.py",
            "--bind", socketDirectory.path, "/run/bus-dir",
            "--setenv", "DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/bus-dir/socket",
            "--ro-bind-data", "0", "/.flatpak-info",
            RealPortal.python, "/app/client.py",
        ]
        return try answer(ChildProcess.run("/usr/bin/timeout", arguments: arguments, environment: ["PATH": "/usr/bin:/bin"],
                                           input: Data("[Application]\nname=\(appID)\n".utf8)))
    }

    /// RetrieveSecret from a program outside any sandbox, through the same portal.
    func retrieveUnsandboxed() throws -> Answer {
        try answer(ChildProcess.run("/usr/bin/timeout", arguments: ["30", RealPortal.python, clientScript.path],
                                    environment: ["PATH": "/usr/bin:/bin", "DBUS_SESSION_BUS_ADDRESS": desktop.address]))
    }

    private func answer(_ output: ChildProcess.Output) throws -> Answer {
        guard output.termination == .exited(0) else {
            throw Failed(description: "the client ended \(output.termination): "
                + "\(String(decoding: output.stderr, as: UTF8.self))\nxdg-desktop-portal: \(portalOutput)")
        }
        return try JSONDecoder().decode(Answer.self, from: output.stdout)
    }
}

/// The Secret portal end to end: the real xdg-desktop-portal between keychaind and an application in a bubblewrap
/// sandbox with a /.flatpak-info as Flatpak makes it. The portal, not the caller, says which application asks.
@Suite("Secret portal, through the real xdg-desktop-portal from a bubblewrap sandbox", .serialized,
       .enabled(if: RealPortal.available))
struct RealPortalTests {
    @Test("a sandboxed application gets 64 bytes of its own, the same ones each time and after keychaind restarts; another application others")
    func sandboxedApplications() throws {
        let session = try PortalSession()
        try session.start()
        let first = try session.retrieveInSandbox(appID: "org.example.App")
        #expect(first.error == nil && first.response == 0, "\(first) \(session.portalOutput)")
        let secret = try #require(first.secret)
        #expect(secret.count == 128)  // hex of 64 bytes
        #expect(try session.retrieveInSandbox(appID: "org.example.App").secret == secret)
        let other = try session.retrieveInSandbox(appID: "org.example.Other")
        #expect(other.response == 0 && other.secret?.count == 128 && other.secret != secret)

        // Kept in the login keychain, one item per application id the portal named.
        for application in ["org.example.App", "org.example.Other"] {
            let found = try session.desktop.run("security", "find-generic-password", "-s", "org.freedesktop.portal.Secret",
                                                "-a", application)
            #expect(found.status == 0, "\(application): \(found.stderr)")
        }

        // keychaind's next run, the portal still running: locked until the login keychain is unlocked (nobody to ask:
        // response 2), then the same secret.
        session.desktop.stopDaemon()
        #expect(try session.desktop.startDaemon() == "ready")
        let locked = try session.retrieveInSandbox(appID: "org.example.App")
        #expect(locked.response == 2 && locked.secret == "")
        #expect(try session.desktop.run("security", "unlock-keychain", "-p", "pw", "login").status == 0)
        #expect(try session.retrieveInSandbox(appID: "org.example.App").secret == secret)
    }

    @Test("a program outside any sandbox: the portal names no application (\"\"), keychaind refuses it, the portal answers 2 and no byte")
    func unsandboxedProgram() throws {
        let session = try PortalSession()
        try session.start()
        let refused = try session.retrieveUnsandboxed()
        #expect(refused.error == nil && refused.response == 2 && refused.secret == "", "\(refused)")
        // The portal turned keychaind's InvalidArgs into that response, and logged it.
        #expect(session.portalOutput.contains("is not a sandboxed application's id"), "\(session.portalOutput)")
        // Nothing was made; and the portal and keychaind go on serving sandboxed applications.
        #expect(try session.desktop.run("security", "find-generic-password", "-s", "org.freedesktop.portal.Secret").status == 44)
        #expect(try session.retrieveInSandbox(appID: "org.example.App").response == 0)
    }
}
