import Crypto
import Foundation
import KeychainCore
import _CryptoExtras

/// An elliptic-curve (P-256, P-384, P-521) or RSA key, public or private, with Apple's external representations.
///
/// The one place that holds key material and runs key algorithms, so that the same code serves a key in an app's
/// memory and, later, a key that never leaves keychaind. Apple's formats:
/// - EC public: ANSI X9.63, `04 ‖ X ‖ Y`; EC private: `04 ‖ X ‖ Y ‖ K`.
/// - RSA public: PKCS#1 `RSAPublicKey` DER; RSA private: PKCS#1 `RSAPrivateKey` DER.
public struct AsymmetricKey: Sendable {
    public enum KeyType: String, Sendable, Hashable {
        /// `kSecAttrKeyTypeRSA` ("42").
        case rsa = "42"
        /// `kSecAttrKeyTypeECSECPrimeRandom` / `kSecAttrKeyTypeEC` ("73").
        case ec = "73"
    }

    /// `kSecAttrKeyClassPublic` ("0") and `kSecAttrKeyClassPrivate` ("1").
    public enum KeyClass: String, Sendable, Hashable {
        case `public` = "0"
        case `private` = "1"
    }

    enum Material: Sendable {
        case p256(P256.Signing.PrivateKey)
        case p384(P384.Signing.PrivateKey)
        case p521(P521.Signing.PrivateKey)
        case p256Public(P256.Signing.PublicKey)
        case p384Public(P384.Signing.PublicKey)
        case p521Public(P521.Signing.PublicKey)
        case rsa(_RSA.Signing.PrivateKey)
        case rsaPublic(_RSA.Signing.PublicKey)
    }

    let material: Material

    init(_ material: Material) { self.material = material }

    /// A new random key pair (its private key). EC: 256, 384 or 521 bits; RSA: 2048 to 4096 bits, a multiple of 8.
    public static func generate(type: KeyType, bits: Int) throws(KeychainError) -> AsymmetricKey {
        switch (type, bits) {
        case (.ec, 256): return AsymmetricKey(.p256(P256.Signing.PrivateKey()))
        case (.ec, 384): return AsymmetricKey(.p384(P384.Signing.PrivateKey()))
        case (.ec, 521): return AsymmetricKey(.p521(P521.Signing.PrivateKey()))
        case (.ec, _):
            throw KeychainError(.param, "EC keys are 256, 384 or 521 bits, not \(bits)")
        case (.rsa, _):
            guard (2048...4096).contains(bits), bits % 8 == 0 else {
                throw KeychainError(.param, "RSA keys here are 2048 to 4096 bits (a multiple of 8), not \(bits)")
            }
            do {
                return AsymmetricKey(.rsa(try _RSA.Signing.PrivateKey(keySize: .init(bitCount: bits))))
            } catch {
                throw KeychainError(.internal, "RSA key generation failed")
            }
        }
    }

    /// A key from its external representation (SecKeyCreateWithData). `bits`, when given, must agree.
    public init(externalRepresentation data: Data, type: KeyType, keyClass: KeyClass, bits: Int? = nil)
        throws(KeychainError)
    {
        let made: Material?
        switch (type, keyClass) {
        case (.ec, .public):
            made = switch data.count {
            case 65: (try? P256.Signing.PublicKey(x963Representation: data)).map { .p256Public($0) }
            case 97: (try? P384.Signing.PublicKey(x963Representation: data)).map { .p384Public($0) }
            case 133: (try? P521.Signing.PublicKey(x963Representation: data)).map { .p521Public($0) }
            default: nil
            }
        case (.ec, .private):
            made = switch data.count {
            case 97: (try? P256.Signing.PrivateKey(x963Representation: data)).map { .p256($0) }
            case 145: (try? P384.Signing.PrivateKey(x963Representation: data)).map { .p384($0) }
            case 199: (try? P521.Signing.PrivateKey(x963Representation: data)).map { .p521($0) }
            default: nil
            }
        case (.rsa, .public):
            made = (try? _RSA.Signing.PublicKey(unsafeDERRepresentation: data)).map { .rsaPublic($0) }
        case (.rsa, .private):
            made = (try? _RSA.Signing.PrivateKey(unsafeDERRepresentation: data)).map { .rsa($0) }
        }
        guard let made else {
            throw KeychainError(.param, "\(type == .rsa ? "RSA" : "EC") \(keyClass == .public ? "public" : "private") key creation from data failed")
        }
        self.init(made)
        if let bits, bits != 0, bits != keySizeInBits {
            throw KeychainError(.param, "the key is \(keySizeInBits) bits, not \(bits)")
        }
    }

    public var type: KeyType {
        switch material {
        case .rsa, .rsaPublic: .rsa
        default: .ec
        }
    }

    public var keyClass: KeyClass {
        switch material {
        case .p256, .p384, .p521, .rsa: .private
        default: .public
        }
    }

    public var keySizeInBits: Int {
        switch material {
        case .p256, .p256Public: 256
        case .p384, .p384Public: 384
        case .p521, .p521Public: 521
        case .rsa(let key): key.keySizeInBits
        case .rsaPublic(let key): key.keySizeInBits
        }
    }

    /// SecKeyGetBlockSize: the modulus in bytes for RSA, the field element in bytes for EC.
    public var blockSize: Int { (keySizeInBits + 7) / 8 }

    /// The public half (a public key is its own).
    public var publicKey: AsymmetricKey {
        switch material {
        case .p256(let key): AsymmetricKey(.p256Public(key.publicKey))
        case .p384(let key): AsymmetricKey(.p384Public(key.publicKey))
        case .p521(let key): AsymmetricKey(.p521Public(key.publicKey))
        case .rsa(let key): AsymmetricKey(.rsaPublic(key.publicKey))
        default: self
        }
    }

    /// Apple's external representation (see the type's comment). For a private key this is its secret.
    public var externalRepresentation: Data {
        switch material {
        case .p256(let key): key.x963Representation
        case .p384(let key): key.x963Representation
        case .p521(let key): key.x963Representation
        case .p256Public(let key): key.x963Representation
        case .p384Public(let key): key.x963Representation
        case .p521Public(let key): key.x963Representation
        case .rsa(let key): key.derRepresentation
        case .rsaPublic(let key): key.pkcs1DERRepresentation
        }
    }

    /// kSecAttrApplicationLabel of a key pair: SHA-1 of the public key's external representation (Apple's
    /// SecKeyCopyPublicKeyHash), which is also a certificate's public-key hash (`pkhh`) for identities.
    public var applicationLabel: Data {
        Data(Insecure.SHA1.hash(data: publicKey.externalRepresentation))
    }
}

extension AsymmetricKey: Equatable {
    /// Keys are equal when they are the same class and type with the same external representation.
    public static func == (a: Self, b: Self) -> Bool {
        a.keyClass == b.keyClass && a.type == b.type && a.externalRepresentation == b.externalRepresentation
    }
}

extension AsymmetricKey: CustomStringConvertible {
    /// Type, class and size only: never key material.
    public var description: String {
        "<SecKeyRef algorithm id: \(type == .rsa ? 1 : 3), key type: \(type == .rsa ? "RSA" : "ECPrimeRandom"), "
            + "\(keyClass == .public ? "PublicKey" : "PrivateKey"), block size: \(keySizeInBits) bits>"
    }
}

extension AsymmetricKey {
    /// SHA-1, for Apple's key and certificate hashes (application label, `pkhh`).
    public static func sha1(_ data: Data) -> Data { Data(Insecure.SHA1.hash(data: data)) }
}

extension AsymmetricKey {
    /// A private key from a PKCS#8 PrivateKeyInfo (what .p12 files and `-----BEGIN PRIVATE KEY-----` hold), or from
    /// SEC1 (EC) and PKCS#1 (RSA) DER, the other two encodings OpenSSL writes.
    public init(privateKeyDER der: Data) throws(KeychainError) {
        if let key = try? P256.Signing.PrivateKey(derRepresentation: der) { self.init(.p256(key)); return }
        if let key = try? P384.Signing.PrivateKey(derRepresentation: der) { self.init(.p384(key)); return }
        if let key = try? P521.Signing.PrivateKey(derRepresentation: der) { self.init(.p521(key)); return }
        if let key = try? _RSA.Signing.PrivateKey(unsafeDERRepresentation: der), key.keySizeInBits >= 1024 {
            self.init(.rsa(key)); return
        }
        throw KeychainError(.unknownFormat, "not an EC (P-256, P-384, P-521) or RSA private key")
    }

    /// A public key from a SubjectPublicKeyInfo (`-----BEGIN PUBLIC KEY-----`) or PKCS#1 RSAPublicKey DER.
    public init(publicKeyDER der: Data) throws(KeychainError) {
        if let key = try? P256.Signing.PublicKey(derRepresentation: der) { self.init(.p256Public(key)); return }
        if let key = try? P384.Signing.PublicKey(derRepresentation: der) { self.init(.p384Public(key)); return }
        if let key = try? P521.Signing.PublicKey(derRepresentation: der) { self.init(.p521Public(key)); return }
        if let key = try? _RSA.Signing.PublicKey(unsafeDERRepresentation: der) { self.init(.rsaPublic(key)); return }
        throw KeychainError(.unknownFormat, "not an EC (P-256, P-384, P-521) or RSA public key")
    }

    /// The PKCS#8 PrivateKeyInfo of a private key (what a .p12 file carries); nil for a public key.
    public var pkcs8Representation: Data? {
        switch material {
        case .p256(let key): key.derRepresentation
        case .p384(let key): key.derRepresentation
        case .p521(let key): key.derRepresentation
        case .rsa(let key): key.pkcs8DERRepresentation
        default: nil
        }
    }
}
