import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The Secret Service's objects (service, collections, items) for one caller, over that caller's keychain service.
struct SecretServiceObjects: Sendable {
    typealias Failure = SecretServiceServer.Failure
    let service: EmbeddedKeychainService
    let server: SecretServiceServer
    let caller: String
    /// The keychains served as collections: the search list's, and the default keychain. Read once per call
    /// (GetSecrets resolves a path per item).
    let collections: [KeychainReference]

    init(service: EmbeddedKeychainService, server: SecretServiceServer, caller: String) {
        self.service = service
        self.server = server
        self.caller = caller
        collections = Self.collections(of: service)
    }

    /// The keychains served as collections: the search list's, and the default keychain, those that exist.
    static func collections(of service: EmbeddedKeychainService) -> [KeychainReference] {
        var list = service.searchList()
        let preferred = service.defaultKeychain()
        if !list.contains(preferred) { list.insert(preferred, at: 0) }
        // A keychain named `session` would be hidden by the in-memory collection of that name.
        return list.filter { name(of: $0) != "session" && access($0.path, F_OK) == 0 }
    }

    // MARK: - Paths

    /// A keychain's collection name: its file name without `.keychain-db`, other characters than [A-Za-z0-9_] as `_`.
    static func name(of keychain: KeychainReference) -> String { name(ofPath: keychain.path) }

    static func name(ofPath path: String) -> String {
        if let known = knownNames.withLock({ $0[path] }) { return known }
        let name = makeName(ofPath: path)
        knownNames.withLock { names in
            if names.count > 256 { names.removeAll() }
            names[path] = name
        }
        return name
    }

    /// Names already worked out, by path (every call resolves paths through them).
    private static let knownNames = Mutex<[String: String]>([:])

    private static func makeName(ofPath path: String) -> String {
        var base = URL(fileURLWithPath: path).lastPathComponent
        for suffix in [".keychain-db", ".keychain"] where base.hasSuffix(suffix) { base.removeLast(suffix.count) }
        let cleaned = String(base.unicodeScalars.map { scalar -> Character in
            scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || scalar == "_") ? Character(scalar) : "_"
        })
        return cleaned.isEmpty ? "_" : cleaned
    }

    func collectionPath(_ keychain: KeychainReference) -> String { SecretServiceServer.collectionPrefix + Self.name(of: keychain) }

    func itemPath(_ keychain: KeychainReference, _ uuid: UUID) -> String {
        collectionPath(keychain) + "/i" + uuid.uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    }

    /// The keychain (and item) a path names; nil when it names none.
    func resolve(_ path: String) throws -> (KeychainReference, UUID?)? {
        let path = canonicalPath(path)
        let keychain: KeychainReference
        let rest: Substring
        if path.hasPrefix(SecretServiceServer.collectionPrefix) {
            let parts = path.dropFirst(SecretServiceServer.collectionPrefix.count).split(separator: "/", maxSplits: 1)
            guard let name = parts.first, let found = collections.first(where: { Self.name(of: $0) == name }) else { return nil }
            keychain = found
            rest = parts.count > 1 ? parts[1] : ""
        } else {
            return nil
        }
        if rest.isEmpty { return (keychain, nil) }
        guard rest.hasPrefix("i"), rest.count == 33, let uuid = Self.uuid(hex: rest.dropFirst()) else { return nil }
        return (keychain, uuid)
    }

    /// The collection an alias names (what ReadAlias answers): `default` the default keychain, `login` the login
    /// keychain (while they exist), `session` the in-memory collection; nil for any other name.
    func aliasTarget(_ alias: String) -> String? {
        let keychain: KeychainReference
        switch alias {
        case "session": return SecretSessionCollection.path
        case "default": keychain = service.defaultKeychain()
        case "login": keychain = service.loginKeychain()
        default: return nil
        }
        guard (try? service.state(of: keychain).exists) == true else { return nil }
        return collectionPath(keychain)
    }

    /// `path` with an alias (`/org/freedesktop/secrets/aliases/NAME[/…]`) replaced by the collection it names, as
    /// gnome-keyring exports every alias as an object: libsecret stores into `…/aliases/session` and
    /// `…/aliases/default` directly. Any other path, and an alias that names nothing, unchanged.
    func canonicalPath(_ path: String) -> String {
        guard path.hasPrefix(SecretServiceServer.aliasPrefix) else { return path }
        let parts = path.dropFirst(SecretServiceServer.aliasPrefix.count).split(separator: "/", maxSplits: 1)
        guard let name = parts.first, let target = aliasTarget(String(name)) else { return path }
        return parts.count > 1 ? target + "/" + parts[1] : target
    }

    static func uuid(hex: Substring) -> UUID? {
        let h = Array(hex)
        guard h.count == 32 else { return nil }
        let text = String(h[0..<8]) + "-" + String(h[8..<12]) + "-" + String(h[12..<16]) + "-" + String(h[16..<20]) + "-" + String(h[20...])
        return UUID(uuidString: text)
    }

    func isLocked(_ keychain: KeychainReference) -> Bool { (try? service.state(of: keychain).isLocked) ?? true }

    // MARK: - Service

    func serviceCall(_ member: String, _ arguments: [DBusValue]) throws -> [DBusValue] {
        switch member {
        case "OpenSession":
            guard arguments.count == 2, let algorithm = arguments[0].stringValue else { throw Failure.invalidArgs("OpenSession(s, v)") }
            switch algorithm {
            case "plain":
                return [.variant(.string("")), .objectPath(server.openSession(owner: caller, cipher: nil))]
            case "dh-ietf1024-sha256-aes128-cbc-pkcs7":
                guard case .variant(let input) = arguments[1], let clientKey = input.byteArray,
                      let (publicKey, cipher) = SecretSessionCipher.negotiate(clientPublicKey: clientKey)
                else { throw Failure.invalidArgs("the client's public key is not a valid group element") }
                return [.variant(.bytes(publicKey)), .objectPath(server.openSession(owner: caller, cipher: cipher))]
            default:
                throw Failure(name: "org.freedesktop.DBus.Error.NotSupported", message: "algorithm \(algorithm) is not supported")
            }
        case "SearchItems":
            guard let wanted = arguments.first?.stringDictionaryValue else { throw Failure.invalidArgs("SearchItems(a{ss})") }
            return try searchAfterUnlocking(collections) { objects in
                var unlocked: [DBusValue] = [], locked: [DBusValue] = []
                for keychain in objects.collections {
                    let keychainLocked = objects.isLocked(keychain)
                    for item in try objects.search(wanted, in: keychain) {
                        let path = DBusValue.objectPath(objects.itemPath(keychain, item.uuid))
                        if keychainLocked || !objects.isReadable(item) { locked.append(path) } else { unlocked.append(path) }
                    }
                }
                for (id, item) in objects.sessionItems.search(wanted) {
                    let path = DBusValue.objectPath(SecretSessionCollection.itemPath(id))
                    if objects.isReadable(item, id) { unlocked.append(path) } else { locked.append(path) }
                }
                return [.array(elementSignature: "o", unlocked), .array(elementSignature: "o", locked)]
            }
        case "GetSecrets":
            guard arguments.count == 2, let paths = arguments[0].arrayElements, let session = arguments[1].stringValue else {
                throw Failure.invalidArgs("GetSecrets(ao, o)")
            }
            _ = try server.session(session, owner: caller)
            var entries: [DBusValue.DictionaryEntry] = []
            for case .objectPath(let path) in paths {
                if let id = SecretSessionCollection.itemID(path) {
                    if let item = try? unlockedSessionItem(id),
                       let secret = try? secretStructure(item.secret, contentType: item.contentType, session: session) {
                        entries.append(.init(.objectPath(path), secret))
                    }
                    continue
                }
                // Locked, unknown and refused items are left out, as the specification says.
                guard let (keychain, id) = try? resolve(path), let id, !isLocked(keychain),
                      let secret = try? secretValue(keychain, id, session: session)
                else { continue }
                entries.append(.init(.objectPath(path), secret))
            }
            return [.dictionary(keySignature: "o", valueSignature: "(oayays)", entries)]
        case "ReadAlias":
            guard let alias = arguments.first?.stringValue else { throw Failure.invalidArgs("ReadAlias(s)") }
            return [.objectPath(aliasTarget(alias) ?? "/")]
        case "SetAlias":
            guard arguments.count == 2, let name = arguments[0].stringValue, let path = arguments[1].stringValue else {
                throw Failure.invalidArgs("SetAlias(s, o)")
            }
            return try setAlias(name, path)
        case "Unlock":
            guard let paths = arguments.first?.arrayElements else { throw Failure.invalidArgs("Unlock(ao)") }
            return try unlock(paths)
        case "Lock":
            guard let paths = arguments.first?.arrayElements else { throw Failure.invalidArgs("Lock(ao)") }
            var done: [DBusValue] = []
            for value in paths {
                guard let path = value.stringValue, let (keychain, id) = try? resolve(path), id == nil else { continue }
                try service.lock(keychain)
                server.changed(.lock, keychain, by: caller)
                done.append(value)
            }
            return [.array(elementSignature: "o", done), .objectPath("/")]
        case "CreateCollection":
            guard arguments.count == 2, let properties = arguments[0].dictionaryEntries, let alias = arguments[1].stringValue
            else { throw Failure.invalidArgs("CreateCollection(a{sv}, s)") }
            let label = properties.first { $0.key.stringValue == "org.freedesktop.Secret.Collection.Label" }?.value.stringValue
            return try createCollection(label: label ?? "", alias: alias)
        default:
            throw server.unknownMethod(member)
        }
    }

    // MARK: - Collections

    func collectionCall(_ member: String, keychain: KeychainReference, path: String, _ arguments: [DBusValue]) throws
        -> [DBusValue]
    {
        switch member {
        case "SearchItems":
            guard let wanted = arguments.first?.stringDictionaryValue else { throw Failure.invalidArgs("SearchItems(a{ss})") }
            return try searchAfterUnlocking([keychain]) { objects in
                [.array(elementSignature: "o", try objects.search(wanted, in: keychain).map { .objectPath(objects.itemPath(keychain, $0.uuid)) })]
            }
        case "CreateItem":
            let request = try itemRequest(arguments)
            let (secret, _) = try secretArgument(request.secret)
            guard SecretItemMapping.isStorable(request.attributes) else {
                throw Failure.invalidArgs("attribute names and values may not hold U+001E or U+001F")
            }
            guard isLocked(keychain) else {
                return [.objectPath(try storeItem(label: request.label, attributes: request.attributes, secret: secret,
                                                  replace: request.replace, in: keychain)),
                        .objectPath("/")]
            }
            // A locked keychain: a prompt for its password, then the item is stored (its path is the result), as
            // gnome-keyring answers a store into a locked collection.
            let prompt = server.makePrompt(owner: caller, emptyResult: .objectPath("/")) { [objects = self] prompter, isDismissed in
                guard let prompter, objects.askToUnlock(keychain, prompter: prompter, isDismissed: isDismissed) == .unlocked,
                      let path = try? objects.storeItem(label: request.label, attributes: request.attributes, secret: secret,
                                                        replace: request.replace, in: keychain)
                else { return nil }
                return .objectPath(path)
            }
            return [.objectPath("/"), .objectPath(prompt)]
        case "Delete":
            return deleteCollection(keychain)
        default:
            throw server.unknownMethod(member)
        }
    }

    /// Stores a Secret Service item in an unlocked keychain and returns its path. With `replace`, the item with
    /// exactly this attribute set is updated in place and keeps its path (another program's needs the same yes as
    /// reading it: IsLocked until Unlock); without, a new item is added even beside one with equal attributes, as
    /// the specification allows and gnome-keyring does.
    func storeItem(label: String, attributes: [String: String], secret: SecretBytes, replace: Bool,
                   in keychain: KeychainReference) throws -> String
    {
        if replace, let existing = try search(attributes, in: keychain).first(where: { SecretItemMapping.attributes(of: $0) == attributes }) {
            guard isReadable(existing) else { throw Failure.isLocked }
            try service.update(.item(existing.persistentReference, for: .update),
                               with: ItemUpdate(label: label, secret: secret), in: keychain,
                               grants: grants(for: existing.uuid))
            server.itemSignal("ItemChanged", collection: collectionPath(keychain), item: itemPath(keychain, existing.uuid))
            server.changed(.update, keychain, by: caller)
            return itemPath(keychain, existing.uuid)
        }
        var item = SecretItemMapping.itemAttributes(label: label, attributes: attributes)
        item["v_Data"] = .secret(secret)
        item["r_Attributes"] = true
        var added = Result { () throws(KeychainError) in try service.add(item, to: keychain) }
        if case .failure(let error) = added, error.status == .duplicateItem, !replace {
            item["vwht"] = .string(SecretItemMapping.encode(attributes, distinct: UUID()))
            added = Result { () throws(KeychainError) in try service.add(item, to: keychain) }
        }
        let stored = try added.get()
        server.itemSignal("ItemCreated", collection: collectionPath(keychain), item: itemPath(keychain, stored.item.uuid))
        server.changed(.add, keychain, by: caller)
        return itemPath(keychain, stored.item.uuid)
    }

    /// CreateItem's arguments: the Label and Attributes properties, the Secret, and Replace.
    struct ItemRequest {
        var label = ""
        var attributes: [String: String] = [:]
        var secret: DBusValue
        /// Whether an item with exactly these attributes is updated instead of a new one added beside it.
        var replace: Bool
    }

    func itemRequest(_ arguments: [DBusValue]) throws -> ItemRequest {
        guard arguments.count == 3, let properties = arguments[0].dictionaryEntries, case .boolean(let replace) = arguments[2]
        else { throw Failure.invalidArgs("CreateItem(a{sv}, (oayays), b)") }
        var request = ItemRequest(secret: arguments[1], replace: replace)
        for entry in properties {
            switch entry.key.stringValue {
            case "org.freedesktop.Secret.Item.Label": request.label = entry.value.stringValue ?? ""
            case "org.freedesktop.Secret.Item.Attributes":
                guard let pairs = entry.value.stringDictionaryValue else { throw Failure.invalidArgs("Attributes must be a{ss}") }
                request.attributes = pairs
            default: continue
            }
        }
        return request
    }

    // MARK: - Items

    func itemCall(_ member: String, keychain: KeychainReference, item id: UUID, _ arguments: [DBusValue]) throws -> [DBusValue] {
        switch member {
        case "GetSecret":
            guard let session = arguments.first?.stringValue else { throw Failure.invalidArgs("GetSecret(o)") }
            _ = try server.session(session, owner: caller)
            _ = try unlockedItem(keychain, id)
            return [try secretValue(keychain, id, session: session)]
        case "SetSecret":
            guard let argument = arguments.first else { throw Failure.invalidArgs("SetSecret((oayays))") }
            _ = try unlockedItem(keychain, id)
            let (secret, _) = try secretArgument(argument)
            try service.update(.item(reference(id), for: .update), with: ItemUpdate(secret: secret), in: keychain,
                               grants: grants(for: id))
            server.itemSignal("ItemChanged", collection: collectionPath(keychain), item: itemPath(keychain, id))
            server.changed(.update, keychain, by: caller)
            return []
        case "Delete":
            _ = try unlockedItem(keychain, id)
            try service.delete(.item(reference(id), for: .delete), in: keychain, grants: grants(for: id))
            server.itemSignal("ItemDeleted", collection: collectionPath(keychain), item: itemPath(keychain, id))
            server.changed(.delete, keychain, by: caller)
            return [.objectPath("/")]
        default:
            throw server.unknownMethod(member)
        }
    }

    func reference(_ id: UUID) -> PersistentReference { PersistentReference(itemClass: .genericPassword, uuid: id) }

    func found(_ keychain: KeychainReference, _ id: UUID, secret: Bool = false) throws -> FoundItem {
        let query = ItemQuery.item(reference(id), for: .search, returning: secret ? [.attributes, .data] : .attributes)
        let items: [FoundItem]
        do throws(KeychainError) {
            items = try service.search(query, in: keychain, grants: grants(for: id))
        } catch {
            if error.status == .itemNotFound { throw Failure.noSuchObject }
            throw error
        }
        guard let item = items.first else { throw Failure.noSuchObject }
        return item
    }

    /// The Secret structure (session, parameters, value, content type): the value itself in a plain session,
    /// encrypted under the session's key with the IV as parameters in an encrypted one.
    func secretValue(_ keychain: KeychainReference, _ id: UUID, session path: String) throws -> DBusValue {
        _ = try server.session(path, owner: caller)  // NoSession before the item is even looked at
        let item = try found(keychain, id, secret: true)
        return try secretStructure(item.secret ?? SecretBytes(Data()), contentType: "text/plain", session: path)
    }

    /// `secret` as a Secret structure for the caller's session at `path`.
    func secretStructure(_ secret: SecretBytes, contentType: String, session path: String) throws -> DBusValue {
        let session = try server.session(path, owner: caller)
        var bytes = secret.withUnsafeBytes { [UInt8]($0) }
        defer { for i in bytes.indices { bytes[i] = 0 } }
        guard let cipher = session.cipher else {
            return .structure([.objectPath(path), .bytes([]), .bytes(bytes), .string(contentType)])
        }
        guard let (iv, ciphertext) = cipher.encrypt(bytes) else { throw Failure.invalidArgs("encryption failed") }
        return .structure([.objectPath(path), .bytes(iv), .bytes(ciphertext), .string(contentType)])
    }

    /// A Secret argument: its session must be the caller's; its value decrypted when the session is encrypted.
    func secretArgument(_ value: DBusValue) throws -> (SecretBytes, String) {
        guard case .structure(let fields) = value, fields.count == 4, let path = fields[0].stringValue,
              let parameters = fields[1].byteArray, let bytes = fields[2].byteArray
        else { throw Failure.invalidArgs("a secret is (oayays)") }
        let session = try server.session(path, owner: caller)
        var plain: [UInt8]
        if let cipher = session.cipher {
            guard let opened = cipher.decrypt(bytes, iv: parameters) else {
                throw Failure.invalidArgs("the secret does not decrypt with the session's key")
            }
            plain = opened
        } else {
            plain = bytes
        }
        return (SecretBytes(consuming: &plain), fields[3].stringValue ?? "text/plain")
    }

    /// The generic passwords of `keychain` whose Secret Service attributes include all of `wanted`.
    func search(_ wanted: [String: String], in keychain: KeychainReference) throws -> [Item] {
        let found: [FoundItem]
        do throws(KeychainError) {
            found = try service.search(SecretItemMapping.query(for: wanted), in: keychain)
        } catch {
            // Not found; or locked, where nothing can be matched.
            if error.status == .itemNotFound || error.status == .interactionNotAllowed { return [] }
            throw error
        }
        return found.map(\.item).filter { SecretItemMapping.matches($0, wanted) }
    }

    // MARK: - Properties

    func properties(_ member: String, path: String, arguments: [DBusValue]) throws -> [DBusValue] {
        guard let interface = arguments.first?.stringValue else { throw Failure.invalidArgs("an interface name") }
        // Only what is asked: a collection's Items lists every item, which a Get of Locked must not pay for.
        let wanted = member == "Get" && arguments.count == 2 ? arguments[1].stringValue : nil
        let all = try propertyValues(path: path, interface: interface, only: wanted)
        switch member {
        case "GetAll":
            return [.dictionary(keySignature: "s", valueSignature: "v",
                                all.sorted { $0.key < $1.key }.map { .init(.string($0.key), .variant($0.value)) })]
        case "Get":
            guard arguments.count == 2, let name = arguments[1].stringValue else { throw Failure.invalidArgs("Get(s, s)") }
            guard let value = all[name] else {
                throw Failure(name: "org.freedesktop.DBus.Error.UnknownProperty", message: "no property \(name)")
            }
            return [.variant(value)]
        case "Set":
            guard arguments.count == 3, let name = arguments[1].stringValue, case .variant(let value) = arguments[2] else {
                throw Failure.invalidArgs("Set(s, s, v)")
            }
            if path.hasPrefix(SecretSessionCollection.path) {
                try setSessionProperty(path: path, name: name, value: value)
                return []
            }
            guard let (keychain, id) = try resolve(path) else {
                throw Failure(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "\(name) cannot be set here")
            }
            guard let id else { return try setCollectionProperty(keychain, name: name, value: value) }
            let current = try unlockedItem(keychain, id)
            switch name {
            case "Label":
                guard let label = value.stringValue else { throw Failure.invalidArgs("Label is a string") }
                try service.update(.item(reference(id), for: .update), with: ItemUpdate(label: label), in: keychain,
                                   grants: grants(for: id))
            case "Attributes":
                guard var attributes = value.stringDictionaryValue, SecretItemMapping.isStorable(attributes) else {
                    throw Failure.invalidArgs("Attributes is a{ss}")
                }
                // The item's schema (its Type) stays when new attributes leave it out, as gnome-keyring keeps it.
                attributes["xdg:schema"] = attributes["xdg:schema"] ?? SecretItemMapping.attributes(of: current)["xdg:schema"]
                var changes = SecretItemMapping.itemAttributes(label: "", attributes: attributes)
                changes.removeValue(forKey: "class")
                changes.removeValue(forKey: "labl")
                try service.update(.item(reference(id), for: .update),
                                   with: QueryParser.parseUpdate(changes, itemClass: .genericPassword), in: keychain,
                                   grants: grants(for: id))
            default:
                throw Failure(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "\(name) is read-only")
            }
            server.itemSignal("ItemChanged", collection: collectionPath(keychain), item: itemPath(keychain, id))
            server.propertiesChanged(itemPath(keychain, id), interface: SecretServiceServer.itemInterface, [name: value])
            server.changed(.update, keychain, by: caller)
            return []
        default:
            throw server.unknownMethod(member)
        }
    }

    private func propertyValues(path: String, interface: String, only wanted: String?) throws -> [String: DBusValue] {
        if path == SecretServiceServer.servicePath {
            guard interface == SecretServiceServer.serviceInterface else { return [:] }
            return ["Collections": .array(elementSignature: "o", (collections.map(collectionPath) + [SecretSessionCollection.path])
                .map { .objectPath($0) })]
        }
        if path == SecretSessionCollection.path || SecretSessionCollection.itemID(path) != nil {
            return try sessionPropertyValues(path: path, interface: interface)
        }
        guard let (keychain, id) = try resolve(path) else { throw Failure.unknownObject(path) }
        let locked = isLocked(keychain)
        guard let id else {
            guard interface == SecretServiceServer.collectionInterface else { return [:] }
            let times = fileTimes(keychain)
            var values: [String: DBusValue] = ["Label": .string(server.labels.label(of: keychain) ?? Self.name(of: keychain)),
                                               "Locked": .boolean(locked),
                                               "Created": .uint64(times.created), "Modified": .uint64(times.modified)]
            if wanted == nil || wanted == "Items" {
                let items = locked ? [] : try search([:], in: keychain).map { DBusValue.objectPath(itemPath(keychain, $0.uuid)) }
                values["Items"] = .array(elementSignature: "o", items)
            }
            return values
        }
        guard interface == SecretServiceServer.itemInterface else { return [:] }
        guard !locked else { return ["Locked": .boolean(true)] }
        let item = try found(keychain, id).item
        let lockedForCaller = !isReadable(item)
        func seconds(_ code: String) -> UInt64 {
            UInt64(max(0, item.attributes[code]?.dateValue?.timeIntervalSince1970 ?? 0))
        }
        let attributes = SecretItemMapping.attributes(of: item)
        return [
            "Locked": .boolean(lockedForCaller), "Attributes": .stringDictionary(attributes),
            "Label": .string(item.attributes["labl"]?.stringValue ?? ""), "Created": .uint64(seconds("cdat")),
            "Modified": .uint64(seconds("mdat")), "Type": .string(attributes["xdg:schema"] ?? ""),
        ]
    }
}
