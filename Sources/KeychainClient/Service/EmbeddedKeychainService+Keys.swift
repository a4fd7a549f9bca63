import Foundation
import KeychainCore
import KeychainKeys

extension EmbeddedKeychainService {
    /// Runs a private-key operation on the one private key `query` selects, here, where the key lives: its bytes
    /// are opened for this call only and never returned (only signatures, plaintexts, shared secrets, the public
    /// key). The key's access control is checked for the use (PrivateKeyUsage: the constraints guard signing).
    public func useKey(_ query: ItemQuery, _ use: KeyUse, in keychain: KeychainReference?)
        throws(KeychainError) -> SecretBytes
    {
        var query = try query.checked()
        guard query.operation == .search else { throw .param("a key is found by a search request") }
        if query.persistentReference == nil {  // a persistent reference stands alone (Apple's rule)
            guard query.itemClass == .key else { throw .param("a key operation needs a keys query") }
            query.attributes["kcls"] = .number(1)  // the private key
        }
        query.returnTypes = [.data, .attributes]
        query.limit = .one
        let found = try searchForKeyUse(query, in: keychain)
        guard let item = found.first, item.item.itemClass == .key, item.item.attributes["kcls"]?.numberValue == 1 else {
            throw .itemNotFound()
        }
        try AccessEvaluator.checkKeyUsage(item.item, for: use.operation)
        return SecretBytes(try Self.privateKey(of: item).perform(use))
    }

    /// The private key a found `keys` item holds (its data read with it).
    static func privateKey(of item: FoundItem) throws(KeychainError) -> AsymmetricKey {
        guard let secret = item.secret else { throw .itemNotFound() }
        guard let type = item.item.attributes["type"]?.numberValue.flatMap({ AsymmetricKey.KeyType(rawValue: String($0)) })
        else { throw KeychainError(.unimplemented, "only EC and RSA keys are used here") }
        return try secret.withUnsafeBytes { raw throws(KeychainError) in
            try AsymmetricKey(externalRepresentation: Data(raw), type: type, keyClass: .private)
        }
    }

    /// Generates a key pair here and stores it (the private key, and the public one when asked): the private key
    /// exists only in this service. If storing the public key fails, the private one is removed again.
    public func generateKeyPair(_ generation: KeyGeneration, in keychain: KeychainReference?) throws(KeychainError)
        -> GeneratedKeyPair
    {
        guard let type = AsymmetricKey.KeyType(rawValue: generation.keyType) else {
            throw KeychainError(.param, "kSecAttrKeyType must be kSecAttrKeyTypeECSECPrimeRandom or kSecAttrKeyTypeRSA")
        }
        let key = try AsymmetricKey.generate(type: type, bits: generation.bits)
        let stored = try add(key.itemAttributes(generation.privateAttributes), to: keychain)
        if let publicAttributes = generation.publicAttributes {
            // An access control guards the private key's use; the public key is public.
            var attributes = publicAttributes
            attributes.removeValue(forKey: "accc")
            do {
                try add(key.publicKey.itemAttributes(attributes), to: keychain)
            } catch {
                _ = try? delete(.item(stored.item.persistentReference, for: .delete), in: keychain)
                throw error
            }
        }
        return GeneratedKeyPair(privateKey: FoundItem(item: stored.item, secret: nil),
                                publicKey: key.publicKey.externalRepresentation)
    }
}
