/// An operation on an asymmetric key, named by Apple's algorithm identifier (`algid:sign:ECDSA:message-X962:SHA256`).
///
/// Parsing the identifier (rather than listing constants) keeps one source of truth for what each part means: the
/// operation, the padding or signature format, whether the input is a message or its digest, and the hash.
public enum KeyAlgorithm: Hashable, Sendable {
    public enum Hash: String, Hashable, Sendable, CaseIterable {
        case sha1 = "SHA1", sha224 = "SHA224", sha256 = "SHA256", sha384 = "SHA384", sha512 = "SHA512"

        public var byteCount: Int {
            switch self {
            case .sha1: 20
            case .sha224: 28
            case .sha256: 32
            case .sha384: 48
            case .sha512: 64
            }
        }
    }

    /// What a signature algorithm is given: the message (hashed here), or a digest the caller made (with a known
    /// hash, or any hash when nil).
    public enum SignatureInput: Hashable, Sendable {
        case message(Hash)
        case digest(Hash?)
    }

    /// ECDSA signatures as DER (X9.62) or as r ‖ s (RFC 4754).
    public enum ECDSAFormat: Hashable, Sendable { case x962, rfc4754 }

    public enum RSASignaturePadding: Hashable, Sendable { case pkcs1v15, pss }

    public enum RSAEncryptionPadding: Hashable, Sendable {
        case raw
        case pkcs1
        case oaep(Hash)
    }

    case ecdsa(ECDSAFormat, SignatureInput)
    case rsaSignature(RSASignaturePadding, SignatureInput)
    case rsaSignatureRaw
    case rsaEncryption(RSAEncryptionPadding)
    /// ECDH, the raw shared secret (nil) or through the ANSI X9.63 KDF with a hash. Standard and cofactor ECDH are
    /// one operation on the NIST prime curves (cofactor 1).
    case ecdhKeyExchange(kdf: Hash?, cofactor: Bool)
    /// Apple's ECIES: ECDH with an ephemeral key, X9.63 KDF (sharedInfo = the ephemeral public key), AES-GCM with a
    /// 16-byte tag; the IV all zero, or (variable IV) the KDF's last 16 bytes.
    case ecies(Hash, variableIV: Bool, cofactor: Bool)
    /// Identifiers this keychain knows by name but does not run (ECIES, ECDH, RSA with AES-GCM, MD5, …), and
    /// unknown ones.
    case unsupported(String)

    public init(identifier: String) {
        self = Self.parse(identifier) ?? .unsupported(identifier)
    }

    private static func parse(_ identifier: String) -> KeyAlgorithm? {
        let parts = identifier.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, parts[0] == "algid" else { return nil }
        func hash(_ index: Int) -> Hash? { index < parts.count ? Hash(rawValue: parts[index]) : nil }
        switch (parts[1], parts[2]) {
        case ("sign", "ECDSA"):
            guard parts.count >= 4 else { return nil }
            switch (parts[3], parts.count) {
            case ("RFC4754", 4), ("digest-RFC4754", 4): return .ecdsa(.rfc4754, .digest(nil))
            case ("digest-X962", 4): return .ecdsa(.x962, .digest(nil))
            case ("digest-RFC4754", 5): return hash(4).map { .ecdsa(.rfc4754, .digest($0)) }
            case ("digest-X962", 5): return hash(4).map { .ecdsa(.x962, .digest($0)) }
            case ("message-RFC4754", 5): return hash(4).map { .ecdsa(.rfc4754, .message($0)) }
            case ("message-X962", 5): return hash(4).map { .ecdsa(.x962, .message($0)) }
            default: return nil
            }
        case ("sign", "RSA"):
            guard parts.count >= 4 else { return nil }
            switch (parts[3], parts.count) {
            case ("raw", 4): return .rsaSignatureRaw
            case ("digest-PKCS1v15", 4): return .rsaSignature(.pkcs1v15, .digest(nil))
            case ("digest-PKCS1v15", 5): return hash(4).map { .rsaSignature(.pkcs1v15, .digest($0)) }
            case ("message-PKCS1v15", 5): return hash(4).map { .rsaSignature(.pkcs1v15, .message($0)) }
            // PSS: hash, MGF1 hash, salt length; Apple's are always the same hash twice and its digest length.
            case ("digest-PSS", 7), ("message-PSS", 7):
                guard let h = hash(4), parts[5] == parts[4], Int(parts[6]) == h.byteCount else { return nil }
                return .rsaSignature(.pss, parts[3] == "digest-PSS" ? .digest(h) : .message(h))
            default: return nil
            }
        case ("keyexchange", "ECDH"), ("keyexchange", "ECDHC"):
            let cofactor = parts[2] == "ECDHC"
            if parts.count == 3 { return .ecdhKeyExchange(kdf: nil, cofactor: cofactor) }
            guard parts.count == 5, parts[3] == "KDFX963" else { return nil }
            return hash(4).map { .ecdhKeyExchange(kdf: $0, cofactor: cofactor) }
        case ("encrypt", "ECIES"):
            guard parts.count == 7, ["ECDH", "ECDHC"].contains(parts[3]), parts[4] == "KDFX963",
                  ["AESGCM", "AESGCM-KDFIV"].contains(parts[6]), let h = hash(5)
            else { return nil }
            return .ecies(h, variableIV: parts[6] == "AESGCM-KDFIV", cofactor: parts[3] == "ECDHC")
        case ("encrypt", "RSA"):
            switch (parts.count > 3 ? parts[3] : "", parts.count) {
            case ("raw", 4): return .rsaEncryption(.raw)
            case ("PKCS1", 4): return .rsaEncryption(.pkcs1)
            case ("OAEP", 5): return hash(4).map { .rsaEncryption(.oaep($0)) }
            default: return nil
            }
        default:
            return nil
        }
    }
}
