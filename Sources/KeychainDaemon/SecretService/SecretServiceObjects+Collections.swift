import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus

/// Collections made, deleted and aliased through the Secret Service: each is a keychain file, so these are the
/// same acts as `security create-keychain`, `delete-keychain` and `default-keychain -s`, asked of the user first.
extension SecretServiceObjects {
    /// CreateCollection(properties, alias): the existing keychain the alias or label names, else a new keychain
    /// whose password the user chooses in a prompt (the result is its path). With nobody to ask, the default
    /// keychain is made at once without a password, as the first SecItem call makes it.
    func createCollection(label: String, alias: String) throws -> [DBusValue] {
        let keychain: KeychainReference
        if alias == "default" || label.isEmpty {
            keychain = service.defaultKeychain()
        } else {
            keychain = service.resolve(Self.fileName(forLabel: label))
        }
        if (try? service.state(of: keychain).exists) == true { return [.objectPath(collectionPath(keychain)), .objectPath("/")] }
        guard server.desktopPrompter() != nil else {
            guard keychain == service.defaultKeychain() else {
                throw Failure(name: "org.freedesktop.DBus.Error.NotSupported",
                              message: "a new keychain needs its password chosen, and there is no display to ask on")
            }
            try service.createKeychainIfMissing(keychain, password: nil, settings: .never)
            labelNew(keychain, label)
            server.changed(.keychainListChanged, keychain, by: caller)
            return [.objectPath(collectionPath(keychain)), .objectPath("/")]
        }
        let prompt = server.makePrompt(owner: caller, emptyResult: .objectPath("/")) { [objects = self] prompter, isDismissed in
            guard let prompter, let password = objects.askNewPassword(for: keychain, prompter: prompter), !isDismissed()
            else { return nil }
            do throws(KeychainError) {
                try objects.service.createKeychainIfMissing(keychain, password: password.isEmpty ? nil : password,
                                                            settings: .never)
                if keychain != objects.service.defaultKeychain(), !objects.service.searchList().contains(keychain) {
                    try objects.service.setSearchList(objects.service.searchList() + [keychain])
                }
            } catch {
                return nil
            }
            objects.labelNew(keychain, label)
            objects.server.changed(.keychainListChanged, keychain, by: objects.caller)
            return .objectPath(objects.collectionPath(keychain))
        }
        return [.objectPath("/"), .objectPath(prompt)]
    }

    /// Properties.Set on a collection: its Label (kept as a preference; the keychain file and the collection's
    /// path stay as they are). Everything else about a collection is read-only.
    func setCollectionProperty(_ keychain: KeychainReference, name: String, value: DBusValue) throws -> [DBusValue] {
        guard name == "Label" else {
            throw Failure(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "\(name) is read-only")
        }
        guard let label = value.stringValue else { throw Failure.invalidArgs("Label is a string") }
        let shown = try server.labels.setLabel(label, of: keychain, name: Self.name(of: keychain))
        server.propertiesChanged(collectionPath(keychain), interface: SecretServiceServer.collectionInterface,
                                 ["Label": .string(shown)])
        server.signal(SecretServiceServer.servicePath, SecretServiceServer.serviceInterface, "CollectionChanged",
                      [.objectPath(collectionPath(keychain))])
        return []
    }

    /// A keychain file name for a collection label: letters, digits, `-`, `_` and `.`, others as `_`.
    static func fileName(forLabel label: String) -> String {
        let cleaned = String(label.unicodeScalars.prefix(64).map { scalar -> Character in
            scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || "-_.".unicodeScalars.contains(scalar))
                ? Character(scalar) : "_"
        })
        return cleaned.hasPrefix(".") ? "_" + cleaned : cleaned
    }

    /// A new collection keeps the label it was created with ("My Passwords" for the keychain `My_Passwords`); a
    /// label that cannot be kept leaves the name showing.
    func labelNew(_ keychain: KeychainReference, _ label: String) {
        _ = try? server.labels.setLabel(label, of: keychain, name: Self.name(of: keychain))
    }

    /// The new keychain's password, typed twice (empty: no password); nil when cancelled or nobody answers.
    func askNewPassword(for keychain: KeychainReference, prompter: any Prompter) -> SecretBytes? {
        let program = service.caller.application?.path ?? "A program"
        return Asker(prompter: prompter).chooseNewPassword(
            description: "\(program) wants to create the keychain \u{201C}\(Self.name(of: keychain))\u{201D}. "
                + "Choose its password (empty: a keychain without a password).")
    }

    /// Collection.Delete: deletes the keychain file and every item in it once the user says yes (a prompt).
    func deleteCollection(_ keychain: KeychainReference) -> [DBusValue] {
        let prompt = server.makePrompt(owner: caller, emptyResult: .string("")) { [objects = self] prompter, isDismissed in
            guard let prompter else { return nil }
            let program = objects.service.caller.application?.path ?? "A program"
            let question = "\(program) wants to delete the keychain \u{201C}\(Self.name(of: keychain))\u{201D} and every item in it."
            switch Asker(prompter: prompter).confirm(question) {
            case .allow, .alwaysAllow:
                guard !isDismissed(), (try? objects.service.deleteKeychain(keychain)) != nil else { return nil }
                objects.server.changed(.keychainListChanged, keychain, by: objects.caller)
                return .string("")
            case .deny, .cancelled, .unavailable:
                return nil
            }
        }
        return [.objectPath(prompt)]
    }

    /// SetAlias(name, collection): `default` is the default keychain (`security default-keychain -s`). No other
    /// alias is kept: the keychain has one default and a search list, nothing else to name.
    func setAlias(_ name: String, _ path: String) throws -> [DBusValue] {
        guard name == "default" else {
            throw Failure(name: "org.freedesktop.DBus.Error.NotSupported", message: "only the alias default is kept")
        }
        guard path != "/", let (keychain, id) = try resolve(path), id == nil else {
            throw Failure(name: "org.freedesktop.Secret.Error.NoSuchObject", message: "no collection at \(path)")
        }
        try service.setDefaultKeychain(keychain)
        server.changed(.defaultChanged, keychain, by: caller)
        return []
    }

    /// A collection's Created and Modified: its file's birth (status change, where the file system has no birth
    /// time) and modification times, in seconds since 1970.
    func fileTimes(_ keychain: KeychainReference) -> (created: UInt64, modified: UInt64) {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: keychain.path) else { return (0, 0) }
        // Writes land in the write-ahead log first; the file itself changes when the log is folded back.
        let log = try? FileManager.default.attributesOfItem(atPath: keychain.path + "-wal")
        let modified = [attributes, log ?? [:]].compactMap { ($0[.modificationDate] as? Date)?.timeIntervalSince1970 }.max() ?? 0
        let created = (attributes[.creationDate] as? Date)?.timeIntervalSince1970 ?? modified
        return (UInt64(max(0, created)), UInt64(max(0, modified)))
    }
}
