import Foundation
import KeychainCertificates
import KeychainCore
import KeychainKeys

extension EmbeddedKeychainService {
    /// Opens the file here and stores what it holds: each private key (labelled with its certificate's friendly
    /// name or subject summary), public key and certificate, with the attributes Apple derives. All or none: an
    /// item that fails takes back the ones stored before it. Duplicates are skipped.
    public func importItems(_ request: ItemImport, into keychain: KeychainReference?) throws(KeychainError)
        -> [FoundItem]
    {
        let passphrase = request.passphrase.map { secret in
            secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }
        let file = try request.file.withUnsafeBytes { raw throws(KeychainError) in
            try ItemFile.read(Data(raw), format: request.format, passphrase: passphrase)
        }
        var items: [[String: QueryValue]] = []
        for (key, attributes) in file.privateKeys {
            let certificate = file.certificates.first { $0.certificate.publicKeyHash == key.applicationLabel }
            var entries = request.attributes.merging(request.privateKeyAttributes) { _, own in own }
            entries["labl"] = .string(attributes.friendlyName ?? certificate?.attributes.friendlyName
                ?? certificate?.certificate.subjectSummary ?? "Imported Private Key")
            items.append(key.itemAttributes(entries))
        }
        for key in file.publicKeys {
            var entries = request.attributes
            entries.removeValue(forKey: "accc")
            entries["labl"] = .string("Imported Public Key")
            items.append(key.itemAttributes(entries))
        }
        for (certificate, _) in file.certificates {
            var entries = request.attributes
            entries.removeValue(forKey: "accc")
            items.append(certificate.itemAttributes(entries))
        }
        var stored: [FoundItem] = []
        var duplicates = 0
        for entries in items {
            do {
                stored.append(try add(entries, to: keychain))
            } catch KeychainStatus.duplicateItem {
                duplicates += 1
            } catch {
                for item in stored {
                    _ = try? delete(.item(item.item.persistentReference, for: .delete), in: keychain)
                }
                throw error
            }
        }
        if stored.isEmpty, duplicates > 0 { throw .duplicateItem() }
        return stored
    }

    /// Writes the file here. Identities: each certificate with its private key, read here through the engine's
    /// rules (a key that must not leave: errSecKeyIsSensitive), into a PKCS#12 under the passphrase.
    public func exportItems(_ request: ItemExport, from keychain: KeychainReference?) throws(KeychainError)
        -> SecretBytes
    {
        let records = try certificates([:], in: keychain)
        switch request.format {
        case .pkcs12:
            guard let passphrase = request.passphrase.map({ secret in
                secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            }), !passphrase.isEmpty else {
                throw KeychainError(.passphraseRequired, "a PKCS#12 export needs a passphrase")
            }
            var archive = PKCS12Archive(keys: [], certificates: [])
            for record in records {
                guard let certificate = Self.certificate(of: record.item) else { continue }
                let friendlyName = record.item.item.attributes["labl"]?.stringValue
                if record.hasPrivateKey, request.selection != .certificates {
                    let key = try privateKey(forPublicKeyHash: certificate.publicKeyHash, in: keychain)
                    let attributes = PKCS12Archive.BagAttributes(friendlyName: friendlyName,
                                                                 localKeyID: certificate.sha1Fingerprint)
                    archive.keys.append((key, attributes))
                    archive.certificates.append((certificate, attributes))
                } else if request.selection != .identities {
                    archive.certificates.append((certificate, .init()))
                }
            }
            guard !archive.keys.isEmpty || !archive.certificates.isEmpty else { throw .itemNotFound() }
            return SecretBytes(try archive.serialized(password: passphrase))
        case .pemSequence, .x509:
            guard request.selection != .identities else {
                throw KeychainError(.unsupportedFormat, "identities are exported as PKCS#12 (-f pkcs12)")
            }
            let certificates = records.compactMap { Self.certificate(of: $0.item) }
            guard !certificates.isEmpty else { throw .itemNotFound() }
            if request.format == .x509 {
                guard certificates.count == 1 else {
                    throw KeychainError(.param, "-f x509 writes one certificate; \(certificates.count) match (use -f pemseq)")
                }
                return SecretBytes(certificates[0].der)
            }
            return SecretBytes(Data(certificates.map { PEM.encode($0.der, label: "CERTIFICATE") }.joined().utf8))
        case .openssl, .pkcs8:
            throw KeychainError(.unsupportedFormat, "keys are exported inside identities (-t identities -f pkcs12)")
        }
    }

    public func certificates(_ query: ItemQuery, in keychain: KeychainReference?) throws(KeychainError)
        -> [CertificateRecord]
    {
        var query = query
        guard query.itemClass == .certificate, query.operation == .search else {
            throw .param("certificates are found by a certificate search")
        }
        query.returnTypes = [.data, .attributes, .persistentRef]
        query.limit = .all
        let found: [FoundItem]
        do {
            found = try search(query, in: keychain)
        } catch KeychainStatus.itemNotFound {
            return []
        }
        var records: [CertificateRecord] = []
        for item in found {
            guard let certificate = Self.certificate(of: item) else { continue }
            let keyQuery = ItemQuery.search(.key, [.keyClass: .number(1), .applicationLabel: .data(certificate.publicKeyHash)],
                                            returning: .attributes)
            let hasKey = ((try? search(keyQuery, in: keychain)) ?? []).isEmpty == false
            records.append(CertificateRecord(item: item, sha1: certificate.sha1Fingerprint,
                                             sha256: certificate.sha256Fingerprint,
                                             commonName: certificate.commonNames.last,
                                             emailAddresses: certificate.emailAddresses,
                                             subjectSummary: certificate.subjectSummary, hasPrivateKey: hasKey,
                                             notBefore: certificate.notBefore, notAfter: certificate.notAfter))
        }
        return records
    }

    private static func certificate(of item: FoundItem) -> Certificate? {
        item.secret.flatMap { secret in secret.withUnsafeBytes { Certificate(der: Data($0)) } }
    }

    /// The private key whose application label is `hash`, its bytes read under the engine's rules.
    private func privateKey(forPublicKeyHash hash: Data, in keychain: KeychainReference?) throws(KeychainError)
        -> AsymmetricKey
    {
        let found = try search(.search(.key, [.keyClass: .number(1), .applicationLabel: .data(hash)],
                                       returning: [.data, .attributes]), in: keychain)
        guard let item = found.first else { throw .itemNotFound() }
        return try Self.privateKey(of: item)
    }
}
