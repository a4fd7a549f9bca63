import Foundation
import KeychainInterface
import Security
import Testing

extension SecurityCompatSuite {
    /// Certificates stored as Apple-style code stores them: SecItemAdd with kSecValueRef; the item's attributes come
    /// from the certificate itself; found again with kSecReturnRef.
    @Suite("Certificate items", .serialized,
           .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")))
    struct CertificateItemTests {
        init() { TestEnvironment.setUp() }

        /// A self-signed certificate; `printable`: names as PrintableString where they can be (OpenSSL's
        /// `string_mask = nombstr`), else OpenSSL's default UTF8String.
        func makeCertificate(_ subject: String, printable: Bool = false, extensions: [String] = []) throws -> SecCertificate {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("certitem-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let der = directory.appendingPathComponent("cert.der")
            let config = directory.appendingPathComponent("req.cnf")
            try "[req]\ndistinguished_name = dn\nstring_mask = \(printable ? "nombstr" : "utf8only")\n[dn]\n"
                .write(to: config, atomically: true, encoding: .utf8)
            let output = try ChildProcess.run("/usr/bin/openssl", arguments: [
                "req", "-config", config.path, "-x509", "-nodes", "-days", "1", "-subj", subject, "-newkey", "ec",
                "-pkeyopt", "ec_paramgen_curve:P-256", "-keyout", directory.appendingPathComponent("key.pem").path,
                "-outform", "DER", "-out", der.path,
            ] + extensions.flatMap { ["-addext", $0] })
            #expect(output.termination == .exited(0), "\(String(decoding: output.stderr, as: UTF8.self))")
            return try #require(SecCertificateCreateWithData(nil, try Data(contentsOf: der) as CFData))
        }

        @Test("kSecValueRef adds the certificate with its derived attributes; duplicates by issuer and serial; kSecReturnRef finds it")
        func addAndFind() throws {
            let name = "Item Leaf \(UUID().uuidString.prefix(8))"
            let certificate = try makeCertificate("/CN=\(name)", extensions: ["subjectKeyIdentifier=hash"])
            defer { _ = SecItemDelete([kSecClass as String: kSecClassCertificate, kSecAttrLabel as String: name] as CFDictionary) }
            // A label the caller passes is kept; a serial number it passes cannot contradict the certificate.
            let add: [String: Any] = [kSecValueRef as String: certificate, kSecAttrSerialNumber as String: Data([1, 2, 3])]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemAdd([kSecValueRef as String: certificate] as CFDictionary, nil) == errSecDuplicateItem)

            var attributes: CFTypeRef?
            let query: [String: Any] = [kSecClass as String: kSecClassCertificate, kSecAttrLabel as String: name,
                                        kSecReturnAttributes as String: true, kSecReturnRef as String: true]
            #expect(SecItemCopyMatching(query as CFDictionary, &attributes) == errSecSuccess)
            let found = try #require(attributes as? [String: Any])
            #expect((found[kSecAttrCertificateType as String] as? NSNumber)?.intValue == 3)  // X.509 v3
            #expect((found[kSecAttrSubjectKeyID as String] as? Data)?.count == 20)
            #expect((found[kSecAttrCertificateEncoding as String] as? NSNumber)?.intValue == 3)
            #expect(found[kSecAttrSerialNumber as String] as? Data == SecCertificateCopySerialNumberData(certificate, nil) as Data?)
            let issuerSequence = try #require(SecCertificateCopyNormalizedIssuerSequence(certificate) as Data?)
            #expect(found[kSecAttrIssuer as String] as? Data == issuerSequence.dropFirst(2))  // the content of the SEQUENCE
            let key = try #require(SecCertificateCopyKey(certificate))
            let keyAttributes = try #require(SecKeyCopyAttributes(key) as? [String: Any])
            #expect(found[kSecAttrPublicKeyHash as String] as? Data == keyAttributes[kSecAttrApplicationLabel as String] as? Data)
            #expect(found[kSecValueRef as String] as? SecCertificate == certificate)

            var reference: CFTypeRef?
            let byIssuer: [String: Any] = [kSecClass as String: kSecClassCertificate,
                                           kSecAttrIssuer as String: Data(issuerSequence.dropFirst(2)),
                                           kSecAttrSerialNumber as String: SecCertificateCopySerialNumberData(certificate, nil)!,
                                           kSecReturnRef as String: true]
            #expect(SecItemCopyMatching(byIssuer as CFDictionary, &reference) == errSecSuccess)
            #expect(reference as? SecCertificate == certificate)
        }

        @Test("normalized names: PrintableString values upper-cased with blanks folded, other string types as they are")
        func normalization() throws {
            let printable = try makeCertificate("/C=US/O=  acme    widgets  /CN=Leaf", printable: true)
            let subject = try #require(SecCertificateCopyNormalizedSubjectSequence(printable) as Data?)
            #expect(subject.range(of: Data([0x13, 12]) + Data("ACME WIDGETS".utf8)) != nil)  // PrintableString, 12 bytes
            #expect(subject.range(of: Data("acme".utf8)) == nil)
            #expect(subject.range(of: Data("LEAF".utf8)) != nil)
            // The same name in UTF8String is kept as it is.
            let utf8 = try makeCertificate("/O=acme widgets/CN=Leaf")
            let kept = try #require(SecCertificateCopyNormalizedSubjectSequence(utf8) as Data?)
            #expect(kept.range(of: Data("acme widgets".utf8)) != nil)
            #expect(kept.range(of: Data("Leaf".utf8)) != nil)
            // Two certificates whose PrintableString names differ only in case and blanks have equal normalized names.
            let other = try makeCertificate("/C=US/O=ACME WIDGETS/CN=leaf", printable: true)
            #expect(SecCertificateCopyNormalizedSubjectSequence(other) as Data? == subject)
        }
    }
}
