#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

#if canImport(Glibc)
import Glibc
#endif

/// Which keychain service a front end gets: `KEYCHAIN_BACKEND=embedded|daemon|auto` (default auto).
///
/// - `embedded`: the files are opened in this process (`EmbeddedKeychainService`, in KeychainClient).
/// - `daemon`: keychaind (``RemoteKeychainService``), started on demand when none runs, as gpg starts gpg-agent.
/// - `auto`: keychaind when one serves these locations, else embedded. (Starting one here would change where every
///   program's unlock state lives behind its back; `daemon` or a systemd socket unit opts in.)
///
/// This module links no engine: ``choose(locations:environment:)`` says which one, and a program that links
/// KeychainClient turns `.embedded` into the in-process engine (`KeychainBackend.service`), while the command-line
/// front ends run their engine-linked twin (``EmbeddedTwin``) so that the daemon path starts fast.
public enum KeychainBackend {
    public enum Choice {
        case remote(RemoteKeychainService)
        case embedded
    }

    public static func choose(locations: KeychainLocations = .current(),
                              environment: [String: String] = ProcessEnvironment.current())
        throws(KeychainError) -> Choice
    {
        switch environment["KEYCHAIN_BACKEND"] ?? "auto" {
        case "embedded":
            return .embedded
        case "daemon":
            if let remote = try RemoteKeychainService.connect(to: locations.daemonSocket, environment: environment) { return .remote(remote) }
            try startDaemon(environment: environment)
            // Up to 15 s: on a loaded machine a starting daemon can take seconds to bind (each try is cheap). A daemon
            // that was killed a moment ago may still hold its single-instance lock while it ends, so that the one just
            // started declines: start another every second until one answers.
            for attempt in 1...750 {
                if let remote = try RemoteKeychainService.connect(to: locations.daemonSocket, environment: environment) { return .remote(remote) }
                usleep(20_000)
                if attempt % 50 == 0 { try? startDaemon(environment: environment) }
            }
            throw KeychainError(.notAvailable, "keychaind did not start (\(locations.daemonSocket.path))")
        case "auto", "":
            if let remote = try? RemoteKeychainService.connect(to: locations.daemonSocket, environment: environment) { return .remote(remote) }
            return .embedded
        case let other:
            throw KeychainError(.param, "KEYCHAIN_BACKEND must be embedded, daemon or auto, not \(other)")
        }
    }

    /// Starts keychaind (beside this executable, else from PATH) in a session of its own, detached from us.
    static func startDaemon(environment: [String: String]) throws(KeychainError) {
        let ownDirectory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        var candidates = [ownDirectory.appendingPathComponent("keychaind").path]
        for directory in (environment["PATH"] ?? "/usr/local/bin:/usr/bin").split(separator: ":") {
            candidates.append("\(directory)/keychaind")
        }
        guard let daemon = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw KeychainError(.notAvailable, "keychaind is not installed (looked beside this program and in PATH)")
        }
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { if null >= 0 { close(null) } }
        let detach = FileManager.default.isExecutableFile(atPath: "/usr/bin/setsid")
        do {
            // setsid -f forks and returns at once: the daemon is nobody's child here, so it leaves no zombie.
            let child = try ChildProcess.spawn(
                detach ? "/usr/bin/setsid" : daemon, arguments: detach ? ["-f", daemon] : [],
                environment: environment, stdin: null, stdout: null, stderr: null)
            if detach { _ = child.wait() }
        } catch {
            throw KeychainError(.notAvailable, "cannot start keychaind")
        }
    }
}
