import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A private message bus for one test, as `dbus-run-session` starts one: `address` is its bus address.
public final class PrivateSessionBus {
    private let process = Process()
    public let address: String

    public init() throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--session", "--nofork", "--print-address=1", "--nopidfile"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice  // it complains about fd limits it cannot raise
        try process.run()
        var line = Data()
        while !line.contains(0x0A) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        address = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        // SIGKILL: a child of the test runner may start with SIGTERM blocked (inherited from a runner thread).
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
