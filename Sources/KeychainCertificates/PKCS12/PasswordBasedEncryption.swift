import Crypto
import Foundation
import KeychainCore
import SwiftASN1
import _CryptoExtras

/// The password-based encryption schemes of .p12 files: PBES2 (PKCS#5 v2.1: PBKDF2 with an HMAC, then AES-CBC or
/// 3DES-CBC), what OpenSSL 3 writes by default and what export writes; and PKCS#12's own legacy PBEs (SHA-1 with 3DES
/// or RC2), for reading.
struct PasswordBasedEncryption {
    static var maximumIterations: Int { PKCS12Archive.maximumIterations }

    /// The password in both forms: UTF-8 for PBES2 (as OpenSSL and Apple use it), BMP for the PKCS#12 KDF.
    struct Password {
        let utf8: [UInt8]
        let bmp: [UInt8]
        var iterationLimit = PasswordBasedEncryption.maximumIterations
    }

    /// Decrypts `ciphertext` as `algorithm` (an AlgorithmIdentifier node) says. A wrong password shows as bad padding:
    /// errSecAuthFailed; an algorithm we cannot read: errSecUnsupportedFormat.
    static func decrypt(_ ciphertext: [UInt8], algorithm: ASN1Node, password: Password) throws(KeychainError)
        -> [UInt8]
    {
        guard let fields = Certificate.children(algorithm), let oid = fields.first.flatMap(Certificate.oid) else {
            throw KeychainError(.decode, "malformed encryption algorithm")
        }
        let parameters = fields.dropFirst().first
        switch oid {
        case OID.pbes2:
            return try decryptPBES2(ciphertext, parameters: parameters, password: password.utf8,
                                    iterationLimit: password.iterationLimit)
        case OID.pbeSHA1TripleDES3, OID.pbeSHA1TripleDES2, OID.pbeSHA1RC2_128, OID.pbeSHA1RC2_40:
            guard let parameters, let p = Certificate.children(parameters), p.count == 2,
                  let salt = ASN1Reading.octets(p[0]), let iterations = ASN1Reading.integer(p[1])
            else { throw KeychainError(.decode, "malformed PKCS#12 PBE parameters") }
            try checkIterations(iterations, limit: password.iterationLimit)
            let keyLength = switch oid { case OID.pbeSHA1TripleDES3: 24; case OID.pbeSHA1RC2_40: 5; default: 16 }
            let key = PKCS12KeyDerivation.derive(.key, password: password.bmp, salt: salt, iterations: iterations,
                                                 count: keyLength, hash: .sha1)
            let iv = PKCS12KeyDerivation.derive(.iv, password: password.bmp, salt: salt, iterations: iterations,
                                                count: 8, hash: .sha1)
            let cipher: LegacyBlockCipher? = switch oid {
            case OID.pbeSHA1RC2_40: RC2(key: key, effectiveBits: 40).map(LegacyBlockCipher.rc2)
            case OID.pbeSHA1RC2_128: RC2(key: key, effectiveBits: 128).map(LegacyBlockCipher.rc2)
            default: LegacyBlockCipher.tripleDES(key: key)
            }
            guard let plain = cipher?.decryptCBC(ciphertext, iv: iv) else { throw wrongPassword }
            return plain
        default:
            throw KeychainError(.unsupportedFormat, "encryption algorithm \(ASN1Reading.dotted(oid)) is not supported")
        }
    }

    private static func decryptPBES2(_ ciphertext: [UInt8], parameters: ASN1Node?, password: [UInt8],
                                     iterationLimit: Int) throws(KeychainError) -> [UInt8]
    {
        guard let parameters, let p = Certificate.children(parameters), p.count == 2,
              let kdf = Certificate.children(p[0]), kdf.first.flatMap(Certificate.oid) == OID.pbkdf2,
              let kdfParameters = kdf.dropFirst().first.flatMap(Certificate.children), kdfParameters.count >= 2,
              let salt = ASN1Reading.octets(kdfParameters[0]), let iterations = ASN1Reading.integer(kdfParameters[1]),
              let scheme = Certificate.children(p[1]), let schemeOID = scheme.first.flatMap(Certificate.oid),
              let iv = scheme.dropFirst().first.flatMap(ASN1Reading.octets)
        else { throw KeychainError(.decode, "malformed PBES2 parameters") }
        try checkIterations(iterations, limit: iterationLimit)
        // keyLength (optional INTEGER) and prf (optional AlgorithmIdentifier, default hmacWithSHA1).
        var hash = KDF.Insecure.PBKDF2.HashFunction.insecureSHA1
        for field in kdfParameters.dropFirst(2) where field.identifier == .sequence {
            switch Certificate.children(field)?.first.flatMap(Certificate.oid) {
            case OID.hmacWithSHA1?: hash = .insecureSHA1
            case OID.hmacWithSHA256?: hash = .sha256
            case OID.hmacWithSHA384?: hash = .sha384
            case OID.hmacWithSHA512?: hash = .sha512
            default: throw KeychainError(.unsupportedFormat, "PBKDF2 pseudo-random function is not supported")
            }
        }
        let keyLength: Int
        switch schemeOID {
        case OID.aes128CBC: keyLength = 16
        case OID.aes192CBC: keyLength = 24
        case OID.aes256CBC: keyLength = 32
        case OID.desEDE3CBC: keyLength = 24
        default: throw KeychainError(.unsupportedFormat, "cipher \(ASN1Reading.dotted(schemeOID)) is not supported")
        }
        guard let key = try? KDF.Insecure.PBKDF2.deriveKey(from: password, salt: salt, using: hash,
                                                            outputByteCount: keyLength,
                                                            unsafeUncheckedRounds: iterations)
        else { throw KeychainError(.decode, "key derivation failed") }
        if schemeOID == OID.desEDE3CBC {
            let keyBytes = key.withUnsafeBytes { Array($0) }
            guard let plain = LegacyBlockCipher.tripleDES(key: keyBytes)?.decryptCBC(ciphertext, iv: iv) else {
                throw wrongPassword
            }
            return plain
        }
        guard let cbcIV = try? AES._CBC.IV(ivBytes: iv),
              let plain = try? AES._CBC.decrypt(ciphertext, using: key, iv: cbcIV)
        else { throw wrongPassword }
        return Array(plain)
    }

    /// PBES2 with PBKDF2-HMAC-SHA256 and AES-256-CBC, OpenSSL 3's default: the AlgorithmIdentifier and ciphertext.
    static func encryptPBES2(_ plaintext: [UInt8], password: [UInt8], iterations: Int) throws(KeychainError)
        -> (algorithm: [UInt8], ciphertext: [UInt8])
    {
        let salt = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let ivBytes = (0..<16).map { _ in UInt8.random(in: 0...255) }
        do {
            let key = try KDF.Insecure.PBKDF2.deriveKey(from: password, salt: salt, using: .sha256,
                                                        outputByteCount: 32, unsafeUncheckedRounds: iterations)
            let ciphertext = try AES._CBC.encrypt(plaintext, using: key, iv: AES._CBC.IV(ivBytes: ivBytes))
            var s = DER.Serializer()
            try s.appendConstructedNode(identifier: .sequence) { s in
                try s.serialize(ASN1ObjectIdentifier(derEncoded: ASN1Writing.oidNode(OID.pbes2)))
                try s.appendConstructedNode(identifier: .sequence) { s in
                    try s.appendConstructedNode(identifier: .sequence) { s in
                        try s.serialize(ASN1ObjectIdentifier(derEncoded: ASN1Writing.oidNode(OID.pbkdf2)))
                        try s.appendConstructedNode(identifier: .sequence) { s in
                            try s.serialize(ASN1OctetString(contentBytes: salt[...]))
                            try s.serialize(iterations)
                            try s.appendConstructedNode(identifier: .sequence) { s in
                                try s.serialize(ASN1ObjectIdentifier(derEncoded: ASN1Writing.oidNode(OID.hmacWithSHA256)))
                                try s.serialize(ASN1Null())
                            }
                        }
                    }
                    try s.appendConstructedNode(identifier: .sequence) { s in
                        try s.serialize(ASN1ObjectIdentifier(derEncoded: ASN1Writing.oidNode(OID.aes256CBC)))
                        try s.serialize(ASN1OctetString(contentBytes: ivBytes[...]))
                    }
                }
            }
            return (s.serializedBytes, Array(ciphertext))
        } catch {
            throw KeychainError(.internal, "encryption failed")
        }
    }

    static var wrongPassword: KeychainError { KeychainError(.authFailed, "wrong passphrase") }

    private static func checkIterations(_ iterations: Int, limit: Int) throws(KeychainError) {
        guard (1...limit).contains(iterations) else {
            throw KeychainError(.decode, "iteration count \(iterations) is out of range")
        }
    }
}

/// Reading the DER fields PKCS#12 uses, from swift-asn1 nodes (BER where producers wrote it: constructed strings).
enum ASN1Reading {
    static func octets(_ node: ASN1Node) -> [UInt8]? {
        switch node.content {
        case .primitive(let bytes):
            return node.identifier == .octetString ? Array(bytes) : nil
        case .constructed(let children):
            guard node.identifier == .octetString else { return nil }
            var out: [UInt8] = []
            for child in children {
                guard let part = octets(child) else { return nil }
                out += part
            }
            return out
        }
    }

    /// A small non-negative INTEGER (versions, iteration counts).
    static func integer(_ node: ASN1Node) -> Int? {
        guard node.identifier == .integer, case .primitive(let bytes) = node.content, (1...4).contains(bytes.count),
              bytes.first! & 0x80 == 0
        else { return nil }
        return bytes.reduce(0) { $0 << 8 | Int($1) }
    }

    /// The content of an [n] EXPLICIT wrapper.
    static func explicit(_ node: ASN1Node, tag: UInt) -> ASN1Node? {
        guard node.identifier == ASN1Identifier(tagWithNumber: tag, tagClass: .contextSpecific),
              let inner = Certificate.children(node), inner.count == 1
        else { return nil }
        return inner[0]
    }

    static func dotted(_ oid: [UInt8]) -> String {
        (try? ASN1ObjectIdentifier(derEncoded: ASN1Writing.oidNode(oid)).description) ?? "?"
    }
}

enum ASN1Writing {
    /// An OBJECT IDENTIFIER's full DER from its content bytes.
    static func oidNode(_ content: [UInt8]) -> [UInt8] { [0x06, UInt8(content.count)] + content }
}
