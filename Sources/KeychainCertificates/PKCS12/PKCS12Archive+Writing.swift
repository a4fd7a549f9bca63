import Foundation
import KeychainCore
import KeychainKeys
import SwiftASN1

extension PKCS12Archive {
    /// The .p12 file as OpenSSL 3 writes it by default: keys in shrouded key bags and certificates in an encrypted
    /// safe, both PBES2 (PBKDF2-HMAC-SHA256, AES-256-CBC), and an HMAC-SHA256 MAC. The password must not be empty
    /// (an empty one protects nothing; Apple's export refuses it too).
    public func serialized(password: String, iterations: Int = 2048) throws(KeychainError) -> Data {
        guard !password.isEmpty else { throw KeychainError(.passphraseRequired, "a PKCS#12 file needs a passphrase") }
        let utf8 = Array(password.utf8)
        do {
            var keySafe = DER.Serializer()
            try keySafe.appendConstructedNode(identifier: .sequence) { s in
                for (key, attributes) in keys {
                    guard let pkcs8 = key.pkcs8Representation else { continue }
                    let (algorithm, ciphertext) = try PasswordBasedEncryption.encryptPBES2(Array(pkcs8), password: utf8,
                                                                                           iterations: iterations)
                    try Self.bag(&s, OID.shroudedKeyBag, attributes) { s in
                        try s.appendConstructedNode(identifier: .sequence) { s in
                            s.serializeRawBytes(algorithm)
                            try s.serialize(ASN1OctetString(contentBytes: ciphertext[...]))
                        }
                    }
                }
            }
            var certificateSafe = DER.Serializer()
            try certificateSafe.appendConstructedNode(identifier: .sequence) { s in
                for (certificate, attributes) in certificates {
                    try Self.bag(&s, OID.certBag, attributes) { s in
                        try s.appendConstructedNode(identifier: .sequence) { s in
                            s.serializeRawBytes(ASN1Writing.oidNode(OID.x509Certificate))
                            try s.appendConstructedNode(identifier: Self.tag0) { s in
                                try s.serialize(ASN1OctetString(contentBytes: Array(certificate.der)[...]))
                            }
                        }
                    }
                }
            }
            let (certificateAlgorithm, certificateCiphertext) = try PasswordBasedEncryption.encryptPBES2(
                certificateSafe.serializedBytes, password: utf8, iterations: iterations)
            var safes = DER.Serializer()
            try safes.appendConstructedNode(identifier: .sequence) { s in
                try s.appendConstructedNode(identifier: .sequence) { s in
                    s.serializeRawBytes(ASN1Writing.oidNode(OID.pkcs7EncryptedData))
                    try s.appendConstructedNode(identifier: Self.tag0) { s in
                        try s.appendConstructedNode(identifier: .sequence) { s in
                            try s.serialize(0)
                            s.appendConstructedNode(identifier: .sequence) { s in
                                s.serializeRawBytes(ASN1Writing.oidNode(OID.pkcs7Data))
                                s.serializeRawBytes(certificateAlgorithm)
                                s.appendPrimitiveNode(identifier: ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)) {
                                    $0 += certificateCiphertext
                                }
                            }
                        }
                    }
                }
                try Self.dataContentInfo(&s, keySafe.serializedBytes)
            }
            let authenticatedSafe = safes.serializedBytes
            let salt = (0..<16).map { _ in UInt8.random(in: 0...255) }
            let macKey = PKCS12KeyDerivation.derive(.mac, password: PKCS12KeyDerivation.bmpPassword(password), salt: salt,
                                                    iterations: iterations, count: 32, hash: .sha256)
            let mac = PKCS12KeyDerivation.Hash.sha256.hmac(key: macKey, authenticatedSafe)
            var pfx = DER.Serializer()
            try pfx.appendConstructedNode(identifier: .sequence) { s in
                try s.serialize(3)
                try Self.dataContentInfo(&s, authenticatedSafe)
                try s.appendConstructedNode(identifier: .sequence) { s in
                    try s.appendConstructedNode(identifier: .sequence) { s in
                        try s.appendConstructedNode(identifier: .sequence) { s in
                            s.serializeRawBytes(ASN1Writing.oidNode(OID.sha256))
                            try s.serialize(ASN1Null())
                        }
                        try s.serialize(ASN1OctetString(contentBytes: mac[...]))
                    }
                    try s.serialize(ASN1OctetString(contentBytes: salt[...]))
                    try s.serialize(iterations)
                }
            }
            return Data(pfx.serializedBytes)
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.internal, "PKCS#12 encoding failed")
        }
    }

    private static let tag0 = ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)

    private static func dataContentInfo(_ s: inout DER.Serializer, _ content: [UInt8]) throws {
        try s.appendConstructedNode(identifier: .sequence) { s in
            s.serializeRawBytes(ASN1Writing.oidNode(OID.pkcs7Data))
            try s.appendConstructedNode(identifier: tag0) { s in
                try s.serialize(ASN1OctetString(contentBytes: content[...]))
            }
        }
    }

    private static func bag(_ s: inout DER.Serializer, _ type: [UInt8], _ attributes: BagAttributes,
                            value: (inout DER.Serializer) throws -> Void) throws {
        try s.appendConstructedNode(identifier: .sequence) { s in
            s.serializeRawBytes(ASN1Writing.oidNode(type))
            try s.appendConstructedNode(identifier: tag0, value)
            guard attributes.friendlyName != nil || attributes.localKeyID != nil else { return }
            try s.appendConstructedNode(identifier: .set) { s in
                if let name = attributes.friendlyName {
                    s.appendConstructedNode(identifier: .sequence) { s in
                        s.serializeRawBytes(ASN1Writing.oidNode(OID.friendlyName))
                        s.appendConstructedNode(identifier: .set) { s in
                            s.appendPrimitiveNode(identifier: .bmpString) { bytes in
                                bytes += name.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
                            }
                        }
                    }
                }
                if let id = attributes.localKeyID {
                    try s.appendConstructedNode(identifier: .sequence) { s in
                        s.serializeRawBytes(ASN1Writing.oidNode(OID.localKeyID))
                        try s.appendConstructedNode(identifier: .set) { s in
                            try s.serialize(ASN1OctetString(contentBytes: Array(id)[...]))
                        }
                    }
                }
            }
        }
    }
}
