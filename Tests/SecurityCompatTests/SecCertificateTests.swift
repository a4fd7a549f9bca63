import Foundation
import KeychainInterface
import Security
import Testing

/// SecCertificate from DER that OpenSSL made, read back as Apple's accessors read it; hostile DER never crashes.
@Suite("SecCertificate", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")))
struct SecCertificateTests {
    let directory: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("seccert-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    @discardableResult
    func openssl(_ arguments: String...) throws -> Data {
        let output = try ChildProcess.run("/usr/bin/openssl", arguments: arguments)
        guard output.termination == .exited(0) else {
            throw Failure(text: String(decoding: output.stderr, as: UTF8.self))
        }
        return output.stdout
    }

    struct Failure: Error { let text: String }

    /// A self-signed certificate: `key` is an `openssl req -newkey` argument (ec or rsa:2048).
    func certificate(subject: String, key: [String], extensions: [String] = []) throws -> Data {
        var arguments = ["req", "-x509", "-nodes", "-days", "1", "-subj", subject, "-keyout", path("key.pem"),
                         "-outform", "DER", "-out", path("cert.der")] + key
        for ext in extensions { arguments += ["-addext", ext] }
        let output = try ChildProcess.run("/usr/bin/openssl", arguments: arguments)
        guard output.termination == .exited(0) else { throw Failure(text: String(decoding: output.stderr, as: UTF8.self)) }
        return try Data(contentsOf: URL(fileURLWithPath: path("cert.der")))
    }

    @Test("subject summary, common name, e-mail addresses, serial number and key of an EC certificate")
    func ecCertificate() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let der = try certificate(subject: "/O=Example Org/CN=First Name/CN=Test Leaf/emailAddress=subject@example.com",
                                  key: ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
                                  extensions: ["subjectAltName=email:alt@example.com,DNS:leaf.example.com"])
        let certificate = try #require(SecCertificateCreateWithData(nil, der as CFData))
        #expect(SecCertificateCopyData(certificate) as Data == der)
        // Every common name, last first (Apple's reverse-order list).
        #expect(SecCertificateCopySubjectSummary(certificate) as String? == "Test Leaf, First Name")
        var commonName: CFString?
        #expect(SecCertificateCopyCommonName(certificate, &commonName) == errSecSuccess)
        #expect(commonName as String? == "Test Leaf")
        var emails: CFArray?
        #expect(SecCertificateCopyEmailAddresses(certificate, &emails) == errSecSuccess)
        #expect(emails as? [String] == ["alt@example.com", "subject@example.com"])
        let serialHex = String(decoding: try openssl("x509", "-inform", "DER", "-in", path("cert.der"), "-noout", "-serial"),
                               as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let serial = try #require(SecCertificateCopySerialNumberData(certificate, nil) as Data?)
        // OpenSSL prints the value; the INTEGER's content may carry one leading zero byte for a high bit.
        let printed = serial.first == 0 && serial.count > 1 ? serial.dropFirst() : serial[...]
        #expect("serial=" + printed.map { String(format: "%02X", $0) }.joined() == serialHex)
        // The key is the one OpenSSL put there.
        let key = try #require(SecCertificateCopyKey(certificate))
        let spki = try openssl("pkey", "-in", path("key.pem"), "-pubout", "-outform", "DER")
        #expect(SecKeyCopyExternalRepresentation(key, nil) as Data? == spki.suffix(65))
        #expect(CFGetTypeID(certificate) == SecCertificateGetTypeID())
    }

    @Test("without a common name: the first e-mail address; without one, the organizational unit over the organization")
    func summaryFallbacks() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let withEmail = try certificate(subject: "/O=Example Org/OU=Unit",
                                        key: ["-newkey", "rsa:2048"], extensions: ["subjectAltName=email:only@example.com"])
        let first = try #require(SecCertificateCreateWithData(nil, withEmail as CFData))
        #expect(SecCertificateCopySubjectSummary(first) as String? == "only@example.com")
        var commonName: CFString?
        #expect(SecCertificateCopyCommonName(first, &commonName) == -26276)  // errSecInternal (SecBasePriv.h)
        let rsaKey = try #require(SecCertificateCopyKey(first))
        #expect(SecKeyGetBlockSize(rsaKey) == 256)

        let organizationOnly = try certificate(subject: "/O=Example Org/OU=Unit/L=Town", key: ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384"])
        let second = try #require(SecCertificateCreateWithData(nil, organizationOnly as CFData))
        #expect(SecCertificateCopySubjectSummary(second) as String? == "Unit")
    }

    @Test("garbage, truncations and byte flips of a certificate give nil or a certificate, never a crash")
    func hostileDER() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(SecCertificateCreateWithData(nil, Data() as CFData) == nil)
        #expect(SecCertificateCreateWithData(nil, Data("not a certificate".utf8) as CFData) == nil)
        #expect(SecCertificateCreateWithData(nil, Data([0x30, 0x80, 0x00, 0x00]) as CFData) == nil)  // BER, not DER
        let der = try certificate(subject: "/CN=Fuzzed", key: ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384"])
        for length in stride(from: 0, to: der.count, by: 7) {
            #expect(SecCertificateCreateWithData(nil, der.prefix(length) as CFData) == nil)
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var damaged = der
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                damaged[Int.random(in: 0..<damaged.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            if let parsed = SecCertificateCreateWithData(nil, damaged as CFData) {
                _ = SecCertificateCopySubjectSummary(parsed)
                _ = SecCertificateCopyKey(parsed)
            }
        }
    }
}
