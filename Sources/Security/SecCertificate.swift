import Foundation
import KeychainCertificates
import KeychainCore

/// `SecCertificate`: an X.509 certificate from its DER. Anything else gives no certificate (nil), never a crash.
public final class SecCertificate: NSObject, @unchecked Sendable {
    // SAFETY: immutable after init.
    let certificate: Certificate
    init(_ certificate: Certificate) { self.certificate = certificate }

    public override func isEqual(_ object: Any?) -> Bool { (object as? SecCertificate)?.certificate == certificate }
    public override var hash: Int { certificate.der.hashValue }
    public override var description: String {
        "<cert(\(Unmanaged.passUnretained(self).toOpaque()))s: \(certificate.subjectSummary ?? "") i: >"
    }
}

public typealias SecCertificateRef = SecCertificate

public func SecCertificateGetTypeID() -> CFTypeID { 312 }

public func SecCertificateCreateWithData(_ allocator: CFAllocator?, _ data: CFData) -> SecCertificate? {
    Certificate(der: data as Data).map(SecCertificate.init)
}

public func SecCertificateCopyData(_ certificate: SecCertificate) -> CFData { certificate.certificate.der as NSData }

/// Apple's summary of the subject: its common name(s), else the first e-mail address or DNS name, else the
/// organizational unit or organization.
public func SecCertificateCopySubjectSummary(_ certificate: SecCertificate) -> CFString? {
    certificate.certificate.subjectSummary.map { $0 as NSString }
}

/// The subject's last common name; errSecInternal when it has none (as Apple).
public func SecCertificateCopyCommonName(_ certificate: SecCertificate, _ commonName: UnsafeMutablePointer<CFString?>)
    -> OSStatus
{
    guard let last = certificate.certificate.commonNames.last else { return KeychainStatus.internal.rawValue }
    commonName.pointee = last as NSString
    return errSecSuccess
}

/// The subject alternative name's rfc822Names, then the subject's emailAddress attributes (empty if none).
public func SecCertificateCopyEmailAddresses(_ certificate: SecCertificate,
                                             _ emailAddresses: UnsafeMutablePointer<CFArray?>) -> OSStatus
{
    emailAddresses.pointee = certificate.certificate.emailAddresses.map { $0 as NSString } as NSArray
    return errSecSuccess
}

/// The serial number's INTEGER content bytes.
public func SecCertificateCopySerialNumberData(_ certificate: SecCertificate,
                                               _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData?
{
    certificate.certificate.serialNumber as NSData
}

/// The subject's public key (EC P-256/384/521 or RSA); nil for other key types.
public func SecCertificateCopyKey(_ certificate: SecCertificate) -> SecKey? {
    certificate.certificate.publicKey.map(SecKey.init)
}

/// The issuer's Name as Apple normalizes it (PrintableString values upper-cased, blanks folded), as a SEQUENCE:
/// what a `cert` item's kSecAttrIssuer holds the content of.
public func SecCertificateCopyNormalizedIssuerSequence(_ certificate: SecCertificate) -> CFData? {
    certificate.certificate.normalizedIssuerSequence as NSData
}

public func SecCertificateCopyNormalizedSubjectSequence(_ certificate: SecCertificate) -> CFData? {
    certificate.certificate.normalizedSubjectSequence as NSData
}
