import Foundation
import KeychainCertificates

/// Reads fuzzer bytes as a .p12 with the passphrase the corpus files were made with (so that mutations reach the
/// decryption and the bags), and as an import file of each format. Key derivations are capped at 4,096 iterations
/// here so that each run stays fast; the daemon's own cap is PKCS12Archive.maximumIterations.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPKCS12(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Data(bytes: data, count: size)
    if let archive = try? PKCS12Archive(der: bytes, password: "fuzz", iterationLimit: 4096) {
        for identity in archive.identities { _ = identity.certificate.subjectSummary }
    }
    _ = try? PKCS12Archive(der: bytes, password: nil, iterationLimit: 4096)
    _ = try? PEM.blocks(in: bytes)
    return 0
}
