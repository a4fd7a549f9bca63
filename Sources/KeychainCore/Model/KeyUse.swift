#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A private-key operation on a key stored in the keychain, run where the key lives (the keychain service: in
/// this process, or in keychaind), so that a key that must not leave never does.
public struct KeyUse: Sendable {
    public enum Operation: UInt8, Sendable {
        /// `input` is the data or digest to sign.
        case sign = 0
        /// `input` is the ciphertext.
        case decrypt = 1
        /// ECDH with `peerPublicKey` (X9.63), optionally through the KDF (`requestedSize`, `sharedInfo`).
        case keyExchange = 2
        /// The public half's external representation (how a reference to a stored private key knows its public key).
        case copyPublicKey = 3
    }

    public var operation: Operation
    /// Apple's algorithm identifier (`algid:sign:ECDSA:message-X962:SHA256`); empty for copyPublicKey.
    public var algorithm: String
    public var input: SecretBytes
    public var peerPublicKey: Data?
    public var requestedSize: Int?
    public var sharedInfo: Data?

    public init(_ operation: Operation, algorithm: String = "", input: SecretBytes = SecretBytes(Data()),
                peerPublicKey: Data? = nil, requestedSize: Int? = nil, sharedInfo: Data? = nil) {
        self.operation = operation
        self.algorithm = algorithm
        self.input = input
        self.peerPublicKey = peerPublicKey
        self.requestedSize = requestedSize
        self.sharedInfo = sharedInfo
    }
}

extension Item {
    /// A private key whose bytes never leave the keychain (semantics §5.2): not extractable (`extr` 0), sensitive
    /// (`sens` 1), or guarded for private-key use (an access control with PrivateKeyUsage). Its data is refused to
    /// every caller (errSecKeyIsSensitive); it is used only through ``KeyUse``.
    public var isNonExportablePrivateKey: Bool {
        guard itemClass == .key, attributes["kcls"]?.numberValue == 1 else { return false }
        return attributes["extr"]?.numberValue == 0 || attributes["sens"]?.numberValue == 1
            || accessControl?.flags.contains(.privateKeyUsage) == true
    }
}

/// A key pair to generate where it will be stored (the keychain service: in this process, or in keychaind), so that
/// a private key that must not leave never exists outside it.
public struct KeyGeneration: Sendable {
    /// `kSecAttrKeyType`'s value: "73" (EC) or "42" (RSA).
    public var keyType: String
    public var bits: Int
    /// The private key item's attributes (the caller's; the service adds what it derives from the key).
    public var privateAttributes: [String: QueryValue]
    /// The public key item's attributes, or nil to store only the private key.
    public var publicAttributes: [String: QueryValue]?

    public init(keyType: String, bits: Int, privateAttributes: [String: QueryValue],
                publicAttributes: [String: QueryValue]?) {
        self.keyType = keyType
        self.bits = bits
        self.privateAttributes = privateAttributes
        self.publicAttributes = publicAttributes
    }
}

/// What generating a stored key pair gives back: the private key's item (attributes, no data) and the public key.
public struct GeneratedKeyPair: Sendable {
    public var privateKey: FoundItem
    /// The public key's external representation (X9.63 or PKCS#1).
    public var publicKey: Data

    public init(privateKey: FoundItem, publicKey: Data) {
        self.privateKey = privateKey
        self.publicKey = publicKey
    }
}
