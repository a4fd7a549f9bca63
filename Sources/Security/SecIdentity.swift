import Foundation
import KeychainCertificates
import KeychainClient
import KeychainCore
import KeychainKeys

/// `SecIdentity`: a certificate and the private key that belongs to it, the key whose kSecAttrApplicationLabel
/// (SHA-1 of its public key) equals the certificate's kSecAttrPublicKeyHash. The keychain stores no identity items:
/// `kSecClassIdentity` is that join, made at each call, as on Apple's platforms.
public final class SecIdentity: NSObject, @unchecked Sendable {
    // SAFETY: immutable after init.
    let certificate: SecCertificate
    let privateKey: SecKey
    init(certificate: SecCertificate, privateKey: SecKey) {
        self.certificate = certificate
        self.privateKey = privateKey
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? SecIdentity else { return false }
        return other.certificate == certificate && other.privateKey == privateKey
    }

    public override var hash: Int { certificate.hash }
    public override var description: String { "<SecIdentity \(certificate.certificate.subjectSummary ?? "")>" }
}

public typealias SecIdentityRef = SecIdentity

public func SecIdentityGetTypeID() -> CFTypeID { 313 }

public func SecIdentityCopyCertificate(_ identityRef: SecIdentity,
                                      _ certificateRef: UnsafeMutablePointer<SecCertificate?>) -> OSStatus
{
    certificateRef.pointee = identityRef.certificate
    return errSecSuccess
}

public func SecIdentityCopyPrivateKey(_ identityRef: SecIdentity, _ privateKeyRef: UnsafeMutablePointer<SecKey?>)
    -> OSStatus
{
    privateKeyRef.pointee = identityRef.privateKey
    return errSecSuccess
}

/// The identity of a certificate whose private key is in the keychain (macOS); errSecItemNotFound without one.
public func SecIdentityCreateWithCertificate(_ keychainOrArray: CFTypeRef?, _ certificateRef: SecCertificate,
                                             _ identityRef: UnsafeMutablePointer<SecIdentity?>) -> OSStatus
{
    run { () throws(KeychainError) in
        guard let found = try Identities.privateKey(forPublicKeyHash: certificateRef.certificate.publicKeyHash),
              let key = try StoredKeys.reference(for: found)
        else { throw .itemNotFound() }
        identityRef.pointee = SecIdentity(certificate: certificateRef, privateKey: key)
    }
}

/// kSecClassIdentity over the certificate and key items.
enum Identities {
    /// The private key item whose application label is `hash`, if the keychain holds one.
    static func privateKey(forPublicKeyHash hash: Data) throws(KeychainError) -> FoundItem? {
        do {
            return try KeychainClient.shared().search([
                "class": "keys", "kcls": .int(1), "klbl": .data(hash), "r_Attributes": true, "r_PersistentRef": true,
            ]).first
        } catch KeychainStatus.itemNotFound {
            return nil
        }
    }

    /// Every (certificate, private key) pair whose certificate matches `query` (its attributes are the
    /// certificate's), in the certificates' order, up to the query's limit.
    static func pairs(_ query: [String: QueryValue], limit: Int?) throws(KeychainError) -> [(FoundItem, FoundItem)] {
        var certificates = query.filter { !$0.key.hasPrefix("r_") && $0.key != "m_Limit" }
        certificates["class"] = "cert"
        certificates["r_Data"] = true
        certificates["r_Attributes"] = true
        certificates["r_PersistentRef"] = true
        certificates["m_Limit"] = "m_LimitAll"
        var out: [(FoundItem, FoundItem)] = []
        for certificate in try KeychainClient.shared().search(certificates) {
            guard let hash = certificate.item.attributes["pkhh"]?.dataValue,
                  let key = try privateKey(forPublicKeyHash: hash)
            else { continue }
            out.append((certificate, key))
            if let limit, out.count >= limit { break }
        }
        if out.isEmpty { throw .itemNotFound() }
        return out
    }

    /// SecItemCopyMatching on identities: a SecIdentity for kSecReturnRef; the certificate's attributes, data and
    /// persistent reference for the other return types.
    static func copyMatching(_ query: [String: QueryValue], _ parsed: ItemQuery) throws(KeychainError) -> AnyObject? {
        var results: [AnyObject] = []
        for (certificateItem, keyItem) in try pairs(query, limit: parsed.limit.count) {
            let types = parsed.returnTypes
            var reference: SecIdentity?
            if types.contains(.ref) {
                guard let der = certificateItem.secret?.unprotectedData(),
                      let certificate = SecCertificateCreateWithData(nil, der as NSData),
                      let key = try StoredKeys.reference(for: keyItem)
                else { continue }
                reference = SecIdentity(certificate: certificate, privateKey: key)
            }
            var shaped = Bridge.result(for: certificateItem, types: types)
            if let dictionary = shaped as? NSDictionary {
                var extra: [String: AnyObject] = ["class": "idnt" as NSString]
                if let reference { extra[kSecValueRef as String] = reference }
                shaped = Bridge.dictionary(dictionary, adding: extra)
            } else if let reference {
                shaped = reference
            }
            if let shaped { results.append(shaped) }
        }
        if results.isEmpty { throw .itemNotFound() }
        return parsed.limit.returnsArray ? NSArray(array: results) : results.first
    }

    /// SecItemAdd of an identity: the certificate, then its private key (a key another certificate already brought is
    /// shared). The other attributes (label, access group, accessibility) apply to both.
    static func add(_ identity: SecIdentity, attributes: CFDictionary) throws(KeychainError) {
        let dictionary = (attributes as NSDictionary).mutableCopy() as! NSMutableDictionary
        dictionary.removeObject(forKey: kSecValueRef as String)
        dictionary.removeObject(forKey: kSecClass as String)
        var common = try Bridge.entries(dictionary)
        for name in common.keys where name.hasPrefix("r_") { common.removeValue(forKey: name) }
        let client = try KeychainClient.shared()
        var certificateAttributes = common
        certificateAttributes.removeValue(forKey: "accc")
        let certificate = try client.add(identity.certificate.certificate.itemAttributes(certificateAttributes))
        guard let key = identity.privateKey.key else { return }  // a stored key is in the keychain already
        do throws(KeychainError) {
            _ = try client.add(key.itemAttributes(common))
        } catch KeychainStatus.duplicateItem {
            // the key is there already
        } catch {
            _ = try? client.delete(["v_PersistentRef": .data(certificate.item.persistentReference.data)])
            throw error
        }
    }

    /// SecItemDelete on identities: each matching certificate and its private key.
    static func delete(_ query: [String: QueryValue]) throws(KeychainError) {
        let client = try KeychainClient.shared()
        for (certificate, key) in try pairs(query, limit: nil) {
            _ = try client.delete(["v_PersistentRef": .data(certificate.item.persistentReference.data)])
            _ = try client.delete(["v_PersistentRef": .data(key.item.persistentReference.data)])
        }
    }
}
