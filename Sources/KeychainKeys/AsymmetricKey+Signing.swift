import Crypto
import Foundation
import KeychainCore
import _CryptoExtras

extension AsymmetricKey {
    /// Whether this key runs `algorithm` for `operation` (SecKeyIsAlgorithmSupported).
    public func supports(_ operation: KeyOperation, _ algorithm: KeyAlgorithm) -> Bool {
        Self.supports(operation, algorithm, type: type, keyClass: keyClass)
    }

    /// Whether a key of `type` and `keyClass` runs `algorithm` for `operation` (also for a stored key, known here
    /// by its public half).
    public static func supports(_ operation: KeyOperation, _ algorithm: KeyAlgorithm, type: KeyType, keyClass: KeyClass)
        -> Bool
    {
        switch (operation, algorithm, type) {
        case (.sign, .rsaSignature(_, .digest(nil)), _), (.verify, .rsaSignature(_, .digest(nil)), _):
            return false  // PKCS#1 v1.5 over a bare digest (no DigestInfo): not in swift-crypto
        case (.sign, .ecdsa(_, let input), .ec), (.sign, .rsaSignature(_, let input), .rsa):
            return keyClass == .private && runs(input)
        case (.verify, .ecdsa(_, let input), .ec), (.verify, .rsaSignature(_, let input), .rsa):
            return runs(input)
        case (.encrypt, .rsaEncryption(let padding), .rsa):
            return runs(padding)
        case (.decrypt, .rsaEncryption(let padding), .rsa):
            return keyClass == .private && runs(padding)
        case (.encrypt, .ecies(let hash, _, _), .ec):
            return hash != .sha224
        case (.decrypt, .ecies(let hash, _, _), .ec):
            return keyClass == .private && hash != .sha224
        case (.keyExchange, .ecdhKeyExchange(let kdf, _), .ec):
            return keyClass == .private && kdf != .sha224
        default:
            return false
        }
    }

    /// swift-crypto has no SHA-224, no raw RSA and no digest-only PKCS#1 v1.5 without a hash: those are refused.
    private static func runs(_ input: KeyAlgorithm.SignatureInput) -> Bool {
        switch input {
        case .message(let hash): hash != .sha224
        case .digest(let hash?): hash != .sha224 && TypedDigest.available
        case .digest(nil): TypedDigest.available
        }
    }

    private static func runs(_ padding: KeyAlgorithm.RSAEncryptionPadding) -> Bool {
        switch padding {
        case .pkcs1, .oaep(.sha1), .oaep(.sha256): true
        default: false
        }
    }

    /// SecKeyCreateSignature.
    public func signature(for data: Data, algorithm: KeyAlgorithm) throws(KeychainError) -> Data {
        guard supports(.sign, algorithm) else { throw Self.notSupported(algorithm, by: self) }
        let digest = try TypedDigest(data, input: Self.input(of: algorithm), algorithm: algorithm,
                                     orderBytes: type == .ec ? blockSize : nil)
        do {
            switch (material, algorithm) {
            case (.p256(let key), .ecdsa(let format, _)):
                let signature = try digest.apply { try key.signature(for: $0) }
                return format == .x962 ? signature.derRepresentation : signature.rawRepresentation
            case (.p384(let key), .ecdsa(let format, _)):
                let signature = try digest.apply { try key.signature(for: $0) }
                return format == .x962 ? signature.derRepresentation : signature.rawRepresentation
            case (.p521(let key), .ecdsa(let format, _)):
                let signature = try digest.apply { try key.signature(for: $0) }
                return format == .x962 ? signature.derRepresentation : signature.rawRepresentation
            case (.rsa(let key), .rsaSignature(let padding, _)):
                let rsaPadding: _RSA.Signing.Padding = padding == .pss ? .PSS : .insecurePKCS1v1_5
                return try digest.apply { try key.signature(for: $0, padding: rsaPadding) }.rawRepresentation
            default:
                throw Self.notSupported(algorithm, by: self)
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            // BoringSSL refuses, e.g., a PSS digest too long for a small modulus.
            throw KeychainError(.param, "\(algorithm.identifier): cannot sign with this key")
        }
    }

    /// SecKeyVerifySignature: success, or errSecVerifyFailed for a signature that does not match.
    public func verify(_ signature: Data, for data: Data, algorithm: KeyAlgorithm) throws(KeychainError) {
        guard supports(.verify, algorithm) else { throw Self.notSupported(algorithm, by: self) }
        let digest = try TypedDigest(data, input: Self.input(of: algorithm), algorithm: algorithm,
                                     orderBytes: type == .ec ? blockSize : nil)
        let key = publicKey
        let valid: Bool
        switch (key.material, algorithm) {
        case (.p256Public(let key), .ecdsa(let format, _)):
            let parsed = format == .x962
                ? try? P256.Signing.ECDSASignature(derRepresentation: signature)
                : try? P256.Signing.ECDSASignature(rawRepresentation: signature)
            valid = parsed.map { parsed in digest.apply { key.isValidSignature(parsed, for: $0) } } ?? false
        case (.p384Public(let key), .ecdsa(let format, _)):
            let parsed = format == .x962
                ? try? P384.Signing.ECDSASignature(derRepresentation: signature)
                : try? P384.Signing.ECDSASignature(rawRepresentation: signature)
            valid = parsed.map { parsed in digest.apply { key.isValidSignature(parsed, for: $0) } } ?? false
        case (.p521Public(let key), .ecdsa(let format, _)):
            let parsed = format == .x962
                ? try? P521.Signing.ECDSASignature(derRepresentation: signature)
                : try? P521.Signing.ECDSASignature(rawRepresentation: signature)
            valid = parsed.map { parsed in digest.apply { key.isValidSignature(parsed, for: $0) } } ?? false
        case (.rsaPublic(let key), .rsaSignature(let padding, _)):
            let rsaPadding: _RSA.Signing.Padding = padding == .pss ? .PSS : .insecurePKCS1v1_5
            let parsed = _RSA.Signing.RSASignature(rawRepresentation: signature)
            valid = digest.apply { key.isValidSignature(parsed, for: $0, padding: rsaPadding) }
        default:
            throw Self.notSupported(algorithm, by: self)
        }
        guard valid else {
            throw KeychainError(.verifyFailed, algorithm.isRSA ? "RSA signature verification failed, no match"
                                                               : "ECDSA signature verification failed")
        }
    }

    private static func input(of algorithm: KeyAlgorithm) -> KeyAlgorithm.SignatureInput {
        switch algorithm {
        case .ecdsa(_, let input), .rsaSignature(_, let input): input
        default: .digest(nil)
        }
    }

    static func notSupported(_ algorithm: KeyAlgorithm, by key: AsymmetricKey) -> KeychainError {
        KeychainError(.param, "\(algorithm.identifier): algorithm not supported by the key \(key)")
    }
}

/// SecKeyOperationType.
public enum KeyOperation: Int, Sendable {
    case sign = 0, verify = 1, encrypt = 2, decrypt = 3, keyExchange = 4
}

extension KeyAlgorithm {
    var isRSA: Bool {
        switch self {
        case .rsaSignature, .rsaSignatureRaw, .rsaEncryption: true
        default: false
        }
    }

    /// Apple's identifier string (for messages).
    public var identifier: String {
        func input(_ value: SignatureInput, _ name: String) -> String {
            switch value {
            case .message(let hash): "message-\(name):\(hash.rawValue)"
            case .digest(let hash?): "digest-\(name):\(hash.rawValue)"
            case .digest(nil): "digest-\(name)"
            }
        }
        switch self {
        case .ecdsa(let format, let value): return "algid:sign:ECDSA:" + input(value, format == .x962 ? "X962" : "RFC4754")
        case .rsaSignature(.pkcs1v15, let value): return "algid:sign:RSA:" + input(value, "PKCS1v15")
        case .rsaSignature(.pss, let value):
            switch value {
            case .message(let h): return "algid:sign:RSA:message-PSS:\(h.rawValue):\(h.rawValue):\(h.byteCount)"
            case .digest(let h?): return "algid:sign:RSA:digest-PSS:\(h.rawValue):\(h.rawValue):\(h.byteCount)"
            case .digest(nil): return "algid:sign:RSA:digest-PSS"
            }
        case .rsaSignatureRaw: return "algid:sign:RSA:raw"
        case .rsaEncryption(.raw): return "algid:encrypt:RSA:raw"
        case .rsaEncryption(.pkcs1): return "algid:encrypt:RSA:PKCS1"
        case .rsaEncryption(.oaep(let h)): return "algid:encrypt:RSA:OAEP:\(h.rawValue)"
        case .ecdhKeyExchange(let kdf, let cofactor):
            return "algid:keyexchange:ECDH\(cofactor ? "C" : "")" + (kdf.map { ":KDFX963:\($0.rawValue)" } ?? "")
        case .ecies(let h, let variableIV, let cofactor):
            return "algid:encrypt:ECIES:ECDH\(cofactor ? "C" : ""):KDFX963:\(h.rawValue):AESGCM\(variableIV ? "-KDFIV" : "")"
        case .unsupported(let identifier): return identifier
        }
    }
}
