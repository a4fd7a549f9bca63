import Foundation
import KeychainInterface
import Security
import Testing

extension SecurityCompatSuite {
    /// Identities as a client-certificate (mutual TLS) setup makes them: a private key and its certificate stored
    /// separately, found together as kSecClassIdentity.
    @Suite("SecIdentity", .serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")))
    struct SecIdentityTests {
        init() { TestEnvironment.setUp() }

        @Test("a stored key and its certificate make an identity: found, its parts copied, it signs, and deleting it removes both")
        func identity() throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("identity-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let name = "Client \(UUID().uuidString.prefix(8))"
            let keyPath = directory.appendingPathComponent("key.pem").path
            let certificatePath = directory.appendingPathComponent("cert.der").path
            let made = try ChildProcess.run("/usr/bin/openssl", arguments: [
                "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=\(name)", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:P-256", "-keyout", keyPath, "-outform", "DER", "-out", certificatePath,
            ])
            #expect(made.termination == .exited(0))
            // The private key in Apple's format: X9.63 public point then the scalar (from OpenSSL's text form).
            let text = String(decoding: try ChildProcess.run("/usr/bin/openssl", arguments: [
                "ec", "-in", keyPath, "-noout", "-text",
            ]).stdout, as: UTF8.self)
            func hex(after label: String, until next: String) -> Data {
                let start = text.range(of: label)!.upperBound
                let end = text.range(of: next, range: start..<text.endIndex)!.lowerBound
                let digits = text[start..<end].filter(\.isHexDigit)
                return Data(stride(from: 0, to: digits.count, by: 2).map {
                    UInt8(digits[digits.index(digits.startIndex, offsetBy: $0)...].prefix(2), radix: 16)!
                })
            }
            var scalar = hex(after: "priv:", until: "pub:")
            if scalar.count == 33 { scalar = scalar.dropFirst() }
            let point = hex(after: "pub:", until: "ASN1 OID")
            let key = try #require(SecKeyCreateWithData(point + scalar as CFData, [
                kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
            ] as NSDictionary, nil))
            let certificate = try #require(SecCertificateCreateWithData(nil, try Data(contentsOf: URL(fileURLWithPath: certificatePath)) as CFData))
            #expect(SecItemAdd([kSecValueRef as String: key, kSecAttrLabel as String: name] as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemAdd([kSecValueRef as String: certificate] as CFDictionary, nil) == errSecSuccess)

            var found: CFTypeRef?
            let query: [String: Any] = [kSecClass as String: kSecClassIdentity, kSecAttrLabel as String: name,
                                        kSecReturnRef as String: true]
            #expect(SecItemCopyMatching(query as CFDictionary, &found) == errSecSuccess)
            let identity = try #require(found as? SecIdentity)
            var copiedCertificate: SecCertificate?
            var copiedKey: SecKey?
            #expect(SecIdentityCopyCertificate(identity, &copiedCertificate) == errSecSuccess)
            #expect(SecIdentityCopyPrivateKey(identity, &copiedKey) == errSecSuccess)
            #expect(copiedCertificate == certificate)
            let privateKey = try #require(copiedKey)
            let message = Data("client hello".utf8)
            let signature = try #require(SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, message as CFData, nil))
            let certificateKey = try #require(SecCertificateCopyKey(certificate))
            #expect(SecKeyVerifySignature(certificateKey, .ecdsaSignatureMessageX962SHA256, message as CFData, signature, nil))
            var created: SecIdentity?
            #expect(SecIdentityCreateWithCertificate(nil, certificate, &created) == errSecSuccess)
            #expect(created == identity)
            #expect(CFGetTypeID(identity) == SecIdentityGetTypeID())

            #expect(SecItemDelete([kSecClass as String: kSecClassIdentity, kSecAttrLabel as String: name] as CFDictionary) == errSecSuccess)
            #expect(SecItemCopyMatching(query as CFDictionary, &found) == errSecItemNotFound)
            let keyLeft = SecItemCopyMatching([kSecClass as String: kSecClassKey, kSecAttrLabel as String: name] as CFDictionary, nil)
            #expect(keyLeft == errSecItemNotFound)
            #expect(SecIdentityCreateWithCertificate(nil, certificate, &created) == errSecItemNotFound)
        }
    }
}
