import Foundation
import KeychainClient
import KeychainCore
import KeychainKeys

/// `SecKey`: an EC or RSA key, public or private.
///
/// Either the key itself, in this process (SecKeyCreateRandomKey without kSecAttrIsPermanent, SecKeyCreateWithData,
/// public keys), as Apple's software keys are; or a reference to a private key stored in the keychain, known here by
/// its public half and its persistent reference: signing, decryption and key exchange with it run where the key lives
/// (the keychain service: in this process, or in keychaind), and its bytes come back only when it is extractable.
/// `description` names the key's type and size, never its bytes.
public final class SecKey: NSObject, @unchecked Sendable {
    // SAFETY: immutable after init.
    enum Backing {
        case memory(AsymmetricKey)
        case stored(publicKey: AsymmetricKey, reference: Data, attributes: [String: AnyObject])
    }

    let backing: Backing
    init(_ key: AsymmetricKey) { backing = .memory(key) }
    init(storedPrivateKey publicKey: AsymmetricKey, reference: Data, attributes: [String: AnyObject]) {
        backing = .stored(publicKey: publicKey, reference: reference, attributes: attributes)
    }

    /// The key, when this process holds it.
    var key: AsymmetricKey? {
        if case .memory(let key) = backing { return key }
        return nil
    }

    var publicKey: AsymmetricKey {
        switch backing {
        case .memory(let key): key.publicKey
        case .stored(let publicKey, _, _): publicKey
        }
    }

    var keyClass: AsymmetricKey.KeyClass {
        switch backing {
        case .memory(let key): key.keyClass
        case .stored: .private
        }
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? SecKey else { return false }
        switch (backing, other.backing) {
        case (.memory(let a), .memory(let b)): return a == b
        case (.stored(_, let a, _), .stored(_, let b, _)): return a == b
        default: return false
        }
    }

    public override var hash: Int { publicKey.applicationLabel.hashValue }

    public override var description: String {
        switch backing {
        case .memory(let key): key.description
        case .stored(let publicKey, _, _):
            publicKey.description.replacingOccurrences(of: "PublicKey", with: "PrivateKey, stored in the keychain")
        }
    }

    /// Runs a private-key operation: here for a key in memory, in the keychain service for a stored one.
    func use(_ operation: KeyUse.Operation, _ algorithm: SecKeyAlgorithm, _ input: Data, peer: SecKey? = nil,
             requestedSize: Int? = nil, sharedInfo: Data? = nil) throws(KeychainError) -> Data
    {
        let use = KeyUse(operation, algorithm: algorithm.identifier, input: SecretBytes(input),
                         peerPublicKey: peer?.publicKey.externalRepresentation, requestedSize: requestedSize,
                         sharedInfo: sharedInfo)
        switch backing {
        case .memory(let key):
            return try key.perform(use)
        case .stored(let publicKey, let reference, _):
            if let keyOperation = operation.keyOperation,
               !AsymmetricKey.supports(keyOperation, KeyAlgorithm(identifier: algorithm.identifier), type: publicKey.type,
                                       keyClass: .private) {
                throw KeychainError(.param, "\(algorithm.identifier): algorithm not supported by the key \(self)")
            }
            let result = try KeychainClient.shared().service.useKey(["v_PersistentRef": .data(reference)], use, in: nil)
            return result.withUnsafeBytes { Data($0) }
        }
    }
}

public typealias SecKeyRef = SecKey

public func SecKeyGetTypeID() -> CFTypeID { 311 }

/// Parameters: kSecAttrKeyType (EC / ECSECPrimeRandom or RSA), kSecAttrKeySizeInBits (EC 256, 384, 521; RSA
/// 2048–4096). kSecAttrTokenID kSecAttrTokenIDSecureEnclave is refused with errSecUnimplemented, by decision: this
/// machine has no enclave, and a software stand-in would promise a protection it cannot give (docs/COMPATIBILITY.md).
/// kSecAttrIsPermanent (top level: both halves; in kSecPrivateKeyAttrs / kSecPublicKeyAttrs: that half) stores the
/// pair in the keychain and returns a reference to the stored private key (SecKey+Keychain.swift).
public func SecKeyCreateRandomKey(_ parameters: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?)
    -> SecKey?
{
    secKeyCall(error) { () throws(KeychainError) in
        let dictionary = KeyParameters(parameters)
        if let token = dictionary.string(kSecAttrTokenID), !token.isEmpty {
            throw KeychainError(.unimplemented, "no token \(token) on this system (no Secure Enclave): make the key without kSecAttrTokenID")
        }
        let privateAttributes = KeyParameters(dictionary.value(kSecPrivateKeyAttrs) as? NSDictionary ?? [:])
        let publicAttributes = KeyParameters(dictionary.value(kSecPublicKeyAttrs) as? NSDictionary ?? [:])
        let permanent = dictionary.bool(kSecAttrIsPermanent) == true
        let storePrivate = privateAttributes.bool(kSecAttrIsPermanent) ?? permanent
        let storePublic = publicAttributes.bool(kSecAttrIsPermanent) ?? permanent
        let type = try dictionary.keyType()
        guard let bits = dictionary.integer(kSecAttrKeySizeInBits) else {
            throw KeychainError(.param, "kSecAttrKeySizeInBits is missing")
        }
        guard storePrivate || storePublic else { return SecKey(try AsymmetricKey.generate(type: type, bits: bits)) }
        return try StoredKeys.store(type: type, bits: bits, parameters: parameters, storePrivate: storePrivate,
                                    storePublic: storePublic)
    }
}

/// Attributes: kSecAttrKeyType, kSecAttrKeyClass (both required), kSecAttrKeySizeInBits (checked when given).
public func SecKeyCreateWithData(
    _ keyData: CFData, _ attributes: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecKey? {
    secKeyCall(error) { () throws(KeychainError) in
        let dictionary = KeyParameters(attributes)
        guard let keyClass = dictionary.string(kSecAttrKeyClass).flatMap(AsymmetricKey.KeyClass.init(rawValue:)) else {
            throw KeychainError(.param, "kSecAttrKeyClass must be kSecAttrKeyClassPublic or kSecAttrKeyClassPrivate")
        }
        return SecKey(try AsymmetricKey(externalRepresentation: keyData as Data, type: try dictionary.keyType(),
                                        keyClass: keyClass, bits: dictionary.integer(kSecAttrKeySizeInBits)))
    }
}

public func SecKeyCopyPublicKey(_ key: SecKey) -> SecKey? { SecKey(key.publicKey) }

public func SecKeyGetBlockSize(_ key: SecKey) -> Int { key.publicKey.blockSize }

/// The key's bytes in Apple's format (X9.63 for EC, PKCS#1 for RSA). A stored private key that is not extractable
/// (or sensitive, or guarded for private-key use) never comes back: errSecKeyIsSensitive.
public func SecKeyCopyExternalRepresentation(_ key: SecKey, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?)
    -> CFData?
{
    secKeyCall(error) { () throws(KeychainError) in
        switch key.backing {
        case .memory(let key): return key.externalRepresentation as NSData
        case .stored(_, let reference, _):
            let found = try KeychainClient.shared().search(["v_PersistentRef": .data(reference), "r_Data": .bool(true)])
            guard let secret = found.first?.secret else { throw KeychainError.itemNotFound() }
            return secret.withUnsafeBytes { Data($0) } as NSData
        }
    }
}

/// Apple's attribute dictionary: for a key in memory as SecKeyCopyAttributeDictionaryWithLocalKey makes it; for a
/// stored key, its item's attributes.
public func SecKeyCopyAttributes(_ key: SecKey) -> CFDictionary? {
    switch key.backing {
    case .stored(_, _, let attributes): return attributes as NSDictionary
    case .memory(let key): return memoryKeyAttributes(key) as NSDictionary
    }
}

func memoryKeyAttributes(_ key: AsymmetricKey) -> [String: AnyObject] {
    let isPrivate = key.keyClass == .private
    let bits = NSNumber(value: key.keySizeInBits)
    return [
        kSecClass as String: kSecClassKey,
        kSecAttrKeyClass as String: key.keyClass.rawValue as NSString,
        kSecAttrApplicationLabel as String: key.applicationLabel as NSData,
        kSecAttrIsPermanent as String: kCFBooleanTrue,
        kSecAttrIsPrivate as String: kCFBooleanTrue,
        kSecAttrIsModifiable as String: kCFBooleanTrue,
        kSecAttrKeyType as String: key.type.rawValue as NSString,
        kSecAttrKeySizeInBits as String: bits,
        kSecAttrEffectiveKeySize as String: bits,
        kSecAttrIsSensitive as String: kCFBooleanFalse,
        kSecAttrWasAlwaysSensitive as String: kCFBooleanFalse,
        kSecAttrIsExtractable as String: kCFBooleanTrue,
        kSecAttrWasNeverExtractable as String: kCFBooleanFalse,
        kSecAttrCanEncrypt as String: NSNumber(value: !isPrivate),
        kSecAttrCanDecrypt as String: NSNumber(value: isPrivate),
        kSecAttrCanDerive as String: kCFBooleanTrue,
        kSecAttrCanSign as String: NSNumber(value: isPrivate),
        kSecAttrCanVerify as String: NSNumber(value: !isPrivate),
        kSecAttrCanSignRecover as String: kCFBooleanFalse,
        kSecAttrCanVerifyRecover as String: kCFBooleanFalse,
        kSecAttrCanWrap as String: NSNumber(value: !isPrivate),
        kSecAttrCanUnwrap as String: NSNumber(value: isPrivate),
        kSecValueData as String: key.externalRepresentation as NSData,
    ]
}

public func SecKeyIsAlgorithmSupported(_ key: SecKey, _ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm)
    -> Bool
{
    guard let operation = KeyOperation(rawValue: operation.rawValue) else { return false }
    return AsymmetricKey.supports(operation, KeyAlgorithm(identifier: algorithm.identifier), type: key.publicKey.type,
                                  keyClass: key.keyClass)
}

public func SecKeyCreateSignature(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ dataToSign: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) { () throws(KeychainError) in
        try key.use(.sign, algorithm, dataToSign as Data) as NSData
    }
}

/// true when `signature` is `key`'s over `signedData`; false with errSecVerifyFailed when it is not.
public func SecKeyVerifySignature(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ signedData: CFData, _ signature: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> Bool {
    secKeyCall(error) { () throws(KeychainError) in
        try key.publicKey.verify(signature as Data, for: signedData as Data,
                                 algorithm: KeyAlgorithm(identifier: algorithm.identifier))
        return true
    } ?? false
}

public func SecKeyCreateEncryptedData(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ plaintext: CFData, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) { () throws(KeychainError) in
        try key.publicKey.encrypt(plaintext as Data, algorithm: KeyAlgorithm(identifier: algorithm.identifier)) as NSData
    }
}

public func SecKeyCreateDecryptedData(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ ciphertext: CFData, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) { () throws(KeychainError) in
        try key.use(.decrypt, algorithm, ciphertext as Data) as NSData
    }
}

/// ECDH of `privateKey` with `publicKey`: the raw shared secret, or (X9.63 algorithms) `requestedSize` bytes derived
/// over `sharedInfo` (SecKeyKeyExchangeParameter).
public func SecKeyCopyKeyExchangeResult(
    _ privateKey: SecKey, _ algorithm: SecKeyAlgorithm, _ publicKey: SecKey, _ parameters: CFDictionary,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) { () throws(KeychainError) in
        let dictionary = KeyParameters(parameters)
        let sharedInfo = dictionary.value(SecKeyKeyExchangeParameter.sharedInfo.rawValue)
        if sharedInfo != nil, !(sharedInfo is Data) {
            throw KeychainError(.param, "ECDHKeyExchange wrong sharedInfo type (must be CFData/NSData)")
        }
        return try privateKey.use(
            .keyExchange, algorithm, Data(), peer: publicKey,
            requestedSize: (dictionary.value(SecKeyKeyExchangeParameter.requestedSize.rawValue) as? NSNumber)?.intValue,
            sharedInfo: sharedInfo as? Data) as NSData
    }
}

/// Runs a SecKey call: its value, or nil with the CFError (NSOSStatusErrorDomain, Apple's code) in `error`.
private func secKeyCall<T>(_ error: UnsafeMutablePointer<Unmanaged<CFError>?>?, _ body: () throws(KeychainError) -> T)
    -> T?
{
    do {
        return try body()
    } catch let failure {
        error?.pointee = Unmanaged.passRetained(makeCFError(failure))
        return nil
    }
}

/// A key-parameter dictionary, read leniently as Apple does (numbers may come as strings and the reverse).
private struct KeyParameters {
    let dictionary: NSDictionary
    init(_ dictionary: NSDictionary) { self.dictionary = dictionary }

    func value(_ key: CFString) -> Any? { dictionary[key as String] }

    func string(_ key: CFString) -> String? {
        switch value(key) {
        case let text as String: text
        case let number as NSNumber: number.stringValue
        default: nil
        }
    }

    func integer(_ key: CFString) -> Int? {
        switch value(key) {
        case let number as NSNumber: number.intValue
        case let text as String: Int(text)
        default: nil
        }
    }

    func bool(_ key: CFString) -> Bool? { (value(key) as? NSNumber)?.boolValue }

    func keyType() throws(KeychainError) -> AsymmetricKey.KeyType {
        guard let type = string(kSecAttrKeyType).flatMap(AsymmetricKey.KeyType.init(rawValue:)) else {
            throw KeychainError(.param, "kSecAttrKeyType must be kSecAttrKeyTypeECSECPrimeRandom or kSecAttrKeyTypeRSA")
        }
        return type
    }
}
