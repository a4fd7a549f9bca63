import Foundation
import KeychainCore
import KeychainKeys
import SwiftASN1

/// A PKCS#12 (.p12, .pfx) file: private keys and certificates under a password (RFC 7292). What SecPKCS12Import
/// returns and `security import` stores, and what `security export -f pkcs12` writes.
///
/// Read: PBES2 (PBKDF2 with HMAC-SHA-1/256/384/512, AES-128/192/256-CBC or 3DES), PKCS#12's legacy SHA-1 PBEs (3DES,
/// RC2-40, RC2-128), HMAC MACs with SHA-1…SHA-512, BER or DER, nested safe contents. Written: what OpenSSL 3 writes
/// by default (PBES2 PBKDF2-HMAC-SHA256 AES-256-CBC, HMAC-SHA256 MAC). Public-key (enveloped) privacy and PBMAC1
/// are refused with errSecUnsupportedFormat.
public struct PKCS12Archive: Sendable {
    /// A bag's friendlyName and localKeyID attributes, which tie a key to its certificate.
    public struct BagAttributes: Sendable, Hashable {
        public var friendlyName: String?
        public var localKeyID: Data?
        public init(friendlyName: String? = nil, localKeyID: Data? = nil) {
            self.friendlyName = friendlyName
            self.localKeyID = localKeyID
        }
    }

    public var keys: [(key: AsymmetricKey, attributes: BagAttributes)]
    public var certificates: [(certificate: Certificate, attributes: BagAttributes)]

    /// An identity of the file: a private key, its certificate, and the other certificates (the chain).
    public struct Identity: Sendable {
        public let key: AsymmetricKey
        public let certificate: Certificate
        public let chain: [Certificate]
        public let attributes: BagAttributes
    }

    /// Each private key with the certificate whose localKeyID is the key's (else whose public key is the key's),
    /// and the other certificates as its chain, leaf first, as Apple's import returns it. Keys without a certificate
    /// are left out.
    public var identities: [Identity] {
        keys.compactMap { key, attributes in
            let hash = key.applicationLabel
            guard let leaf = certificates.first(where: { attributes.localKeyID != nil && $0.attributes.localKeyID == attributes.localKeyID })
                ?? certificates.first(where: { $0.certificate.publicKeyHash == hash })
            else { return nil }
            var chain = [leaf.certificate]
            // Walk up by issuer while the file holds the issuer's certificate.
            while let last = chain.last, last.issuer != last.subject,
                  let issuer = certificates.first(where: { $0.certificate.subject == last.issuer && !chain.contains($0.certificate) }) {
                chain.append(issuer.certificate)
            }
            chain += certificates.map(\.certificate).filter { !chain.contains($0) }
            return Identity(key: key, certificate: leaf.certificate, chain: chain,
                            attributes: BagAttributes(friendlyName: attributes.friendlyName ?? leaf.attributes.friendlyName,
                                                      localKeyID: attributes.localKeyID ?? leaf.attributes.localKeyID))
        }
    }

    public init(keys: [(key: AsymmetricKey, attributes: BagAttributes)],
                certificates: [(certificate: Certificate, attributes: BagAttributes)]) {
        self.keys = keys
        self.certificates = certificates
    }

    static let maximumSize = 4 << 20
    /// Key derivations are capped at this many iterations so that a hostile file cannot hold a daemon thread for
    /// long; real files use 1 to a few hundred thousand.
    public static let maximumIterations = 1_000_000
    static let maximumNesting = 4

    // MARK: - Reading

    /// Opens a .p12 with `password` (nil: none given, tried as the empty password). Wrong password: errSecAuthFailed;
    /// not a PKCS#12 file: errSecDecode; a scheme this reader lacks: errSecUnsupportedFormat.
    /// `iterationLimit` bounds every key derivation's iteration count (the fuzzer lowers it to stay fast).
    public init(der data: Data, password: String?,
                iterationLimit: Int = PKCS12Archive.maximumIterations) throws(KeychainError) {
        guard data.count <= Self.maximumSize, let root = try? BER.parse(Array(data)),
              root.identifier == .sequence, let pfx = Certificate.children(root), pfx.count == 2 || pfx.count == 3,
              ASN1Reading.integer(pfx[0]) == 3
        else { throw KeychainError(.decode, "not a PKCS#12 file") }
        guard let (type, content) = Self.contentInfo(pfx[1]), type == OID.pkcs7Data, let content,
              let authenticatedSafe = ASN1Reading.octets(content)
        else { throw KeychainError(.unsupportedFormat, "only password-protected PKCS#12 files can be read") }
        // Which encoding of the password the writer used: an empty password is two zero bytes to most writers and
        // no bytes to some; the MAC tells which.
        var bmp = PKCS12KeyDerivation.bmpPassword(password ?? "")
        if pfx.count == 3 {
            let candidates = (password ?? "").isEmpty ? [bmp, []] : [bmp]
            var matching: [UInt8]?
            for candidate in candidates
            where try Self.macMatches(pfx[2], content: authenticatedSafe, password: candidate, limit: iterationLimit) {
                matching = candidate
                break
            }
            guard let matching else { throw PasswordBasedEncryption.wrongPassword }
            bmp = matching
        }
        let secret = PasswordBasedEncryption.Password(utf8: Array((password ?? "").utf8), bmp: bmp,
                                                      iterationLimit: iterationLimit)
        guard let safes = try? BER.parse(authenticatedSafe), safes.identifier == .sequence,
              let contentInfos = Certificate.children(safes)
        else { throw KeychainError(.decode, "malformed PKCS#12 contents") }
        var reader = BagReader(password: secret)
        for info in contentInfos {
            guard let (type, content) = Self.contentInfo(info) else { throw KeychainError(.decode, "malformed PKCS#12 contents") }
            switch type {
            case OID.pkcs7Data:
                guard let content, let bytes = ASN1Reading.octets(content) else { throw KeychainError(.decode, "malformed safe contents") }
                try reader.readSafeContents(bytes, depth: 0)
            case OID.pkcs7EncryptedData:
                // EncryptedData ::= SEQUENCE { version, EncryptedContentInfo { type, algorithm, [0] IMPLICIT OCTETS } }
                guard let content, let fields = Certificate.children(content), fields.count >= 2,
                      let encrypted = Certificate.children(fields[1]), encrypted.count == 3,
                      encrypted[2].identifier.tagClass == .contextSpecific, encrypted[2].identifier.tagNumber == 0
                else { throw KeychainError(.decode, "malformed encrypted safe contents") }
                let ciphertext: [UInt8]
                switch encrypted[2].content {
                case .primitive(let bytes): ciphertext = Array(bytes)
                case .constructed(let parts):
                    ciphertext = parts.reduce(into: []) { out, part in out += ASN1Reading.octets(part) ?? [] }
                }
                let plain = try PasswordBasedEncryption.decrypt(ciphertext, algorithm: encrypted[1], password: secret)
                try reader.readSafeContents(plain, depth: 0)
            default:
                throw KeychainError(.unsupportedFormat, "PKCS#12 contents encrypted to a public key are not supported")
            }
        }
        keys = reader.keys
        certificates = reader.certificates
    }

    /// ContentInfo ::= SEQUENCE { contentType OID, content [0] EXPLICIT ANY OPTIONAL }
    private static func contentInfo(_ node: ASN1Node) -> ([UInt8], ASN1Node?)? {
        guard node.identifier == .sequence, let fields = Certificate.children(node), !fields.isEmpty,
              let type = Certificate.oid(fields[0])
        else { return nil }
        if fields.count == 1 { return (type, nil) }
        guard let content = ASN1Reading.explicit(fields[1], tag: 0) else { return nil }
        return (type, content)
    }

    /// MacData ::= SEQUENCE { DigestInfo { algorithm, digest }, macSalt OCTET STRING, iterations INTEGER DEFAULT 1 }
    private static func macMatches(_ node: ASN1Node, content: [UInt8], password: [UInt8], limit: Int)
        throws(KeychainError) -> Bool
    {
        guard let fields = Certificate.children(node), fields.count >= 2,
              let digestInfo = Certificate.children(fields[0]), digestInfo.count == 2,
              let algorithm = Certificate.children(digestInfo[0])?.first.flatMap(Certificate.oid),
              let expected = ASN1Reading.octets(digestInfo[1]), let salt = ASN1Reading.octets(fields[1])
        else { throw KeychainError(.decode, "malformed PKCS#12 MAC") }
        let iterations = fields.count > 2 ? ASN1Reading.integer(fields[2]) : 1
        guard let iterations, (1...limit).contains(iterations) else {
            throw KeychainError(.decode, "PKCS#12 MAC iteration count is out of range")
        }
        let hash: PKCS12KeyDerivation.Hash
        switch algorithm {
        case OID.sha1: hash = .sha1
        case OID.sha256: hash = .sha256
        case OID.sha384: hash = .sha384
        case OID.sha512: hash = .sha512
        default: throw KeychainError(.unsupportedFormat, "PKCS#12 MAC algorithm \(ASN1Reading.dotted(algorithm)) is not supported")
        }
        let key = PKCS12KeyDerivation.derive(.mac, password: password, salt: salt, iterations: iterations,
                                             count: hash.outputSize, hash: hash)
        let actual = hash.hmac(key: key, content)
        guard actual.count == expected.count else { return false }
        return zip(actual, expected).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// The safe bags of every SafeContents, in order.
    private struct BagReader {
        let password: PasswordBasedEncryption.Password
        var keys: [(key: AsymmetricKey, attributes: BagAttributes)] = []
        var certificates: [(certificate: Certificate, attributes: BagAttributes)] = []

        init(password: PasswordBasedEncryption.Password) { self.password = password }

        mutating func readSafeContents(_ bytes: [UInt8], depth: Int) throws(KeychainError) {
            guard depth <= PKCS12Archive.maximumNesting, let root = try? BER.parse(bytes), root.identifier == .sequence,
                  let bags = Certificate.children(root)
            else { throw KeychainError(.decode, "malformed safe contents") }
            for bag in bags {
                // SafeBag ::= SEQUENCE { bagId OID, bagValue [0] EXPLICIT ANY, bagAttributes SET OPTIONAL }
                guard let fields = Certificate.children(bag), fields.count >= 2, let id = Certificate.oid(fields[0]),
                      let value = ASN1Reading.explicit(fields[1], tag: 0)
                else { throw KeychainError(.decode, "malformed safe bag") }
                let attributes = fields.count > 2 ? Self.attributes(fields[2]) : BagAttributes()
                switch id {
                case OID.keyBag:
                    keys.append((try AsymmetricKey(privateKeyDER: Data(value.encodedBytes)), attributes))
                case OID.shroudedKeyBag:
                    // EncryptedPrivateKeyInfo ::= SEQUENCE { algorithm, encryptedData OCTET STRING }
                    guard let parts = Certificate.children(value), parts.count == 2,
                          let ciphertext = ASN1Reading.octets(parts[1])
                    else { throw KeychainError(.decode, "malformed shrouded key bag") }
                    let plain = try PasswordBasedEncryption.decrypt(ciphertext, algorithm: parts[0], password: password)
                    keys.append((try AsymmetricKey(privateKeyDER: Data(plain)), attributes))
                case OID.certBag:
                    // CertBag ::= SEQUENCE { certId OID, certValue [0] EXPLICIT OCTET STRING }
                    guard let parts = Certificate.children(value), parts.count == 2,
                          let type = Certificate.oid(parts[0]) else { throw KeychainError(.decode, "malformed certificate bag") }
                    guard type == OID.x509Certificate else { continue }  // SDSI certificates: not ours to read
                    guard let wrapped = ASN1Reading.explicit(parts[1], tag: 0), let der = ASN1Reading.octets(wrapped),
                          let certificate = Certificate(der: Data(der))
                    else { throw KeychainError(.decode, "a certificate of the file cannot be read") }
                    certificates.append((certificate, attributes))
                case OID.safeContentsBag:
                    try readSafeContents(value.encodedBytes.map { $0 }, depth: depth + 1)
                default:
                    continue  // CRLs and secret bags: nothing the keychain imports
                }
            }
        }

        /// friendlyName (BMPString) and localKeyID (OCTET STRING), each SET's first value.
        static func attributes(_ node: ASN1Node) -> BagAttributes {
            var out = BagAttributes()
            for attribute in Certificate.children(node) ?? [] {
                guard let fields = Certificate.children(attribute), fields.count == 2,
                      let type = Certificate.oid(fields[0]), let value = Certificate.children(fields[1])?.first
                else { continue }
                if type == OID.friendlyName { out.friendlyName = Certificate.string(value) }
                if type == OID.localKeyID { out.localKeyID = ASN1Reading.octets(value).map { Data($0) } }
            }
            return out
        }
    }
}
/// The object identifiers of PKCS#12, PKCS#5 and PKCS#7 (content bytes).
extension OID {
    static let pkcs7Data: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x01]  // 1.2.840.113549.1.7.1
    static let pkcs7EncryptedData: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x06]  // 1.2.840.113549.1.7.6
    static let keyBag: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x0C, 0x0A, 0x01, 0x01]  // 1.2.840.113549.1.12.10.1.1
    static let shroudedKeyBag: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x0C, 0x0A, 0x01, 0x02]  // 1.2.840.113549.1.12.10.1.2
    static let certBag: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x0C, 0x0A, 0x01, 0x03]  // 1.2.840.113549.1.12.10.1.3
    static let safeContentsBag: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x0C, 0x0A, 0x01, 0x06]  // 1.2.840.113549.1.12.10.1.6
    static let x509Certificate: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x16, 0x01]  // 1.2.840.113549.1.9.22.1
    static let friendlyName: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x14]  // 1.2.840.113549.1.9.20
    static let localKeyID: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x15]  // 1.2.840.113549.1.9.21
    static let pbes2: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x05, 0x0D]  // 1.2.840.113549.1.5.13
    static let pbkdf2: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x05, 0x0C]  // 1.2.840.113549.1.5.12
    static let hmacWithSHA1: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x02, 0x07]  // 1.2.840.113549.2.7
    static let hmacWithSHA256: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x02, 0x09]  // 1.2.840.113549.2.9
    static let hmacWithSHA384: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x02, 0x0A]  // 1.2.840.113549.2.10
    static let hmacWithSHA512: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x02, 0x0B]  // 1.2.840.113549.2.11
    static let aes128CBC: [UInt8] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x02]  // 2.16.840.1.101.3.4.1.2
    static let aes192CBC: [UInt8] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x16]  // 2.16.840.1.101.3.4.1.22
    static let aes256CBC: [UInt8] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x2A]  // 2.16.840.1.101.3.4.1.42
    static let desEDE3CBC: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x03, 0x07]  // 1.2.840.113549.3.7
    static let pbeSHA1TripleDES3: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x0C, 0x01, 0x03]  // 1.2.840.113549.1.12.1.3
    static let pbeSHA1TripleDES2: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x0C, 0x01, 0x04]  // 1.2.840.113549.1.12.1.4
    static let pbeSHA1RC2_128: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x0C, 0x01, 0x05]  // 1.2.840.113549.1.12.1.5
    static let pbeSHA1RC2_40: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x0C, 0x01, 0x06]  // 1.2.840.113549.1.12.1.6
    static let sha1: [UInt8] = [0x2B, 0x0E, 0x03, 0x02, 0x1A]  // 1.3.14.3.2.26
    static let sha256: [UInt8] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01]  // 2.16.840.1.101.3.4.2.1
    static let sha384: [UInt8] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02]  // 2.16.840.1.101.3.4.2.2
    static let sha512: [UInt8] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03]  // 2.16.840.1.101.3.4.2.3
}
