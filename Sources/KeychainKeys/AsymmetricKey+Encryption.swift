import Crypto
import Foundation
import KeychainCore
import _CryptoExtras

extension AsymmetricKey {
    /// SecKeyCreateEncryptedData with the public key (or the public half of a private one): RSA PKCS#1 v1.5 or OAEP
    /// with SHA-1 or SHA-256 (what swift-crypto offers; the other OAEP hashes are reported unsupported), or ECIES.
    public func encrypt(_ plaintext: Data, algorithm: KeyAlgorithm) throws(KeychainError) -> Data {
        if case .ecies = algorithm { return try eciesEncrypt(plaintext, algorithm: algorithm) }
        guard supports(.encrypt, algorithm), case .rsaEncryption(let padding) = algorithm,
              case .rsaPublic(let signingKey) = publicKey.material
        else { throw Self.notSupported(algorithm, by: self) }
        let limit = blockSize - Self.overhead(of: padding)
        guard plaintext.count <= limit else {
            throw KeychainError(.param, "\(algorithm.identifier): \(plaintext.count) bytes of plaintext, at most \(limit) fit this key")
        }
        do {
            let key = try _RSA.Encryption.PublicKey(unsafeDERRepresentation: signingKey.pkcs1DERRepresentation)
            return try key.encrypt(plaintext, padding: try Self.padding(padding))
        } catch {
            throw KeychainError(.param, "\(algorithm.identifier): encryption failed")
        }
    }

    /// SecKeyCreateDecryptedData with the private key. A ciphertext that does not open is errSecParam, as Apple's
    /// "RSAdecrypt wrong input" and "ECIES: Failed to aes-gcm decrypt data".
    public func decrypt(_ ciphertext: Data, algorithm: KeyAlgorithm) throws(KeychainError) -> Data {
        if case .ecies = algorithm { return try eciesDecrypt(ciphertext, algorithm: algorithm) }
        guard supports(.decrypt, algorithm), case .rsaEncryption(let padding) = algorithm,
              case .rsa(let signingKey) = material
        else { throw Self.notSupported(algorithm, by: self) }
        guard ciphertext.count == blockSize else {
            throw KeychainError(.param, "RSAdecrypt wrong input (the ciphertext is \(ciphertext.count) bytes, the key's block \(blockSize))")
        }
        do {
            let key = try _RSA.Encryption.PrivateKey(unsafeDERRepresentation: signingKey.derRepresentation)
            return try key.decrypt(ciphertext, padding: try Self.padding(padding))
        } catch {
            throw KeychainError(.param, "RSAdecrypt wrong input")
        }
    }

    private static func padding(_ padding: KeyAlgorithm.RSAEncryptionPadding) throws -> _RSA.Encryption.Padding {
        switch padding {
        case .pkcs1: return ._WEAK_AND_INSECURE_PKCS_V1_5
        case .oaep(.sha1): return .PKCS1_OAEP
        case .oaep(.sha256): return .PKCS1_OAEP_SHA256
        default: throw KeychainError(.param)
        }
    }

    /// Bytes of padding: PKCS#1 v1.5 needs 11, OAEP 2 + twice the hash.
    private static func overhead(of padding: KeyAlgorithm.RSAEncryptionPadding) -> Int {
        switch padding {
        case .raw: 0
        case .pkcs1: 11
        case .oaep(let hash): 2 + 2 * hash.byteCount
        }
    }
}
