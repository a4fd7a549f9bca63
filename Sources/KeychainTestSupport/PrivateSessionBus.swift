import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A private message bus for one test, as `dbus-run-session` starts one: `address` is its bus address.
public final class PrivateSessionBus {
    private let process = Process()
    public let address: String
    /// The configuration written for a bus without service activation; removed with the bus.
    private let configuration: URL?

    /// A bus with the stock session configuration, listening on a new socket in /tmp; or on `socket` (a path whose
    /// directory can be given to a sandbox). `serviceActivation: false` starts nothing for a name nobody owns: the
    /// stock configuration reads the system's service directories, where the machine's xdg-desktop-portal, its
    /// document portal and other services wait to be started.
    public init(socket: String? = nil, serviceActivation: Bool = true) throws {
        var configuration: URL?
        if !serviceActivation {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("kc-bus-\(UUID().uuidString).conf")
            try Data(PrivateSessionBus.configurationWithoutActivation.utf8).write(to: file)
            configuration = file
        }
        self.configuration = configuration
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        var arguments = [configuration.map { "--config-file=\($0.path)" } ?? "--session",
                         "--nofork", "--print-address=1", "--nopidfile"]
        if let socket { arguments.append("--address=unix:path=\(socket)") }
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice  // it complains about fd limits it cannot raise
        do {
            try process.run()
        } catch {
            if let configuration { try? FileManager.default.removeItem(at: configuration) }
            throw error
        }
        var line = Data()
        while !line.contains(0x0A) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        address = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A session bus with no `<servicedir>` and no `<standard_session_servicedirs/>`: nothing is started on demand.
    static let configurationWithoutActivation = """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <keep_umask/>
          <listen>unix:tmpdir=/tmp</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
          <limit name="reply_timeout">300000</limit>
        </busconfig>

        """

    deinit {
        // SIGKILL: a child of the test runner may start with SIGTERM blocked (inherited from a runner thread).
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        if let configuration { try? FileManager.default.removeItem(at: configuration) }
    }
}
