import CKeychainLinux
import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus
import KeychainInterface
import KeychainStorage
import KeychainWire
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A client on the socket: identified once from the kernel's credentials (then served by a ``DaemonConnection``),
/// the service each one gets, and what the server does for all of them (events, trusting a program).
extension KeychainDaemonServer {
    /// A change to the keychains, from any door: to the socket's event subscribers and the Secret Service's bus.
    func publish(_ event: KeychainEvent) {
        events.publish(event)
        secretService.withLock { $0 }?.announce(event)
        if [.add, .update, .delete, .unlock].contains(event.kind), let path = event.keychain {
            syncing?.keychainChanged(at: path)
        }
        if event.kind == .unlock { accessLogKeyReady() }
    }

    /// A keychain service for one connection's caller, on this server's shared keychains.
    func service(for caller: Caller, asker: Asker) -> EmbeddedKeychainService {
        EmbeddedKeychainService(
            locations: locations, caller: caller, asker: asker, baseConfiguration: fileConfiguration, syncing: syncing,
            accessLog: accessLog, keychains: keychains, preferences: preferences, notice: daemonNotice)
    }

    /// A connection just accepted: its caller identified from the kernel's credentials (its pidfd, pid and
    /// program), or the connection refused and closed.
    func admit(_ fd: Int32) -> DaemonConnection? {
        if turnedAway(fd) { return nil }
        guard let (peer, connected) = PeerIdentity.connected(to: fd) else { return refused(fd, "cannot identify the caller") }
        // Made at once, so that it owns the connected process's pidfd whatever is refused below.
        let watch = ProcessWatch(peer, connected: connected)
        guard peer.uid == geteuid() else { return refused(fd, "keychaind serves only its own user") }
        guard let claimed = policy.caller(for: peer) else {
            // /proc/PID/exe is unreadable for a process that made itself non-dumpable before connecting.
            return refused(fd, "cannot identify the caller's program (connect before PR_SET_DUMPABLE 0)")
        }
        guard let watch else { return refused(fd, "cannot identify the caller") }
        return DaemonConnection(server: self, fd: fd, peer: peer, claimed: claimed, watch: watch)
    }

    private func refused(_ fd: Int32, _ reason: String) -> DaemonConnection? {
        refuse(fd, reason)
        close(fd)
        lockScheduler.connectionEnded()
        return nil
    }

    /// What a program left out of access groups it claims is told at its session (once, on its standard error):
    /// which groups, and the command that lets a build of the user's own in. Other programs' paths are not named.
    static func leftOutNotice(claimed: Caller, admitted: Caller) -> String? {
        let left = claimed.accessGroups.filter { !admitted.accessGroups.contains($0) }
        guard !left.isEmpty, let program = claimed.application?.path else { return nil }
        let groups = left.map { "\u{201C}\(printable($0))\u{201D}" }.joined(separator: ", ")
        return "\(printable(program)) was left out of the keychain access group\(left.count == 1 ? "" : "s") \(groups): "
            + "\(left.count == 1 ? "it holds" : "they hold") items of another program, or of an earlier build of this one. "
            + "If this build is yours: security trust-program \(shellQuoted(program))"
    }

    /// Without control characters (a path or group name is the client's, shown on its terminal).
    private static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.properties.generalCategory != .control }))
    }

    /// A path as a shell command takes it: as it is when it needs no quoting, else in single quotes.
    static func shellQuoted(_ path: String) -> String {
        let plain = !path.isEmpty && path.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                || "/._+-,:@%=".unicodeScalars.contains(scalar))
        }
        if plain { return path }
        return "'" + printable(path).replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// `security trust-program PATH`: the program now at PATH (its path and the SHA-256 of its file) may use the
    /// access groups its files claim, where the user says yes to each group bound to other programs. For a
    /// rebuilt binary (a test suite after each build) that would otherwise be left out of its groups, asked
    /// nothing, when it runs with nobody to ask. Only the keychain's own `security` may ask; the question goes
    /// where `security` itself cannot answer it (``confirmer(for:session:)``).
    func trustProgram(at path: String, for claimed: Caller, asker: Asker) -> Response {
        guard AccessEvaluator.mayActOnWholeKeychain(claimed), claimed.application != nil else {
            return .failure(KeychainError(.authFailed, "only the keychain's own security command may trust a program"))
        }
        let url = URL(fileURLWithPath: path).resolvingSymlinksInPath()
        guard let digest = ExecutableDigest.of(path: url.path) else {
            return .failure(KeychainError(.param, "cannot read \(url.path)"))
        }
        let program = TrustedApplication(path: url.path, digest: digest)
        let identity = ApplicationIdentity.current(executable: url, environment: [:])
        var refused: [String] = []
        var status = KeychainStatus.interactionNotAllowed  // nobody to ask: no display, no login terminal
        let admitted = registry.admit(Caller(accessGroups: identity.accessGroups, application: program)) { group, members in
            let others = members.map(\.path).joined(separator: ", ")
            let answer = asker.confirm("Let \(url.path), as its file is now, use the keychain access group "
                + "\u{201C}\(group)\u{201D}, which holds items of \(others)?")
            // Asked for on purpose: Allow binds as Always Allow does.
            if answer == .allow || answer == .alwaysAllow { return .alwaysAllow }
            refused.append(group)
            if answer == .deny { status = .authFailed } else if answer == .cancelled, status != .authFailed { status = .userCanceled }
            return answer
        }
        if !refused.isEmpty {
            // As the other questions answer: Deny errSecAuthFailed, Cancel errSecUserCanceled, nobody to ask
            // errSecInteractionNotAllowed.
            return .failure(KeychainError(status, "not allowed to use \(refused.joined(separator: ", "))"))
        }
        return .count(admitted.accessGroups.count)
    }
}
