import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus
import KeychainInterface
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The backend of xdg-desktop-portal's Secret portal, `org.freedesktop.impl.portal.Secret` at
/// `/org/freedesktop/portal/desktop` on the Secret Service's connection: a sandboxed (Flatpak) application that asks
/// the portal for its secret gets one of its own, which libsecret inside the sandbox uses to encrypt the
/// application's keyring file.
///
/// The application id is the portal's word: the portal learned it from the sandbox, which the application cannot
/// change. So only xdg-desktop-portal may ask; any other program naming an application would get that application's
/// secret. Two checks, because either alone can be walked around:
/// - the caller's program (identified like every caller, from the process that connected) is a file named
///   `xdg-desktop-portal` that only root can change: no user can make one;
/// - the caller's connection owns `org.freedesktop.portal.Desktop` on the bus now. A program that connected and
///   then executed the real portal over itself (D-Bus knows a connection by the process that connected) passes the
///   first check, not this one: the portal it started takes the name on a connection of its own.
enum SecretPortal {
    static let path = "/org/freedesktop/portal/desktop"
    static let interface = "org.freedesktop.impl.portal.Secret"
    static let version: UInt32 = 1
    /// The portal's own name on the bus: its caller must own it.
    static let portalBusName = "org.freedesktop.portal.Desktop"
    /// How long keychaind waits for the descriptor to take the secret (a pipe nobody reads, a full socket).
    static let writePatience: Int32 = 5_000
    /// Where the portal's request handles live; the one a call names is where the portal may `Close` it.
    static let requestPrefix = "/org/freedesktop/portal/desktop/request/"
    static let requestInterface = "org.freedesktop.impl.portal.Request"
    /// At most this many requests wait for the user at once (each holds a descriptor until it is answered).
    static let maximumPendingRequests = 64

    /// A RetrieveSecret that waits for the user (the login keychain's password), exported at its handle so that
    /// the portal can close it when the application gives up: the application then gets response 1 (cancelled) and
    /// no byte. (The question stays up: what the user types into it still unlocks the keychain.)
    final class Request: Sendable {
        let owner: String
        private let closed = Atomic(false)
        init(owner: String) { self.owner = owner }
        var isClosed: Bool { closed.load(ordering: .acquiring) }
        func close() { closed.store(true, ordering: .releasing) }
    }

    /// Whether `peer` runs xdg-desktop-portal: an executable of that name that only root can change, with no code
    /// of anyone else loaded.
    static func isPortalProgram(_ peer: PeerIdentity) -> Bool {
        guard let executable = peer.executable, peer.foreignCode.isEmpty else { return false }
        return URL(fileURLWithPath: executable).lastPathComponent == "xdg-desktop-portal"
            && ProtectedPath.isProtected(executable)
    }

    /// An application id as Flatpak makes them (D-Bus name rules): at least two dot-separated elements of letters,
    /// digits, `_` and `-`, none empty or starting with a digit, at most 255 bytes.
    static func isApplicationID(_ id: String) -> Bool {
        let elements = id.split(separator: ".", omittingEmptySubsequences: false)
        guard id.utf8.count <= 255, elements.count >= 2 else { return false }
        return elements.allSatisfy { element in
            guard let first = element.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return false }
            return element.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            }
        }
    }

    static func introspection() -> String {
        """
          <interface name="\(interface)">
            <method name="RetrieveSecret">
              <arg type="o" name="handle" direction="in"/>
              <arg type="s" name="app_id" direction="in"/>
              <arg type="h" name="fd" direction="in"/>
              <arg type="a{sv}" name="options" direction="in"/>
              <arg type="u" name="response" direction="out"/>
              <arg type="a{sv}" name="results" direction="out"/>
            </method>
            <property name="version" type="u" access="read"/>
          </interface>

        """
    }

    /// Writes all of `secret` to `fd`, waiting at most ``writePatience`` for room; false when it could not.
    static func write(_ secret: SecretBytes, to fd: Int32) -> Bool {
        secret.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                let ready = poll(&entry, 1, writePatience)
                if ready < 0 && errno == EINTR { continue }
                guard ready > 0, entry.revents & Int16(POLLOUT) != 0 else { return false }
                let written = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && (errno == EINTR || errno == EAGAIN) { continue }
                guard written > 0 else { return false }
                offset += written
            }
            return true
        }
    }
}

extension SecretServiceServer {
    /// A call on the portal's object: RetrieveSecret, its property, or its introspection (handled by the router).
    func portalCall(_ message: DBusMessage, member: String, sender: String, service: EmbeddedKeychainService)
        throws -> [DBusValue]
    {
        if message.interface == Self.propertiesInterface {
            guard let interface = message.body.first?.stringValue, interface == SecretPortal.interface else {
                throw Failure.invalidArgs("the portal's object has only \(SecretPortal.interface)'s properties")
            }
            switch member {
            case "GetAll":
                return [.dictionary(keySignature: "s", valueSignature: "v",
                                    [.init(.string("version"), .variant(.uint32(SecretPortal.version)))])]
            case "Get" where message.body.count == 2 && message.body[1] == .string("version"):
                return [.variant(.uint32(SecretPortal.version))]
            case "Get":
                throw Failure(name: "org.freedesktop.DBus.Error.UnknownProperty", message: "no such property")
            default:
                throw Failure(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "the portal's properties are read-only")
            }
        }
        guard message.interface == nil || message.interface == SecretPortal.interface, member == "RetrieveSecret" else {
            throw unknownMethod(member)
        }
        guard message.bodySignature == "osha{sv}", case .objectPath(let handle) = message.body[0],
              let appID = message.body[1].stringValue
        else { throw Failure.invalidArgs("RetrieveSecret takes (o handle, s app_id, h fd, a{sv} options)") }
        guard let descriptor = message.fileDescriptor(message.body[2]), descriptor.fd >= 0 else {
            throw Failure.invalidArgs("no file descriptor came with the call")
        }
        guard let peer = state.withLock({ $0.peers[sender] }), SecretPortal.isPortalProgram(peer),
              busNameOwner(SecretPortal.portalBusName) == sender
        else {
            descriptor.close()
            throw Failure(name: "org.freedesktop.DBus.Error.AccessDenied",
                          message: "only xdg-desktop-portal may ask for an application's secret")
        }
        guard SecretPortal.isApplicationID(appID) else {
            descriptor.close()
            throw Failure.invalidArgs("\"\(appID)\" is not a sandboxed application's id (the portal vouches for none)")
        }
        // The descriptor is closed once the secret is written (its reader then sees the end), or on any failure.
        // nil: the login keychain is locked (never unlocked since keychaind started) or missing.
        @Sendable func deliver() throws -> [DBusValue]? {
            let secret: SecretBytes
            do {
                secret = try service.portalSecret(for: appID)
            } catch let error where error.status == .interactionNotAllowed || error.status == .noSuchKeychain {
                return nil
            } catch {
                descriptor.close()
                throw error
            }
            defer { descriptor.close() }
            guard SecretPortal.write(secret, to: descriptor.fd) else {
                throw Failure(name: "org.freedesktop.DBus.Error.Failed", message: "the descriptor did not take the secret")
            }
            return [.uint32(0), .dictionary(keySignature: "s", valueSignature: "v", [])]
        }
        // The portal tells the application that it failed (response 2); it may ask again once the user logged in.
        let failed: [DBusValue] = [.uint32(2), .dictionary(keySignature: "s", valueSignature: "v", [])]
        if let delivered = try deliver() { return delivered }
        // Locked: the user is asked for the login keychain's password on the session's display, on a thread of its
        // own (the bus goes on serving meanwhile); with nobody to ask, it fails at once.
        let login = KeychainReference(path: service.locations.loginKeychain.path)
        guard (try? service.state(of: login))?.exists == true, let prompter = desktopPrompter() else {
            descriptor.close()
            return failed
        }
        let objects = SecretServiceObjects(service: service, server: self, caller: sender)
        // The request is exported at its handle while it waits, so that the portal can close it; one that cannot
        // be (a handle in use, too many waiting already) fails at once rather than wait beyond the portal's reach.
        let request = SecretPortal.Request(owner: sender)
        let exported = handle.hasPrefix(SecretPortal.requestPrefix) && state.withLock { state in
            guard state.portalRequests[handle] == nil,
                  state.portalRequests.count < SecretPortal.maximumPendingRequests else { return false }
            state.portalRequests[handle] = request
            return true
        }
        guard exported else {
            descriptor.close()
            return failed
        }
        throw ReplyLater { [self] in
            defer {
                state.withLock { state in
                    if state.portalRequests[handle] === request { state.portalRequests.removeValue(forKey: handle) }
                }
            }
            // The question is the user's, whoever else waits for it: a password typed after the portal closed the
            // request still unlocks the keychain (a retrying application gets its secret without a second question);
            // the closed request gets no byte.
            _ = objects.askToUnlock(login, prompter: prompter, isDismissed: { false })
            if request.isClosed {
                descriptor.close()
                return [.uint32(1), .dictionary(keySignature: "s", valueSignature: "v", [])]
            }
            if let delivered = try deliver() { return delivered }
            descriptor.close()
            return failed
        }
    }

    /// `Close` on a request of the portal's that waits for the user; any other caller, or a request that is not
    /// waiting (answered, or never exported), finds no object there.
    func portalRequestCall(_ message: DBusMessage, member: String, interface: String?, path: String, sender: String)
        throws -> [DBusValue]
    {
        guard let request = state.withLock({ $0.portalRequests[path] }), request.owner == sender else {
            throw Failure.unknownObject(path)
        }
        guard member == "Close", interface == nil || interface == SecretPortal.requestInterface else {
            throw unknownMethod(member)
        }
        guard message.bodySignature.isEmpty else { throw Failure.invalidArgs("Close takes no arguments") }
        request.close()
        state.withLock { state in
            if state.portalRequests[path] === request { state.portalRequests.removeValue(forKey: path) }
        }
        return []
    }

    /// The portal left the bus: what it was waiting for is closed (nothing is written to its descriptors).
    func closePortalRequests(of owner: String) {
        let gone = state.withLock { state in
            let gone = state.portalRequests.filter { $0.value.owner == owner }
            for path in gone.keys { state.portalRequests.removeValue(forKey: path) }
            return gone.values
        }
        for request in gone { request.close() }
    }
}
