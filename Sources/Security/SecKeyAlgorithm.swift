import Foundation

// Apple's SecKeyAlgorithm identifiers with the exact string values of Apple's Security framework
// (OSX/sec/Security/SecKeyAdaptors.m in apple-oss-distributions/Security), under the names Swift gives them on
// Apple platforms (`.ecdsaSignatureMessageX962SHA256`). Which ones run here: SecKeyIsAlgorithmSupported and
// docs/COMPATIBILITY.md.

/// `SecKeyAlgorithm` as Swift sees Apple's CF_STRING_ENUM: a wrapper of the identifier string.
public struct SecKeyAlgorithm: RawRepresentable, Hashable, Sendable {
    let identifier: String
    public var rawValue: CFString { identifier as NSString }
    public init(rawValue: CFString) { identifier = rawValue as String }
    public init(_ rawValue: CFString) { identifier = rawValue as String }
    init(identifier: String) { self.identifier = identifier }
}

/// `SecKeyKeyExchangeParameter` (Apple's CF_STRING_ENUM): the X9.63 KDF's output size and shared info.
public struct SecKeyKeyExchangeParameter: RawRepresentable, Hashable, Sendable {
    let identifier: String
    public var rawValue: CFString { identifier as NSString }
    public init(rawValue: CFString) { identifier = rawValue as String }
    public static let requestedSize = SecKeyKeyExchangeParameter(rawValue: "requestedSize" as NSString)
    public static let sharedInfo = SecKeyKeyExchangeParameter(rawValue: "sharedInfo" as NSString)
}

/// `SecKeyOperationType`, with Apple's raw values.
public enum SecKeyOperationType: Int, Sendable {
    case sign = 0
    case verify = 1
    case encrypt = 2
    case decrypt = 3
    case keyExchange = 4
}

extension SecKeyAlgorithm {
    public static let rsaSignatureRaw = SecKeyAlgorithm(identifier: "algid:sign:RSA:raw")
    public static let rsaSignatureRawCCUnit = SecKeyAlgorithm(identifier: "algid:sign:RSA:raw-cc")
    public static let rsaSignatureDigestPKCS1v15Raw = SecKeyAlgorithm(identifier: "algid:sign:RSA:digest-PKCS1v15")
    public static let rsaSignatureDigestPKCS1v15MD5 = SecKeyAlgorithm(identifier: "algid:sign:RSA:digest-PKCS1v15:MD5")
    public static let rsaSignatureDigestPKCS1v15SHA1 = SecKeyAlgorithm(identifier: "algid:sign:RSA:digest-PKCS1v15:SHA1")
    public static let rsaSignatureDigestPKCS1v15SHA224 = SecKeyAlgorithm(identifier: "algid:sign:RSA:digest-PKCS1v15:SHA224")
    public static let rsaSignatureDigestPKCS1v15SHA256 = SecKeyAlgorithm(identifier: "algid:sign:RSA:digest-PKCS1v15:SHA256")
    public static let rsaSignatureDigestPKCS1v15SHA384 = SecKeyAlgorithm(identifier: "algid:sign:RSA:digest-PKCS1v15:SHA384")
    public static let rsaSignatureDigestPKCS1v15SHA512 = SecKeyAlgorithm(identifier: "algid:sign:RSA:digest-PKCS1v15:SHA512")
    public static let rsaSignatureDigestPSSSHA1 = SecKeyAlgorithm(identifier: "algid:sign:RSA:digest-PSS:SHA1:SHA1:20")
    public static let rsaSignatureDigestPSSSHA224 = SecKeyAlgorithm(identifier: "algid:sign:RSA:digest-PSS:SHA224:SHA224:24")
    public static let rsaSignatureDigestPSSSHA256 = SecKeyAlgorithm(identifier: "algid:sign:RSA:digest-PSS:SHA256:SHA256:32")
    public static let rsaSignatureDigestPSSSHA384 = SecKeyAlgorithm(identifier: "algid:sign:RSA:digest-PSS:SHA384:SHA384:48")
    public static let rsaSignatureDigestPSSSHA512 = SecKeyAlgorithm(identifier: "algid:sign:RSA:digest-PSS:SHA512:SHA512:64")
    public static let rsaSignatureMessagePKCS1v15MD5 = SecKeyAlgorithm(identifier: "algid:sign:RSA:message-PKCS1v15:MD5")
    public static let rsaSignatureMessagePKCS1v15SHA1 = SecKeyAlgorithm(identifier: "algid:sign:RSA:message-PKCS1v15:SHA1")
    public static let rsaSignatureMessagePKCS1v15SHA224 = SecKeyAlgorithm(identifier: "algid:sign:RSA:message-PKCS1v15:SHA224")
    public static let rsaSignatureMessagePKCS1v15SHA256 = SecKeyAlgorithm(identifier: "algid:sign:RSA:message-PKCS1v15:SHA256")
    public static let rsaSignatureMessagePKCS1v15SHA384 = SecKeyAlgorithm(identifier: "algid:sign:RSA:message-PKCS1v15:SHA384")
    public static let rsaSignatureMessagePKCS1v15SHA512 = SecKeyAlgorithm(identifier: "algid:sign:RSA:message-PKCS1v15:SHA512")
    public static let rsaSignatureMessagePSSSHA1 = SecKeyAlgorithm(identifier: "algid:sign:RSA:message-PSS:SHA1:SHA1:20")
    public static let rsaSignatureMessagePSSSHA224 = SecKeyAlgorithm(identifier: "algid:sign:RSA:message-PSS:SHA224:SHA224:24")
    public static let rsaSignatureMessagePSSSHA256 = SecKeyAlgorithm(identifier: "algid:sign:RSA:message-PSS:SHA256:SHA256:32")
    public static let rsaSignatureMessagePSSSHA384 = SecKeyAlgorithm(identifier: "algid:sign:RSA:message-PSS:SHA384:SHA384:48")
    public static let rsaSignatureMessagePSSSHA512 = SecKeyAlgorithm(identifier: "algid:sign:RSA:message-PSS:SHA512:SHA512:64")
    public static let ecdsaSignatureRFC4754 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:RFC4754")
    public static let ecdsaSignatureDigestRFC4754 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:digest-RFC4754")
    public static let ecdsaSignatureDigestRFC4754SHA1 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:digest-RFC4754:SHA1")
    public static let ecdsaSignatureDigestRFC4754SHA224 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:digest-RFC4754:SHA224")
    public static let ecdsaSignatureDigestRFC4754SHA256 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:digest-RFC4754:SHA256")
    public static let ecdsaSignatureDigestRFC4754SHA384 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:digest-RFC4754:SHA384")
    public static let ecdsaSignatureDigestRFC4754SHA512 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:digest-RFC4754:SHA512")
    public static let ecdsaSignatureMessageRFC4754SHA1 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:message-RFC4754:SHA1")
    public static let ecdsaSignatureMessageRFC4754SHA224 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:message-RFC4754:SHA224")
    public static let ecdsaSignatureMessageRFC4754SHA256 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:message-RFC4754:SHA256")
    public static let ecdsaSignatureMessageRFC4754SHA384 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:message-RFC4754:SHA384")
    public static let ecdsaSignatureMessageRFC4754SHA512 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:message-RFC4754:SHA512")
    public static let ecdsaSignatureDigestX962 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:digest-X962")
    public static let ecdsaSignatureDigestX962SHA1 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:digest-X962:SHA1")
    public static let ecdsaSignatureDigestX962SHA224 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:digest-X962:SHA224")
    public static let ecdsaSignatureDigestX962SHA256 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:digest-X962:SHA256")
    public static let ecdsaSignatureDigestX962SHA384 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:digest-X962:SHA384")
    public static let ecdsaSignatureDigestX962SHA512 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:digest-X962:SHA512")
    public static let ecdsaSignatureMessageX962SHA1 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:message-X962:SHA1")
    public static let ecdsaSignatureMessageX962SHA224 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:message-X962:SHA224")
    public static let ecdsaSignatureMessageX962SHA256 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:message-X962:SHA256")
    public static let ecdsaSignatureMessageX962SHA384 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:message-X962:SHA384")
    public static let ecdsaSignatureMessageX962SHA512 = SecKeyAlgorithm(identifier: "algid:sign:ECDSA:message-X962:SHA512")
    public static let rsaEncryptionRaw = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:raw")
    public static let rsaEncryptionRawCCUnit = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:raw-cc")
    public static let rsaEncryptionPKCS1 = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:PKCS1")
    public static let rsaEncryptionOAEPSHA1 = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:OAEP:SHA1")
    public static let rsaEncryptionOAEPSHA224 = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:OAEP:SHA224")
    public static let rsaEncryptionOAEPSHA256 = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:OAEP:SHA256")
    public static let rsaEncryptionOAEPSHA384 = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:OAEP:SHA384")
    public static let rsaEncryptionOAEPSHA512 = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:OAEP:SHA512")
    public static let rsaEncryptionOAEPSHA1AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:OAEP:SHA1:AESGCM")
    public static let rsaEncryptionOAEPSHA224AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:OAEP:SHA224:AESGCM")
    public static let rsaEncryptionOAEPSHA256AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:OAEP:SHA256:AESGCM")
    public static let rsaEncryptionOAEPSHA384AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:OAEP:SHA384:AESGCM")
    public static let rsaEncryptionOAEPSHA512AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:RSA:OAEP:SHA512:AESGCM")
    public static let eciesEncryptionStandardX963SHA1AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDH:KDFX963:SHA1:AESGCM")
    public static let eciesEncryptionStandardX963SHA224AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM")
    public static let eciesEncryptionStandardX963SHA256AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM")
    public static let eciesEncryptionStandardX963SHA384AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM")
    public static let eciesEncryptionStandardX963SHA512AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM")
    public static let eciesEncryptionCofactorX963SHA1AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA1:AESGCM")
    public static let eciesEncryptionCofactorX963SHA224AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM")
    public static let eciesEncryptionCofactorX963SHA256AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM")
    public static let eciesEncryptionCofactorX963SHA384AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM")
    public static let eciesEncryptionCofactorX963SHA512AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM")
    public static let eciesEncryptionStandardVariableIVX963SHA224AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM-KDFIV")
    public static let eciesEncryptionStandardVariableIVX963SHA256AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM-KDFIV")
    public static let eciesEncryptionStandardVariableIVX963SHA384AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM-KDFIV")
    public static let eciesEncryptionStandardVariableIVX963SHA512AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM-KDFIV")
    public static let eciesEncryptionCofactorVariableIVX963SHA224AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM-KDFIV")
    public static let eciesEncryptionCofactorVariableIVX963SHA256AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV")
    public static let eciesEncryptionCofactorVariableIVX963SHA384AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM-KDFIV")
    public static let eciesEncryptionCofactorVariableIVX963SHA512AESGCM = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM-KDFIV")
    public static let ecdhKeyExchangeStandard = SecKeyAlgorithm(identifier: "algid:keyexchange:ECDH")
    public static let ecdhKeyExchangeStandardX963SHA1 = SecKeyAlgorithm(identifier: "algid:keyexchange:ECDH:KDFX963:SHA1")
    public static let ecdhKeyExchangeStandardX963SHA224 = SecKeyAlgorithm(identifier: "algid:keyexchange:ECDH:KDFX963:SHA224")
    public static let ecdhKeyExchangeStandardX963SHA256 = SecKeyAlgorithm(identifier: "algid:keyexchange:ECDH:KDFX963:SHA256")
    public static let ecdhKeyExchangeStandardX963SHA384 = SecKeyAlgorithm(identifier: "algid:keyexchange:ECDH:KDFX963:SHA384")
    public static let ecdhKeyExchangeStandardX963SHA512 = SecKeyAlgorithm(identifier: "algid:keyexchange:ECDH:KDFX963:SHA512")
    public static let ecdhKeyExchangeCofactor = SecKeyAlgorithm(identifier: "algid:keyexchange:ECDHC")
    public static let ecdhKeyExchangeCofactorX963SHA1 = SecKeyAlgorithm(identifier: "algid:keyexchange:ECDHC:KDFX963:SHA1")
    public static let ecdhKeyExchangeCofactorX963SHA224 = SecKeyAlgorithm(identifier: "algid:keyexchange:ECDHC:KDFX963:SHA224")
    public static let ecdhKeyExchangeCofactorX963SHA256 = SecKeyAlgorithm(identifier: "algid:keyexchange:ECDHC:KDFX963:SHA256")
    public static let ecdhKeyExchangeCofactorX963SHA384 = SecKeyAlgorithm(identifier: "algid:keyexchange:ECDHC:KDFX963:SHA384")
    public static let ecdhKeyExchangeCofactorX963SHA512 = SecKeyAlgorithm(identifier: "algid:keyexchange:ECDHC:KDFX963:SHA512")
    public static let eciesEncryptionAKSSmartCard = SecKeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDH:SHA256:2PubKeys")
    public static let edDSASignatureMessageCurve25519SHA512 = SecKeyAlgorithm(identifier: "algid:sign:EdDSA:message-Curve25519:SHA512")
    public static let edDSASignatureMessageCurve448SHAKE256 = SecKeyAlgorithm(identifier: "algid:sign:EdDSA:message-Curve448:SHAKE256")
    public static let kemKyber = SecKeyAlgorithm(identifier: "algid:kem:kyber")
    public static let kemmlkem = SecKeyAlgorithm(identifier: "algid:kem:ML-KEM")
    public static let mldsaSignatureMessage = SecKeyAlgorithm(identifier: "algid:sign:ML-DSA:message")
}
