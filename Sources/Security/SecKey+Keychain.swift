import Foundation
import KeychainClient
import KeychainCore
import KeychainKeys

// Keys stored in the keychain: the attributes Apple derives for them, SecKeyCreateRandomKey with kSecAttrIsPermanent,
// kSecValueRef on SecItemAdd and kSecReturnRef on SecItemCopyMatching.

enum StoredKeys {
    /// The item for `key`: the caller's attributes, then what Apple derives from the key itself (class, type,
    /// sizes, application label = SHA-1 of the public key, usage flags), which the caller cannot contradict.
    static func itemEntries(_ key: AsymmetricKey, _ extra: [String: QueryValue]) -> [String: QueryValue] {
        var entries = extra
        let isPrivate = key.keyClass == .private
        let bits = Int64(key.keySizeInBits)
        entries["class"] = .string("keys")
        entries["kcls"] = .int(isPrivate ? 1 : 0)
        entries["type"] = .int(key.type == .rsa ? 42 : 73)
        entries["bsiz"] = .int(bits)
        entries["esiz"] = .int(bits)
        entries["klbl"] = .data(key.applicationLabel)
        entries["perm"] = .bool(true)
        let usage: [(String, Bool)] = [("encr", !isPrivate), ("decr", isPrivate), ("drve", true), ("sign", isPrivate),
                                       ("vrfy", !isPrivate), ("wrap", !isPrivate), ("unwp", isPrivate)]
        for (code, value) in usage where entries[code] == nil { entries[code] = .bool(value) }
        if entries["extr"] == nil { entries["extr"] = .bool(true) }
        if entries["sens"] == nil { entries["sens"] = .bool(false) }
        entries["v_Data"] = .secret(SecretBytes(key.externalRepresentation))
        return entries
    }

    /// Stores a new key pair as SecKeyCreateRandomKey does with kSecAttrIsPermanent: the private key (and the public
    /// one when asked) as `keys` items; top-level attributes apply to both, kSecPrivateKeyAttrs / kSecPublicKeyAttrs
    /// to each. Returns a reference to the stored private key; nothing stays stored if any part fails.
    static func store(_ key: AsymmetricKey, parameters: NSDictionary, storePrivate: Bool, storePublic: Bool)
        throws(KeychainError) -> SecKey
    {
        let generation: Set<String> = ["type", "bsiz", "private", "public", "perm", "tkid", "class"]
        var general: [String: QueryValue] = [:]
        for (name, value) in try Bridge.entries(parameters) where !generation.contains(name) { general[name] = value }
        func specific(_ name: CFString) throws(KeychainError) -> [String: QueryValue] {
            guard let dictionary = parameters[name as String] as? NSDictionary else { return [:] }
            return try Bridge.entries(dictionary).filter { $0.key != "perm" }
        }
        let client = try KeychainClient.shared()
        var stored: Data?
        var storedItem: Item?
        if storePrivate {
            let entries = itemEntries(key, general.merging(try specific(kSecPrivateKeyAttrs)) { _, own in own })
            let found = try client.add(entries)
            stored = found.item.persistentReference.data
            storedItem = found.item
        }
        if storePublic {
            // An access control guards the private key's use; the public key is public.
            var publicGeneral = general
            publicGeneral.removeValue(forKey: "accc")
            let entries = itemEntries(key.publicKey, publicGeneral.merging(try specific(kSecPublicKeyAttrs)) { _, own in own })
            do {
                _ = try client.add(entries)
            } catch {
                if let stored { _ = try? client.delete(["class": .string("keys"), "v_PersistentRef": .data(stored)]) }
                throw error
            }
        }
        guard let stored, let storedItem else { return SecKey(key) }
        return SecKey(storedPrivateKey: key.publicKey, reference: stored, attributes: Bridge.attributes(of: storedItem))
    }

    /// The SecKey kSecReturnRef gives for a found `keys` item (nil for symmetric keys): a reference for a private
    /// key (its public half asked of the service, which keeps the private bytes), the key itself for a public one.
    static func reference(for found: FoundItem) throws(KeychainError) -> SecKey? {
        let attributes = found.item.attributes
        guard let typeNumber = attributes["type"]?.numberValue,
              let type = AsymmetricKey.KeyType(rawValue: String(typeNumber))
        else { return nil }
        let reference = found.item.persistentReference.data
        let client = try KeychainClient.shared()
        switch attributes["kcls"]?.numberValue {
        case 1:
            let publicBytes = try client.service.useKey(["v_PersistentRef": .data(reference)], KeyUse(.copyPublicKey), in: nil)
            let publicKey = try publicBytes.withUnsafeBytes { raw throws(KeychainError) in
                try AsymmetricKey(externalRepresentation: Data(raw), type: type, keyClass: .public)
            }
            return SecKey(storedPrivateKey: publicKey, reference: reference, attributes: Bridge.attributes(of: found.item))
        case 0:
            let withData = try client.search(["v_PersistentRef": .data(reference), "r_Data": .bool(true)])
            guard let secret = withData.first?.secret else { return nil }
            return SecKey(try secret.withUnsafeBytes { raw throws(KeychainError) in
                try AsymmetricKey(externalRepresentation: Data(raw), type: type, keyClass: .public)
            })
        default:
            return nil
        }
    }
}
