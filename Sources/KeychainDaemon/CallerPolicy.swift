import Foundation
import KeychainClient
import KeychainCore

/// Decides what a peer may use, from its executable alone.
///
/// - The keychain's own tools (`security`, `git-credential-keychain`, `docker-credential-keychain`) installed in
///   keychaind's own directory see every group, as macOS's tools see the file keychain.
/// - Any other program gets its application identity as the embedded mode computes it, but from its executable's
///   directory only (`Info.plist`, `<name>.entitlements`): its environment is not consulted, so a program cannot
///   name itself another application.
/// - Interpreters (python3, bash, node, …) are weak identities: every script run by one is that interpreter.
public struct CallerPolicy: Sendable {
    public let toolDirectory: String
    static let tools: [String: String] = [
        "security": "security", "git-credential-keychain": "git-credential-keychain",
        "docker-credential-keychain": "docker-credential-keychain",
    ]

    public init(toolDirectory: String) { self.toolDirectory = toolDirectory }

    public func caller(for peer: PeerIdentity) -> Caller? {
        guard let executable = peer.executable else { return nil }
        // The kernel's path (/proc/PID/exe) is absolute and canonical: split and compared as bytes. A URL (which
        // asks the file system whether the path is a directory) is made only for a program that is not a tool.
        let (directory, name) = Self.split(executable)
        let url = { URL(fileURLWithPath: executable, isDirectory: false) }
        // The program for trusted-application lists. An executable the daemon cannot read (mode 0111) gets an
        // empty digest: it is still checked, by path alone, never let through unchecked.
        let application = TrustedApplication(path: executable, digest: peer.executableDigest ?? Data())
        if !peer.foreignCode.isEmpty {
            // Not the program its executable names: never one of the keychain's tools, never on a trusted list (it
            // is shown, and remembered, with what was loaded into it).
            let identity = ApplicationIdentity.current(executable: url(), environment: [:])
            let shown = "\(executable) (with \(peer.foreignCode.joined(separator: ", ")) loaded)"
            return Caller(accessGroups: Self.claimable(identity.accessGroups),
                          application: TrustedApplication(path: shown, digest: peer.executableDigest ?? Data()))
        }
        if let group = Self.tools[name], directory.utf8.elementsEqual(toolDirectory.utf8) {
            // Named by path alone (see TrustedApplication) only where nobody but root can replace them (an installed
            // package: an upgrade keeps their items' lists valid). In a directory the user can write (a build
            // directory, ~/.local/bin) any program of the user could put something else there: path and digest.
            let byPath = Self.isInstalled(executable)
            return Caller(accessGroups: [group, Caller.wildcardGroup],
                          application: byPath ? TrustedApplication(path: executable, digest: Data()) : application)
        }
        let identity = ApplicationIdentity.current(executable: url(), environment: [:])
        return Caller(accessGroups: Self.claimable(identity.accessGroups), application: application)
    }

    /// An absolute path's directory (`/` for a file at the root) and last component, cut at the last `/` byte
    /// (not by characters: a combining mark after the slash belongs to the name).
    public static func split(_ path: String) -> (directory: String, name: String) {
        let bytes = path.utf8
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return ("", path) }
        let directory = String(Substring(bytes[..<slash]))
        return (directory.isEmpty ? "/" : directory, String(Substring(bytes[bytes.index(after: slash)...])))
    }

    /// The groups a program's files may claim: every one but the wildcard, which only the keychain's own tools
    /// have (an entitlements file naming `*` would otherwise see every group, and back the keychain up), and
    /// keychaind's own (the Secret portal's secrets are for the applications the portal vouches for).
    static func claimable(_ groups: [String]) -> [String] {
        groups.filter { $0 != Caller.wildcardGroup && !Caller.isKeychaindWritten($0) }
    }

    /// True when only root can replace the file (``ProtectedPath``).
    static func isInstalled(_ path: String) -> Bool { ProtectedPath.isProtected(path) }
}
