import Foundation
import KeychainCertificates
import KeychainClient
import KeychainCore
import KeychainKeys

// SecPKCS12Import as on macOS: the identities and certificates of a .p12, and (unless kSecImportToMemoryOnly) the
// private keys and certificates stored in the keychain, duplicates skipped.

public nonisolated(unsafe) let kSecImportExportPassphrase: CFString = "passphrase" as NSString
public nonisolated(unsafe) let kSecImportExportKeychain: CFString = "keychain" as NSString
public nonisolated(unsafe) let kSecImportExportAccess: CFString = "access" as NSString
public nonisolated(unsafe) let kSecImportToMemoryOnly: CFString = "memory" as NSString
public nonisolated(unsafe) let kSecImportItemLabel: CFString = "label" as NSString
public nonisolated(unsafe) let kSecImportItemKeyID: CFString = "keyid" as NSString
public nonisolated(unsafe) let kSecImportItemTrust: CFString = "trust" as NSString
public nonisolated(unsafe) let kSecImportItemCertChain: CFString = "chain" as NSString
public nonisolated(unsafe) let kSecImportItemIdentity: CFString = "identity" as NSString

/// One dictionary per identity (kSecImportItemIdentity, kSecImportItemCertChain leaf first, kSecImportItemLabel,
/// kSecImportItemKeyID), then one with the certificates no identity's chain holds. No kSecImportItemTrust: there is
/// no trust evaluation here. Wrong passphrase: errSecAuthFailed; not a PKCS#12 file (or a scheme this reader
/// lacks): errSecDecode.
public func SecPKCS12Import(_ pkcs12_data: CFData, _ options: CFDictionary,
                            _ items: UnsafeMutablePointer<CFArray?>) -> OSStatus
{
    run { () throws(KeychainError) in
        let options = options as NSDictionary
        let passphrase = options[kSecImportExportPassphrase as String] as? String ?? ""
        let archive: PKCS12Archive
        do throws(KeychainError) {
            archive = try PKCS12Archive(der: pkcs12_data as Data, password: passphrase)
        } catch {
            throw error.status == .authFailed ? error : KeychainError(.decode, error.message)
        }
        let memoryOnly = (options[kSecImportToMemoryOnly as String] as? Bool) == true
        let keychain = (options[kSecImportExportKeychain as String] as? SecKeychain).map { KeychainReference(path: $0.url.path) }
        var results: [NSDictionary] = []
        var referenced = Set<Data>()
        for identity in archive.identities {
            let certificate = SecCertificate(identity.certificate)
            var key = SecKey(identity.key)
            var label = identity.attributes.friendlyName ?? identity.certificate.subjectSummary
            var keyID = identity.attributes.localKeyID ?? identity.key.applicationLabel
            if !memoryOnly {
                key = try PKCS12Storage.store(identity, in: keychain)
                label = identity.certificate.subjectSummary
                keyID = identity.key.applicationLabel
            }
            let chain = identity.chain.map(SecCertificate.init)
            referenced.formUnion(identity.chain.map(\.der))
            var entry: [String: AnyObject] = [
                kSecImportItemIdentity as String: SecIdentity(certificate: certificate, privateKey: key),
                kSecImportItemCertChain as String: NSArray(array: chain),
                kSecImportItemKeyID as String: keyID as NSData,
            ]
            if let label { entry[kSecImportItemLabel as String] = label as NSString }
            results.append(NSDictionary(dictionary: entry))
        }
        let unreferenced = archive.certificates.map(\.certificate).filter { !referenced.contains($0.der) }
        if !unreferenced.isEmpty {
            if !memoryOnly {
                for certificate in unreferenced { try PKCS12Storage.store(certificate, in: keychain) }
            }
            results.append(NSDictionary(dictionary: [
                kSecImportItemCertChain as String: NSArray(array: unreferenced.map(SecCertificate.init)),
            ]))
        }
        items.pointee = NSArray(array: results)
    }
}

enum PKCS12Storage {
    /// Stores the identity's private key and its chain (duplicates skipped) and returns the stored key's reference.
    static func store(_ identity: PKCS12Archive.Identity, in keychain: KeychainReference?) throws(KeychainError) -> SecKey {
        let service = try KeychainClient.shared().service
        var attributes: [String: QueryValue] = [:]
        if let label = identity.attributes.friendlyName ?? identity.certificate.subjectSummary {
            attributes["labl"] = .string(label)
        }
        let stored: FoundItem
        do {
            stored = try service.add(identity.key.itemAttributes(attributes).merging(["r_Attributes": .bool(true),
                                                                                       "r_PersistentRef": .bool(true)]) { $1 },
                                     to: keychain)
        } catch KeychainStatus.duplicateItem {
            guard let existing = try service.search(["class": "keys", "kcls": .int(1),
                                                     "klbl": .data(identity.key.applicationLabel),
                                                     "r_Attributes": .bool(true), "r_PersistentRef": .bool(true)],
                                                    in: keychain).first
            else { throw .itemNotFound() }
            stored = existing
        }
        for certificate in identity.chain { try store(certificate, in: keychain) }
        guard let reference = try StoredKeys.reference(for: stored) else { throw .itemNotFound() }
        return reference
    }

    static func store(_ certificate: Certificate, in keychain: KeychainReference?) throws(KeychainError) {
        do {
            _ = try KeychainClient.shared().service.add(certificate.itemAttributes([:]), to: keychain)
        } catch KeychainStatus.duplicateItem {
            // already there: skipped, as Apple's import does
        }
    }
}
