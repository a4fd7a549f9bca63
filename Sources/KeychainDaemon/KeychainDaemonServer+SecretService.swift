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

/// The Secret Service wiring: org.freedesktop.secrets served from this daemon's keychains, and the hand-over from
/// a keychaind started for it while this one serves the socket.
extension KeychainDaemonServer {
    /// Serves the Secret Service on `connection` (the session bus) from this daemon's keychains: each caller the
    /// bus names is identified like a socket peer and gets a service with its own program and groups
    /// (``secretServiceCaller(for:)``).
    public func serveSecretService(on connection: DBusConnection, replace: Bool) throws(SecretServiceServer.StartError) {
        // What the collection list is (read as keychaind itself sees the preferences).
        let observer = EmbeddedKeychainService(locations: locations, caller: Caller(accessGroups: []),
                                               asker: Asker(prompter: nil), baseConfiguration: fileConfiguration,
                                               keychains: keychains, preferences: preferences, notice: daemonNotice)
        let server = SecretServiceServer(
            connection: connection, observer: observer, publish: { [self] event in publish(event) },
            decisionLog: { [self] records, peer, caller in
                records.isEmpty ? nil : log(records, failure: nil, keychain: { nil },
                                            by: LoggedCaller(peer: peer, caller: caller, door: .secretService))
            }
        ) { [self] peer in
            guard let claimed = policy.caller(for: peer) else { return nil }
            let caller = secretServiceCaller(for: claimed)
            // Its questions are its prompts' (Unlock, CreateCollection): a call itself never asks.
            return EmbeddedKeychainService(locations: locations, caller: caller, asker: Asker(prompter: nil),
                                           baseConfiguration: fileConfiguration, accessLog: accessLog,
                                           keychains: keychains, preferences: preferences, notice: daemonNotice)
        }
        // A bus that goes away (the session ended) leaves no server behind: the next hand-over serves the new one.
        try server.start(replace: replace, onClose: { [self] in
            secretService.withLock { if $0 === server { $0 = nil } }
        })
        secretService.withLock { $0 = server }
    }

    /// Who a program is over D-Bus: the Secret Service's own group (where its new items land, as file keychain
    /// items that every program sees and their trusted-application lists guard) and the groups the program's files
    /// claim, admitted as on the socket (a group bound to other programs is left out: a D-Bus call has nobody to
    /// ask about it). Never the wildcard, not even for the keychain's own tools: an item a program keeps in its
    /// access group (a data-protection item, a synchronizable one) is not on the bus for other programs at all,
    /// not its secret, not its attributes (docs/ARCHITECTURE.md "The Secret Service and access groups").
    func secretServiceCaller(for claimed: Caller) -> Caller {
        let own = Caller(accessGroups: CallerPolicy.claimable(claimed.accessGroups), application: claimed.application)
        let admitted = registry.admit(own) { _, _ in .unavailable }
        var groups = [SecretServiceServer.itemGroup]
        for group in admitted.accessGroups where !groups.contains(group) { groups.append(group) }
        return Caller(accessGroups: groups, application: claimed.application)
    }

    /// A keychaind started for the Secret Service (by D-Bus activation, or systemd for it) found this one serving
    /// the socket: this one takes org.freedesktop.secrets on that bus, so that one process holds the keys and the
    /// name. Only the same program may ask (another program could point keychaind at a bus of its own), and the
    /// bus must be the system's bus daemon (``DBusConnection/isSystemBusDaemon``), which reports callers truly.
    func takeOverSecretService(for peer: PeerIdentity, busAddress: String, replace: Bool) -> Response {
        let own = PeerIdentity.of(pid: getpid(), uid: geteuid())
        guard let own, peer.foreignCode.isEmpty, peer.executable == own.executable,
              peer.executableDigest == own.executableDigest
        else {
            return .failure(KeychainError(.authFailed, "only keychaind itself may hand over the Secret Service"))
        }
        // One hand-over at a time; a second asker finds the first one's bus served.
        guard takingOverSecretService.withLock({ taking in defer { taking = true }; return !taking }) else {
            return .failure(KeychainError(.notAvailable, "keychaind is taking the Secret Service already"))
        }
        defer { takingOverSecretService.withLock { $0 = false } }
        if secretService.withLock({ $0 != nil }) { return .done }
        do {
            let connection = try DBusConnection(address: busAddress, fileDescriptors: true)
            guard let listener = connection.listenerProcess, listener.uid == geteuid() || listener.uid == 0,
                  let executable = PeerIdentity.executable(of: listener.pid),
                  Self.busDaemons.contains(URL(fileURLWithPath: executable).lastPathComponent),
                  ProtectedPath.isProtected(executable)
            else {
                connection.close()
                return .failure(KeychainError(.notAvailable, "the bus at \(busAddress) is not the system's bus daemon"))
            }
            try serveSecretService(on: connection, replace: replace)
            return .done
        } catch {
            return .failure(KeychainError(.notAvailable, "cannot serve the Secret Service: \(error)"))
        }
    }

    /// The programs that may listen on a session bus keychaind is told about: the reference bus, dbus-broker, and
    /// systemd when it opened the socket for either (socket activation of the user's bus).
    static let busDaemons: Set<String> = ["dbus-daemon", "dbus-broker", "dbus-broker-launch", "systemd"]
}
