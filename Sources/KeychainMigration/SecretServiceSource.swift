#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore
import KeychainDBus

/// Another running Secret Service (gnome-keyring, KWallet's, KeePassXC's), read over the session bus before
/// keychaind takes the name: every collection's items with their labels, attribute sets and secrets, byte for byte
/// (a plain session: the secrets cross this user's own bus, as they do for every client of the service).
public struct SecretServiceSource {
    static let service = "org.freedesktop.secrets"
    static let root = "/org/freedesktop/secrets"

    public struct Failure: Sendable {
        public var name: String
        public var message: String
    }

    let bus: DBusConnection

    public init(environment: [String: String]) throws(KeychainError) {
        do {
            bus = try DBusConnection.sessionBus(environment: environment)
        } catch {
            throw KeychainError(.notAvailable, "no session bus to read the Secret Service from: \(error)")
        }
    }

    /// Every item of every stored collection (the transient `session` collection is left out); items of a locked
    /// collection come after the service's own unlock prompt, or are reported.
    public func read() throws(KeychainError) -> (secrets: [ImportedSecret], failures: [Failure]) {
        defer { bus.close() }
        do {
            try refuseOurOwn()
            let opened = try call(Self.root, "org.freedesktop.Secret.Service", "OpenSession",
                                  [.string("plain"), .variant(.string(""))])
            guard opened.body.count == 2, case .objectPath(let session) = opened.body[1] else {
                throw KeychainError(.decode, "the Secret Service answered OpenSession with something else")
            }
            var secrets: [ImportedSecret] = []
            var failures: [Failure] = []
            for collection in try objectPaths(property(Self.root, "org.freedesktop.Secret.Service", "Collections"))
            where !collection.hasSuffix("/session") {
                let collectionLabel = try property(collection, "org.freedesktop.Secret.Collection", "Label").stringValue ?? collection
                var items = try objectPaths(property(collection, "org.freedesktop.Secret.Collection", "Items"))
                if try property(collection, "org.freedesktop.Secret.Collection", "Locked").boolValue == true {
                    items = try unlock(items, collection: collectionLabel, failures: &failures)
                }
                for item in items {
                    let label = try property(item, "org.freedesktop.Secret.Item", "Label").stringValue ?? ""
                    // gnome-keyring's own bookkeeping (`gkr:compat:uint32:port` says "port" was a number for
                    // libgnome-keyring) is not the item's: its keyring file does not hold it either.
                    let attributes = (try property(item, "org.freedesktop.Secret.Item", "Attributes").stringDictionaryValue ?? [:])
                        .filter { !$0.key.hasPrefix("gkr:compat:") }
                    let name = "\(collectionLabel)/\(label)"
                    guard SecretItemMapping.isStorable(attributes) else {
                        failures.append(Failure(name: name, message: "its attributes hold control characters (U+001E, U+001F)"))
                        continue
                    }
                    let reply: DBusMessage
                    do {
                        reply = try call(item, "org.freedesktop.Secret.Item", "GetSecret", [.objectPath(session)])
                    } catch let error as DBusConnection.ErrorReply {
                        failures.append(Failure(name: name, message: "the service refused its secret (\(error.name))"))
                        continue
                    }
                    guard case .structure(let parts) = reply.body.first, parts.count == 4, var value = parts[2].byteArray else {
                        failures.append(Failure(name: name, message: "the service answered GetSecret with something else"))
                        continue
                    }
                    secrets.append(ImportedSecret(
                        attributes: SecretItemMapping.importedAttributes(label: label, attributes: attributes),
                        secret: SecretBytes(consuming: &value), name: name))
                }
            }
            _ = try? call(session, "org.freedesktop.Secret.Session", "Close", [])
            return (secrets, failures)
        } catch let error as KeychainError {
            throw error
        } catch let error as DBusConnection.ErrorReply {
            throw KeychainError(.notAvailable, "the Secret Service answered \(error.name): \(error.message)")
        } catch {
            throw KeychainError(.notAvailable, "cannot read the Secret Service: \(error)")
        }
    }

    /// Reading keychaind's own Secret Service into its own keychain would only find every item already there.
    private func refuseOurOwn() throws {
        let owner = try bus.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                             interface: "org.freedesktop.DBus", member: "GetConnectionUnixProcessID",
                                             body: [.string(Self.service)]))
        guard let pid = owner.body.first?.uint32Value,
            let command = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)
        else { return }
        if command.trimmedOfWhitespace == "keychaind" {
            throw KeychainError(.param, "the running Secret Service is keychaind itself: stop it first, or run "
                + "the other service (gnome-keyring-daemon --replace) while you import")
        }
    }

    /// The service's own prompt unlocks a locked collection (gnome-keyring asks for its password on the desktop).
    private func unlock(_ items: [String], collection: String, failures: inout [Failure]) throws -> [String] {
        let reply = try call(Self.root, "org.freedesktop.Secret.Service", "Unlock",
                             [.array(elementSignature: "o", items.map { .objectPath($0) })])
        guard reply.body.count == 2, case .objectPath(let prompt) = reply.body[1] else { return [] }
        if prompt == "/" { return try objectPaths(reply.body[0]) }
        let matches = "type='signal',interface='org.freedesktop.Secret.Prompt',member='Completed',path='\(prompt)'"
        _ = try bus.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                     interface: "org.freedesktop.DBus", member: "AddMatch", body: [.string(matches)]))
        _ = try call(prompt, "org.freedesktop.Secret.Prompt", "Prompt", [.string("")])
        while true {
            let signal = try bus.receive()
            guard signal.kind == .signal, signal.member == "Completed", signal.path == prompt else { continue }
            if signal.body.first?.boolValue == true {
                failures.append(Failure(name: collection, message: "its unlock prompt was dismissed: its items do not come"))
                return []
            }
            if case .variant(let inner) = signal.body.count > 1 ? signal.body[1] : .string("") {
                return (try? objectPaths(inner)) ?? []
            }
            return []
        }
    }

    private func call(_ path: String, _ interface: String, _ member: String, _ body: [DBusValue]) throws -> DBusMessage {
        try bus.call(.methodCall(destination: Self.service, path: path, interface: interface, member: member, body: body))
    }

    private func property(_ path: String, _ interface: String, _ name: String) throws -> DBusValue {
        let reply = try call(path, "org.freedesktop.DBus.Properties", "Get", [.string(interface), .string(name)])
        guard case .variant(let value) = reply.body.first else {
            throw KeychainError(.decode, "the Secret Service answered \(name) with something else")
        }
        return value
    }

    private func objectPaths(_ value: DBusValue) throws -> [String] {
        (value.arrayElements ?? []).compactMap { if case .objectPath(let p) = $0 { p } else { nil } }
    }
}
