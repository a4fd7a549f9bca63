import Foundation
import KeychainCore
import KeychainKeys

/// `SecKey`: an EC or RSA key, public or private, held in this process.
///
/// Keys made here (SecKeyCreateRandomKey without kSecAttrIsPermanent, SecKeyCreateWithData) live in the app's
/// memory, as Apple's software keys do. `description` names the key's type and size, never its bytes.
public final class SecKey: NSObject, @unchecked Sendable {
    // SAFETY: immutable after init.
    let key: AsymmetricKey
    init(_ key: AsymmetricKey) { self.key = key }

    public override func isEqual(_ object: Any?) -> Bool { (object as? SecKey)?.key == key }
    public override var hash: Int { key.applicationLabel.hashValue }
    public override var description: String { key.description }
}

public typealias SecKeyRef = SecKey

public func SecKeyGetTypeID() -> CFTypeID { 311 }

/// Parameters: kSecAttrKeyType (EC / ECSECPrimeRandom or RSA), kSecAttrKeySizeInBits (EC 256, 384, 521; RSA
/// 2048–4096). kSecAttrTokenID kSecAttrTokenIDSecureEnclave fails with errSecUnimplemented: there is no enclave here.
/// kSecAttrIsPermanent true (top level or in kSecPrivateKeyAttrs) is not offered yet: errSecUnimplemented, so that
/// no code believes a key was stored that was not.
public func SecKeyCreateRandomKey(_ parameters: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?)
    -> SecKey?
{
    secKeyCall(error) { () throws(KeychainError) in
        let dictionary = KeyParameters(parameters)
        if let token = dictionary.string(kSecAttrTokenID), !token.isEmpty {
            throw KeychainError(.unimplemented, "no token \(token) on this system (no Secure Enclave): make the key without kSecAttrTokenID")
        }
        let privateAttributes = KeyParameters(dictionary.value(kSecPrivateKeyAttrs) as? NSDictionary ?? [:])
        if dictionary.bool(kSecAttrIsPermanent) == true || privateAttributes.bool(kSecAttrIsPermanent) == true {
            throw KeychainError(.unimplemented, "keys stored in the keychain (kSecAttrIsPermanent) are not available yet")
        }
        let type = try dictionary.keyType()
        guard let bits = dictionary.integer(kSecAttrKeySizeInBits) else {
            throw KeychainError(.param, "kSecAttrKeySizeInBits is missing")
        }
        return SecKey(try AsymmetricKey.generate(type: type, bits: bits))
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

public func SecKeyCopyPublicKey(_ key: SecKey) -> SecKey? { SecKey(key.key.publicKey) }

public func SecKeyGetBlockSize(_ key: SecKey) -> Int { key.key.blockSize }

/// The key's bytes in Apple's format (X9.63 for EC, PKCS#1 for RSA).
public func SecKeyCopyExternalRepresentation(_ key: SecKey, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?)
    -> CFData?
{
    key.key.externalRepresentation as NSData
}

/// Apple's attribute dictionary for a key in memory (SecKeyCopyAttributeDictionaryWithLocalKey).
public func SecKeyCopyAttributes(_ key: SecKey) -> CFDictionary? {
    let isPrivate = key.key.keyClass == .private
    let bits = NSNumber(value: key.key.keySizeInBits)
    let attributes: [String: AnyObject] = [
        kSecClass as String: kSecClassKey,
        kSecAttrKeyClass as String: key.key.keyClass.rawValue as NSString,
        kSecAttrApplicationLabel as String: key.key.applicationLabel as NSData,
        kSecAttrIsPermanent as String: kCFBooleanTrue,
        kSecAttrIsPrivate as String: kCFBooleanTrue,
        kSecAttrIsModifiable as String: kCFBooleanTrue,
        kSecAttrKeyType as String: key.key.type.rawValue as NSString,
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
        kSecValueData as String: key.key.externalRepresentation as NSData,
    ]
    return attributes as NSDictionary
}

public func SecKeyIsAlgorithmSupported(_ key: SecKey, _ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm)
    -> Bool
{
    guard let operation = KeyOperation(rawValue: operation.rawValue) else { return false }
    return key.key.supports(operation, KeyAlgorithm(identifier: algorithm.identifier))
}

public func SecKeyCreateSignature(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ dataToSign: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) { () throws(KeychainError) in
        try key.key.signature(for: dataToSign as Data, algorithm: KeyAlgorithm(identifier: algorithm.identifier)) as NSData
    }
}

/// true when `signature` is `key`'s over `signedData`; false with errSecVerifyFailed when it is not.
public func SecKeyVerifySignature(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ signedData: CFData, _ signature: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> Bool {
    secKeyCall(error) { () throws(KeychainError) in
        try key.key.verify(signature as Data, for: signedData as Data, algorithm: KeyAlgorithm(identifier: algorithm.identifier))
        return true
    } ?? false
}

public func SecKeyCreateEncryptedData(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ plaintext: CFData, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) { () throws(KeychainError) in
        try key.key.encrypt(plaintext as Data, algorithm: KeyAlgorithm(identifier: algorithm.identifier)) as NSData
    }
}

public func SecKeyCreateDecryptedData(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ ciphertext: CFData, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) { () throws(KeychainError) in
        try key.key.decrypt(ciphertext as Data, algorithm: KeyAlgorithm(identifier: algorithm.identifier)) as NSData
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
        return try privateKey.key.keyExchange(
            with: publicKey.key, algorithm: KeyAlgorithm(identifier: algorithm.identifier),
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
