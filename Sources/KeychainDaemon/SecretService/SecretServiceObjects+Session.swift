import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus

/// The `session` collection's calls (SecretSessionCollection): the same methods and properties as a keychain's
/// collection and items, over keychaind's memory.
extension SecretServiceObjects {
    var sessionItems: SecretSessionCollection { server.sessionCollection }

    func isReadable(_ item: SecretSessionCollection.Item, _ id: UUID) -> Bool {
        !AccessEvaluator.needsConsent(.readSecret, access: item.access, of: id, by: service.caller, grants: grants(for: id))
    }

    /// The session item at `id`, when the caller may use it (IsLocked for another program's, until allowed).
    func unlockedSessionItem(_ id: UUID) throws -> SecretSessionCollection.Item {
        guard let item = sessionItems.item(id) else { throw Failure.noSuchObject }
        guard isReadable(item, id) else { throw Failure.isLocked }
        return item
    }

    func sessionCollectionCall(_ member: String, _ arguments: [DBusValue]) throws -> [DBusValue] {
        switch member {
        case "SearchItems":
            guard let wanted = arguments.first?.stringDictionaryValue else { throw Failure.invalidArgs("SearchItems(a{ss})") }
            return [.array(elementSignature: "o", sessionItems.search(wanted).map { .objectPath(SecretSessionCollection.itemPath($0.0)) })]
        case "CreateItem":
            let request = try itemRequest(arguments)
            let (secret, contentType) = try secretArgument(request.secret)
            let stored = sessionItems.store(label: request.label, attributes: request.attributes, secret: secret,
                                                  contentType: contentType, replace: request.replace,
                                                  creator: service.caller.application,
                                                  mayReplace: { [self] id, existing in isReadable(existing, id) })
            switch stored {
            case .notYours:
                throw Failure.isLocked
            case .full:
                throw Failure(name: "org.freedesktop.DBus.Error.LimitsExceeded",
                              message: "the session collection holds \(SecretSessionCollection.maximumItems) items at most")
            case .created(let id):
                server.itemSignal("ItemCreated", collection: SecretSessionCollection.path, item: SecretSessionCollection.itemPath(id))
                return [.objectPath(SecretSessionCollection.itemPath(id)), .objectPath("/")]
            case .replaced(let id):
                server.itemSignal("ItemChanged", collection: SecretSessionCollection.path, item: SecretSessionCollection.itemPath(id))
                return [.objectPath(SecretSessionCollection.itemPath(id)), .objectPath("/")]
            }
        case "Delete":
            throw Failure(name: "org.freedesktop.DBus.Error.NotSupported", message: "the session collection lasts as long as keychaind")
        default:
            throw server.unknownMethod(member)
        }
    }

    func sessionItemCall(_ member: String, _ id: UUID, _ arguments: [DBusValue]) throws -> [DBusValue] {
        switch member {
        case "GetSecret":
            guard let session = arguments.first?.stringValue else { throw Failure.invalidArgs("GetSecret(o)") }
            let item = try unlockedSessionItem(id)
            return [try secretStructure(item.secret, contentType: item.contentType, session: session)]
        case "SetSecret":
            guard let argument = arguments.first else { throw Failure.invalidArgs("SetSecret((oayays))") }
            _ = try unlockedSessionItem(id)
            let (secret, contentType) = try secretArgument(argument)
            sessionItems.update(id) {
                $0.secret = secret
                $0.contentType = contentType
            }
            server.itemSignal("ItemChanged", collection: SecretSessionCollection.path, item: SecretSessionCollection.itemPath(id))
            return []
        case "Delete":
            _ = try unlockedSessionItem(id)
            sessionItems.delete(id)
            server.itemSignal("ItemDeleted", collection: SecretSessionCollection.path, item: SecretSessionCollection.itemPath(id))
            return [.objectPath("/")]
        default:
            throw server.unknownMethod(member)
        }
    }

    func sessionPropertyValues(path: String, interface: String) throws -> [String: DBusValue] {
        if path == SecretSessionCollection.path {
            guard interface == SecretServiceServer.collectionInterface else { return [:] }
            return ["Label": .string("session"), "Locked": .boolean(false), "Created": .uint64(sessionItems.created),
                    "Modified": .uint64(sessionItems.modified),
                    "Items": .array(elementSignature: "o", sessionItems.search([:]).map { .objectPath(SecretSessionCollection.itemPath($0.0)) })]
        }
        guard let id = SecretSessionCollection.itemID(path), let item = sessionItems.item(id) else { throw Failure.unknownObject(path) }
        guard interface == SecretServiceServer.itemInterface else { return [:] }
        return ["Locked": .boolean(!isReadable(item, id)), "Attributes": .stringDictionary(item.attributes),
                "Label": .string(item.label), "Created": .uint64(item.created), "Modified": .uint64(item.modified),
                "Type": .string(item.attributes["xdg:schema"] ?? "")]
    }

    func setSessionProperty(path: String, name: String, value: DBusValue) throws {
        guard let id = SecretSessionCollection.itemID(path) else {
            throw Failure(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "\(name) cannot be set here")
        }
        let current = try unlockedSessionItem(id)
        switch name {
        case "Label":
            guard let label = value.stringValue else { throw Failure.invalidArgs("Label is a string") }
            sessionItems.update(id) { $0.label = label }
        case "Attributes":
            guard var attributes = value.stringDictionaryValue else { throw Failure.invalidArgs("Attributes is a{ss}") }
            attributes["xdg:schema"] = attributes["xdg:schema"] ?? current.attributes["xdg:schema"]  // kept, as gnome-keyring does
            sessionItems.update(id) { $0.attributes = attributes }
        default:
            throw Failure(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "\(name) is read-only")
        }
        server.itemSignal("ItemChanged", collection: SecretSessionCollection.path, item: path)
        server.propertiesChanged(path, interface: SecretServiceServer.itemInterface, [name: value])
    }
}
