#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Which keychain service a front end gets: `KEYCHAIN_BACKEND=embedded|daemon|auto` (default auto).
///
/// - `auto`: keychaind, started on demand when none runs (as gpg starts gpg-agent); in-process only when no keychaind
///   is installed (beside this executable or in PATH) or it cannot start here. The unlock state of a keychain with a
///   password then lives in one place for every program, as securityd's does on macOS.
/// - `daemon`: keychaind or an error: never in-process.
/// - `embedded`: the files are opened in this process (`EmbeddedKeychainService`, in KeychainClient).
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
            return .remote(try connectStartingDaemon(locations: locations, environment: environment))
        case "auto", "":
            do {
                return .remote(try connectStartingDaemon(locations: locations, environment: environment))
            } catch where error.status == .notAvailable || error.status == .param {
                // No keychaind here, or none can serve these directories (it failed to start; a socket path too
                // long). A daemon that answers and refuses (another version) is an error worth seeing instead.
                // Said once, on standard error: the program works, but not as the user's keychain does.
                noteInProcess(because: error.message)
                return .embedded
            }
        case let other:
            throw KeychainError(.param, "KEYCHAIN_BACKEND must be embedded, daemon or auto, not \(other)")
        }
    }

    /// Tells the user, once per process, that `auto` found no keychaind and opens the files in this process: the
    /// same items, but a keychain with a password is unlocked for this process alone and no program is asked
    /// about. `KEYCHAIN_BACKEND=embedded` chooses this knowingly and says nothing.
    static func noteInProcess(because reason: String) {
        guard !notedInProcess.exchange(true, ordering: .relaxed) else { return }
        let text = "keychain: keychaind is not available (\(reason)); this program opens the keychain files itself: "
            + "a keychain with a password stays unlocked for this process only, and no program is asked about. "
            + "Install keychaind (sudo scripts/install.sh), or set KEYCHAIN_BACKEND=embedded to choose this.\n"
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
    private static let notedInProcess = Atomic<Bool>(false)

    /// The running keychaind for these locations, or one started now. errSecNotAvailable when none is installed or
    /// it cannot start (its reason in the message).
    static func connectStartingDaemon(locations: KeychainLocations, environment: [String: String])
        throws(KeychainError) -> RemoteKeychainService
    {
        let remote = try connectOrStartDaemon(locations: locations, environment: environment)
        // keychaind killed or ended later: the next call starts it again, as this first one did.
        remote.reconnect { () throws(KeychainError) in
            try connectOrStartDaemon(locations: locations, environment: environment)
        }
        return remote
    }

    private static func connectOrStartDaemon(locations: KeychainLocations, environment: [String: String])
        throws(KeychainError) -> RemoteKeychainService
    {
        // Worked out once, from the environment given (the property reads the process's again).
        let socket = locations.daemonSocket(home: KeychainLocations.homeDirectory(environment))
        if let remote = try RemoteKeychainService.connect(to: socket, serving: locations, environment: environment) { return remote }
        var start = try startDaemon(environment: environment)
        // A daemon that was killed a moment ago may still hold its single-instance lock while it ends ("running"
        // but no answer): start another every second until one answers, for up to 15 s.
        for attempt in 1...750 {
            if case .failed(let reason) = start {
                throw KeychainError(.notAvailable, "keychaind did not start (\(socket.path)): \(reason)")
            }
            if let remote = try RemoteKeychainService.connect(to: socket, serving: locations, environment: environment) { return remote }
            usleep(20_000)
            if attempt % 50 == 0 { start = try startDaemon(environment: environment) }
        }
        throw KeychainError(.notAvailable, "keychaind did not start (\(socket.path))")
    }

    enum StartOutcome: Equatable {
        /// This keychaind is listening (or another one serves these directories).
        case listening
        case failed(String)
    }

    /// Starts keychaind (beside this executable, else from PATH) in a session of its own, detached from us, and
    /// waits for it to say how its start went (`--notify-ready`: one line on a pipe, or end of file if it died).
    static func startDaemon(environment: [String: String]) throws(KeychainError) -> StartOutcome {
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
            var report = try ChildPipe()
            // setsid -f forks and returns at once: the daemon is nobody's child here, so it leaves no zombie.
            let child = try ChildProcess.spawn(
                detach ? "/usr/bin/setsid" : daemon,
                arguments: detach ? ["-f", daemon, "--notify-ready"] : ["--notify-ready"],
                environment: environment, stdin: null, stdout: report.childEnd, stderr: null)
            report.closeChildEnd()
            if detach { _ = child.wait() }
            let line = readLine(report.ourEnd, timeoutMilliseconds: 15_000)
            switch line {
            case "ready", "running": return .listening
            case let line? where line.hasPrefix("failed: "): return .failed(String(line.dropFirst("failed: ".count)))
            case nil: return .listening  // no word within the deadline: a loaded machine; the caller keeps trying
            default: return .failed("it exited before listening (`keychaind --foreground` shows why)")
            }
        } catch {
            throw KeychainError(.notAvailable, "cannot start keychaind")
        }
    }

    /// The first line readable on `descriptor` ("" at end of file before any), or nil if none came in time.
    private static func readLine(_ descriptor: Int32, timeoutMilliseconds: Int32) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        var remaining = timeoutMilliseconds
        while remaining > 0 {
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let began = monotonicMilliseconds()
            let ready = poll(&entry, 1, remaining)
            remaining -= Int32(clamping: monotonicMilliseconds() - began)
            if ready < 0 { if errno == EINTR { continue } else { return "" } }
            if ready == 0 { return nil }
            let n = read(descriptor, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
            if bytes.count > 4096 { return String(decoding: bytes, as: UTF8.self) }
        }
        return nil
    }

    private static func monotonicMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}
