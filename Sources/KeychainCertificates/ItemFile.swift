import Foundation
import KeychainCore
import KeychainKeys
import SwiftASN1

/// The contents of a file `security import` reads: certificates, private and public keys, from PKCS#12, PEM (any
/// number of blocks), a DER certificate or a DER private key (PKCS#8, SEC1, PKCS#1; PKCS#8 encrypted with PBES2).
public struct ItemFile: Sendable {
    public var privateKeys: [(key: AsymmetricKey, attributes: PKCS12Archive.BagAttributes)] = []
    public var publicKeys: [AsymmetricKey] = []
    public var certificates: [(certificate: Certificate, attributes: PKCS12Archive.BagAttributes)] = []

    public init() {}

    /// Reads `data` as `format` (nil: recognised from the contents). A file holding nothing to import, or that is
    /// none of these: errSecUnknownFormat. A PKCS#12 or encrypted key without the passphrase it needs:
    /// errSecPassphraseRequired; with a wrong one: errSecAuthFailed.
    public static func read(_ data: Data, format: ItemFileFormat?, passphrase: String?) throws(KeychainError) -> ItemFile {
        let format = format ?? recognise(data)
        var file = ItemFile()
        switch format {
        case .pkcs12:
            let archive: PKCS12Archive
            do {
                archive = try PKCS12Archive(der: data, password: passphrase)
            } catch where error.status == .authFailed && passphrase == nil {
                throw KeychainError(.passphraseRequired, "the PKCS#12 file needs its passphrase")
            }
            file.privateKeys = archive.keys
            file.certificates = archive.certificates
        case .pemSequence:
            for block in try PEM.blocks(in: data) {
                switch block.label {
                case "CERTIFICATE", "X509 CERTIFICATE", "TRUSTED CERTIFICATE":
                    guard let certificate = Certificate(der: block.der) else {
                        throw KeychainError(.unknownFormat, "a CERTIFICATE block is not a certificate")
                    }
                    file.certificates.append((certificate, .init()))
                case "PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY":
                    file.privateKeys.append((try AsymmetricKey(privateKeyDER: block.der), .init()))
                case "ENCRYPTED PRIVATE KEY":
                    file.privateKeys.append((try decryptPrivateKey(block.der, passphrase: passphrase), .init()))
                case "PUBLIC KEY", "RSA PUBLIC KEY":
                    file.publicKeys.append(try AsymmetricKey(publicKeyDER: block.der))
                default:
                    continue  // parameters and other blocks: nothing to store
                }
            }
        case .x509:
            guard let certificate = Certificate(der: data) else {
                throw KeychainError(.unknownFormat, "not a DER certificate")
            }
            file.certificates.append((certificate, .init()))
        case .openssl, .pkcs8:
            if let key = try? AsymmetricKey(privateKeyDER: data) {
                file.privateKeys.append((key, .init()))
            } else {
                file.privateKeys.append((try decryptPrivateKey(data, passphrase: passphrase), .init()))
            }
        }
        guard !file.privateKeys.isEmpty || !file.publicKeys.isEmpty || !file.certificates.isEmpty else {
            throw KeychainError(.unknownFormat, "no certificate or key in the file")
        }
        return file
    }

    /// PEM when it has a BEGIN line; a certificate or PKCS#12 by their DER shape; else a DER key.
    static func recognise(_ data: Data) -> ItemFileFormat {
        if data.range(of: Data("-----BEGIN ".utf8)) != nil { return .pemSequence }
        if Certificate(der: data) != nil { return .x509 }
        if let root = try? BER.parse(Array(data.prefix(PKCS12Archive.maximumSize))),
           let fields = Certificate.children(root), fields.count >= 2, ASN1Reading.integer(fields[0]) == 3,
           fields[1].identifier == .sequence {
            return .pkcs12
        }
        return .pkcs8
    }

    /// EncryptedPrivateKeyInfo (PKCS#8 under PBES2, or a PKCS#12 PBE).
    static func decryptPrivateKey(_ der: Data, passphrase: String?) throws(KeychainError) -> AsymmetricKey {
        guard let root = try? BER.parse(Array(der)), let fields = Certificate.children(root), fields.count == 2,
              let ciphertext = ASN1Reading.octets(fields[1])
        else { throw KeychainError(.unknownFormat, "not a private key") }
        guard let passphrase else { throw KeychainError(.passphraseRequired, "the private key is encrypted") }
        let password = PasswordBasedEncryption.Password(utf8: Array(passphrase.utf8),
                                                        bmp: PKCS12KeyDerivation.bmpPassword(passphrase))
        let plain = try PasswordBasedEncryption.decrypt(ciphertext, algorithm: fields[0], password: password)
        return try AsymmetricKey(privateKeyDER: Data(plain))
    }
}

/// PEM (RFC 7468), read and written by swift-asn1's `PEMDocument`: base64 in lines of 64 between
/// `-----BEGIN label-----` and `-----END label-----`; text between blocks (openssl's "Bag Attributes") is ignored.
public enum PEM {
    /// The blocks of a PEM file, in order. A malformed block (no END line, other line lengths, RFC 1421 headers
    /// such as `Proc-Type`) makes the whole file unreadable: errSecUnknownFormat, with the reason.
    public static func blocks(in data: Data) throws(KeychainError) -> [(label: String, der: Data)] {
        do {
            return try PEMDocument.parseMultiple(pemString: String(decoding: data, as: UTF8.self))
                .map { ($0.discriminator, Data($0.derBytes)) }
        } catch {
            throw KeychainError(.unknownFormat, "not a PEM file that can be read: \(error)")
        }
    }

    /// One block, with the line ending its END line.
    public static func encode(_ der: Data, label: String) -> String {
        PEMDocument(type: label, derBytes: Array(der)).pemString + "\n"
    }
}
