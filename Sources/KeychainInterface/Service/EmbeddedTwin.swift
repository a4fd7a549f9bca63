import CKeychainLinux
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

#if canImport(Glibc)
import Glibc
#endif

/// The command-line tools come as two executables each running the same program: the tool itself, which links only
/// the client interface and so starts in a couple of milliseconds, and `keychain-embedded TOOL …`, the same program
/// linked with the engine (GRDB, swift-crypto) for when the keychain is opened in this process
/// (``KeychainBackend``'s `embedded` choice). Going through keychaind, nobody pays for the engine's start-up.
public enum EmbeddedTwin {
    public static let executableName = "keychain-embedded"

    /// The daemon's service for `tool`, or, when the keychain is to be opened in-process, never returns: the process
    /// becomes `keychain-embedded tool ARGUMENTS…` (same pid, environment and descriptors, this process's own argument
    /// bytes), decided before the tool has read anything from its input.
    public static func remoteOrBecomeEmbedded(tool: String) throws(KeychainError) -> RemoteKeychainService {
        let environment = ProcessEnvironment.current()  // read once, passed on
        switch try KeychainBackend.choose(locations: .current(environment: environment), environment: environment) {
        case .remote(let remote):
            return remote
        case .embedded:
            try become(tool: tool)
        }
    }

    /// Executes the engine-linked twin beside this executable (the installed tools sit in one directory) with this
    /// process's arguments as the kernel gave them: Swift's `CommandLine.arguments` would have replaced bytes that
    /// are not UTF-8 (a password given with `-w`).
    public static func become(tool: String) throws(KeychainError) -> Never {
        let ownDirectory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        let twin = ownDirectory.appendingPathComponent(executableName).path
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup(twin), strdup(tool)]
        for index in 1..<Int(CommandLine.argc) { argv.append(CommandLine.unsafeArgv[index]) }
        argv.append(nil)
        execv(twin, argv)
        let reason = String(cString: strerror(errno))
        throw KeychainError(.notAvailable, "cannot run \(twin) (\(reason)): it opens the keychain in-process "
            + "(KEYCHAIN_BACKEND=embedded, or auto with no keychaind running); install it beside \(tool) or use keychaind")
    }

    /// In the twin: takes the tool's name, so that ps, pgrep and /proc/PID/status still show `security`.
    public static func adoptName(of tool: String) {
        _ = ckeychain_set_process_name(tool)
    }
}
