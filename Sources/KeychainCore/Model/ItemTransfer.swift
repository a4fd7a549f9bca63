#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The file formats `security import` and `export` speak (macOS's `-f` names).
public enum ItemFileFormat: String, Sendable, CaseIterable {
    /// PKCS#12 (.p12, .pfx): identities and certificates under a passphrase.
    case pkcs12
    /// PEM: one or more `-----BEGIN …-----` blocks (certificates, private and public keys).
    case pemSequence = "pemseq"
    /// One DER certificate.
    case x509
    /// A private key: PKCS#8 PrivateKeyInfo, SEC1 or PKCS#1, DER or PEM.
    case openssl
    case pkcs8
}

/// Certificates, keys and identities read from a file and stored, where the keys will live (the keychain service:
/// in this process, or in keychaind), so that the private keys of an export never leave it unwrapped.
public struct ItemImport: Sendable {
    /// The file's bytes (a .p12 or PEM may hold private keys: kept like any secret).
    public var file: SecretBytes
    /// nil: recognised from the contents.
    public var format: ItemFileFormat?
    public var passphrase: SecretBytes?
    /// Added to every imported item (access: kSecAttrAccessible, the trusted applications), and for private keys
    /// "extr" 0 / "sens" 1 when they are imported non-extractable.
    public var attributes: [String: QueryValue]
    public var privateKeyAttributes: [String: QueryValue]

    public init(file: SecretBytes, format: ItemFileFormat?, passphrase: SecretBytes?,
                attributes: [String: QueryValue] = [:], privateKeyAttributes: [String: QueryValue] = [:]) {
        self.file = file
        self.format = format
        self.passphrase = passphrase
        self.attributes = attributes
        self.privateKeyAttributes = privateKeyAttributes
    }
}

/// Which items an export writes, and how.
public struct ItemExport: Sendable {
    public enum Selection: UInt8, Sendable {
        case certificates = 0, identities = 1, all = 2
    }

    public var selection: Selection
    /// pemSequence or x509 for certificates; pkcs12 for identities.
    public var format: ItemFileFormat
    /// PKCS#12's passphrase.
    public var passphrase: SecretBytes?

    public init(selection: Selection, format: ItemFileFormat, passphrase: SecretBytes?) {
        self.selection = selection
        self.format = format
        self.passphrase = passphrase
    }
}

/// A certificate item with what only a certificate parser knows: `find-certificate`, `find-identity` and
/// `delete-certificate` match and print these.
public struct CertificateRecord: Sendable {
    /// The `cert` item: its attributes, persistent reference, and the DER as its data.
    public var item: FoundItem
    public var sha1: Data
    public var sha256: Data
    /// SecCertificateCopyCommonName (the subject's last common name).
    public var commonName: String?
    public var emailAddresses: [String]
    /// SecCertificateCopySubjectSummary.
    public var subjectSummary: String?
    /// Whether the keychain holds its private key (the certificate is an identity's).
    public var hasPrivateKey: Bool
    /// The validity period, when the certificate's times can be read.
    public var notBefore: Date?
    public var notAfter: Date?

    public init(item: FoundItem, sha1: Data, sha256: Data, commonName: String?, emailAddresses: [String],
                subjectSummary: String?, hasPrivateKey: Bool, notBefore: Date?, notAfter: Date?) {
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.item = item
        self.sha1 = sha1
        self.sha256 = sha256
        self.commonName = commonName
        self.emailAddresses = emailAddresses
        self.subjectSummary = subjectSummary
        self.hasPrivateKey = hasPrivateKey
    }
}
