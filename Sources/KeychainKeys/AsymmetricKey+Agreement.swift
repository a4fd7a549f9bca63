import Crypto
import Foundation
import KeychainCore

extension AsymmetricKey {
    /// SecKeyCopyKeyExchangeResult: ECDH of this private key with `peer`'s public key. Raw: the shared x-coordinate;
    /// with the X9.63 KDF, `requestedSize` bytes (required) over `sharedInfo`.
    public func keyExchange(with peer: AsymmetricKey, algorithm: KeyAlgorithm, requestedSize: Int?, sharedInfo: Data?)
        throws(KeychainError) -> Data
    {
        guard supports(.keyExchange, algorithm), case .ecdhKeyExchange(let kdf, _) = algorithm else {
            throw Self.notSupported(algorithm, by: self)
        }
        let secret = try sharedSecret(with: peer)
        guard let kdf else { return secret.withUnsafeBytes { Data($0) } }
        guard let requestedSize, requestedSize > 0, requestedSize <= 1 << 16 else {
            throw KeychainError(.param, "kSecKeyKeyExchangeParameterRequestedSize is missing")
        }
        return Self.x963(secret, kdf, sharedInfo: sharedInfo ?? Data(), count: requestedSize)
    }

    /// Apple's ECIES encryption to this public key: ephemeral public key ‖ AES-GCM ciphertext ‖ 16-byte tag.
    public func eciesEncrypt(_ plaintext: Data, algorithm: KeyAlgorithm) throws(KeychainError) -> Data {
        guard supports(.encrypt, algorithm), case .ecies(let hash, let variableIV, _) = algorithm else {
            throw Self.notSupported(algorithm, by: self)
        }
        let recipient = publicKey
        let ephemeral = try AsymmetricKey.generate(type: .ec, bits: keySizeInBits)
        let ephemeralPublic = ephemeral.publicKey.externalRepresentation
        let secret = try ephemeral.sharedSecret(with: recipient)
        let (key, nonce) = try Self.eciesKey(secret, hash, variableIV: variableIV, ephemeralPublic: ephemeralPublic,
                                             fieldBits: keySizeInBits)
        do {
            let sealed = try AES.GCM.seal(plaintext, using: key, nonce: nonce)
            return ephemeralPublic + sealed.ciphertext + sealed.tag
        } catch {
            throw KeychainError(.param, "ECIES: Failed to aes-gcm encrypt data")
        }
    }

    /// Opens what ``eciesEncrypt(_:algorithm:)`` (or Apple's SecKeyCreateEncryptedData) made for this key.
    public func eciesDecrypt(_ ciphertext: Data, algorithm: KeyAlgorithm) throws(KeychainError) -> Data {
        guard supports(.decrypt, algorithm), case .ecies(let hash, let variableIV, _) = algorithm else {
            throw Self.notSupported(algorithm, by: self)
        }
        let pointSize = 1 + 2 * blockSize
        guard ciphertext.count >= pointSize + 16 else {
            throw KeychainError(.param, "\(self): too small input packet for ECIES decrypt")
        }
        let bytes = [UInt8](ciphertext)
        let ephemeralPublic = Data(bytes[..<pointSize])
        let sender = try AsymmetricKey(externalRepresentation: ephemeralPublic, type: .ec, keyClass: .public)
        guard sender.keySizeInBits == keySizeInBits else {
            throw KeychainError(.param, "ECIES: the ephemeral key is not on this key's curve")
        }
        let secret = try sharedSecret(with: sender)
        let (key, nonce) = try Self.eciesKey(secret, hash, variableIV: variableIV, ephemeralPublic: ephemeralPublic,
                                             fieldBits: keySizeInBits)
        do {
            let box = try AES.GCM.SealedBox(nonce: nonce, ciphertext: bytes[pointSize..<(bytes.count - 16)],
                                            tag: bytes[(bytes.count - 16)...])
            return try AES.GCM.open(box, using: key)
        } catch {
            throw KeychainError(.param, "ECIES: Failed to aes-gcm decrypt data")
        }
    }

    /// AES-128 for curves of at most 256 bits, AES-256 above; the IV all zero or the KDF's last 16 bytes.
    private static func eciesKey(_ secret: SharedSecret, _ hash: KeyAlgorithm.Hash, variableIV: Bool,
                                 ephemeralPublic: Data, fieldBits: Int) throws(KeychainError) -> (SymmetricKey, AES.GCM.Nonce)
    {
        let keyBytes = ((fieldBits + 7) / 8) * 8 > 256 ? 32 : 16
        let derived = [UInt8](x963(secret, hash, sharedInfo: ephemeralPublic, count: keyBytes + (variableIV ? 16 : 0)))
        let iv = variableIV ? Array(derived[keyBytes...]) : [UInt8](repeating: 0, count: 16)
        do {
            return (SymmetricKey(data: derived[..<keyBytes]), try AES.GCM.Nonce(data: iv))
        } catch {
            throw KeychainError(.internal, "ECIES: no nonce")
        }
    }

    private func sharedSecret(with peer: AsymmetricKey) throws(KeychainError) -> SharedSecret {
        do {
            switch (material, peer.publicKey.material) {
            case (.p256(let mine), .p256Public(let theirs)):
                return try P256.KeyAgreement.PrivateKey(rawRepresentation: mine.rawRepresentation)
                    .sharedSecretFromKeyAgreement(with: P256.KeyAgreement.PublicKey(rawRepresentation: theirs.rawRepresentation))
            case (.p384(let mine), .p384Public(let theirs)):
                return try P384.KeyAgreement.PrivateKey(rawRepresentation: mine.rawRepresentation)
                    .sharedSecretFromKeyAgreement(with: P384.KeyAgreement.PublicKey(rawRepresentation: theirs.rawRepresentation))
            case (.p521(let mine), .p521Public(let theirs)):
                return try P521.KeyAgreement.PrivateKey(rawRepresentation: mine.rawRepresentation)
                    .sharedSecretFromKeyAgreement(with: P521.KeyAgreement.PublicKey(rawRepresentation: theirs.rawRepresentation))
            default:
                throw KeychainError(.param, "ECDH needs this key's private half and a public key on the same curve")
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.param, "ECDHKeyExchange wrong input")
        }
    }

    private static func x963(_ secret: SharedSecret, _ hash: KeyAlgorithm.Hash, sharedInfo: Data, count: Int) -> Data {
        let key: SymmetricKey = switch hash {
        case .sha1: secret.x963DerivedSymmetricKey(using: Insecure.SHA1.self, sharedInfo: sharedInfo, outputByteCount: count)
        case .sha256, .sha224: secret.x963DerivedSymmetricKey(using: SHA256.self, sharedInfo: sharedInfo, outputByteCount: count)
        case .sha384: secret.x963DerivedSymmetricKey(using: SHA384.self, sharedInfo: sharedInfo, outputByteCount: count)
        case .sha512: secret.x963DerivedSymmetricKey(using: SHA512.self, sharedInfo: sharedInfo, outputByteCount: count)
        }
        return key.withUnsafeBytes { Data($0) }
    }
}

extension AsymmetricKey {
    /// Runs a private-key operation as the keychain service receives it: one dispatch for a key in an app's memory
    /// and for a stored key used where it lives (EmbeddedKeychainService.useKey).
    public func perform(_ use: KeyUse) throws(KeychainError) -> Data {
        let algorithm = KeyAlgorithm(identifier: use.algorithm)
        let input = use.input.withUnsafeBytes { Data($0) }
        switch use.operation {
        case .sign:
            return try signature(for: input, algorithm: algorithm)
        case .decrypt:
            return try decrypt(input, algorithm: algorithm)
        case .keyExchange:
            guard let peerBytes = use.peerPublicKey else { throw KeychainError(.param, "no public key to agree with") }
            let peer = try AsymmetricKey(externalRepresentation: peerBytes, type: type, keyClass: .public)
            return try keyExchange(with: peer, algorithm: algorithm, requestedSize: use.requestedSize,
                                   sharedInfo: use.sharedInfo)
        case .copyPublicKey:
            return publicKey.externalRepresentation
        }
    }
}

extension KeyUse.Operation {
    /// The operation SecKeyIsAlgorithmSupported names (nil for copying the public key, which needs no algorithm).
    public var keyOperation: KeyOperation? {
        switch self {
        case .sign: .sign
        case .decrypt: .decrypt
        case .keyExchange: .keyExchange
        case .copyPublicKey: nil
        }
    }
}
