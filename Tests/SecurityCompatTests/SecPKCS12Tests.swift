import Foundation
import KeychainInterface
import KeychainTestSupport
import Security
import Testing

extension SecurityCompatSuite {
    /// SecPKCS12Import on what `openssl pkcs12 -export` writes (OpenSSL 3's PBES2/AES-256 default and `-legacy`'s
    /// 3DES and RC2-40), the identity added back with kSecValueRef, and the PKCS#12 export read by OpenSSL.
    @Suite("SecPKCS12", .serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")))
    struct SecPKCS12Tests {
        let directory: URL
        init() throws {
            TestEnvironment.setUp()
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("p12-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }

        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

        struct Failure: Error { let text: String }

        @discardableResult
        func openssl(_ arguments: [String]) throws -> Data {
            let output = try ChildProcess.run("/usr/bin/openssl", arguments: arguments)
            guard output.termination == .exited(0) else {
                throw Failure(text: String(decoding: output.stderr, as: UTF8.self))
            }
            return output.stdout
        }

        /// A key, a self-signed certificate and a .p12 of both; `key` is an `openssl req -newkey` argument.
        func makeP12(name: String, key: [String], extra: [String] = [], passphrase: String = "s3cret")
            throws -> (p12: Data, certificate: Data)
        {
            try openssl(["req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=\(name)", "-keyout", path("key.pem"),
                         "-out", path("cert.pem")] + key)
            try openssl(["pkcs12", "-export", "-inkey", path("key.pem"), "-in", path("cert.pem"), "-name", name,
                         "-passout", "pass:\(passphrase)", "-out", path("id.p12")] + extra)
            let der = try openssl(["x509", "-in", path("cert.pem"), "-outform", "DER"])
            return (try Data(contentsOf: URL(fileURLWithPath: path("id.p12"))), der)
        }

        func importP12(_ data: Data, passphrase: String, memoryOnly: Bool = true) -> (OSStatus, [NSDictionary]) {
            var items: CFArray?
            let options: [String: Any] = [kSecImportExportPassphrase as String: passphrase,
                                          kSecImportToMemoryOnly as String: memoryOnly]
            let status = SecPKCS12Import(data as CFData, options as CFDictionary, &items)
            return (status, (items as? [NSDictionary]) ?? [])
        }

        func signsLikeItsCertificate(_ identity: SecIdentity, algorithm: SecKeyAlgorithm) throws {
            var certificate: SecCertificate?
            var key: SecKey?
            #expect(SecIdentityCopyCertificate(identity, &certificate) == errSecSuccess)
            #expect(SecIdentityCopyPrivateKey(identity, &key) == errSecSuccess)
            let leaf = try #require(certificate)
            let privateKey = try #require(key)
            let publicKey = try #require(SecCertificateCopyKey(leaf))
            let message = Data("pkcs12".utf8) as CFData
            let signature = try #require(SecKeyCreateSignature(privateKey, algorithm, message, nil))
            #expect(SecKeyVerifySignature(publicKey, algorithm, message, signature, nil))
        }

        @Test("OpenSSL 3's default .p12 (PBES2, AES-256-CBC, SHA-256 MAC): identity, chain, label, key id")
        func defaultFormat() throws {
            defer { try? FileManager.default.removeItem(at: directory) }
            let (p12, der) = try makeP12(name: "P12 Default", key: ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
            let (status, items) = importP12(p12, passphrase: "s3cret")
            #expect(status == errSecSuccess)
            #expect(items.count == 1)
            let entry = try #require(items.first)
            #expect(entry[kSecImportItemLabel as String] as? String == "P12 Default")
            #expect((entry[kSecImportItemKeyID as String] as? Data)?.isEmpty == false)
            let chain = try #require(entry[kSecImportItemCertChain as String] as? [SecCertificate])
            #expect(chain.map { SecCertificateCopyData($0) as Data } == [der])
            let identity = try #require(entry[kSecImportItemIdentity as String] as? SecIdentity)
            try signsLikeItsCertificate(identity, algorithm: .ecdsaSignatureMessageX962SHA256)
        }

        @Test("-legacy .p12 (key under 3DES, certificate under RC2-40, SHA-1 MAC) with an RSA key")
        func legacyFormat() throws {
            defer { try? FileManager.default.removeItem(at: directory) }
            let (p12, der) = try makeP12(name: "P12 Legacy", key: ["-newkey", "rsa:2048"], extra: ["-legacy"])
            let (status, items) = importP12(p12, passphrase: "s3cret")
            #expect(status == errSecSuccess)
            let entry = try #require(items.first)
            let chain = try #require(entry[kSecImportItemCertChain as String] as? [SecCertificate])
            #expect(chain.map { SecCertificateCopyData($0) as Data } == [der])
            let identity = try #require(entry[kSecImportItemIdentity as String] as? SecIdentity)
            try signsLikeItsCertificate(identity, algorithm: .rsaSignatureMessagePKCS1v15SHA256)
        }

        @Test("a wrong passphrase is errSecAuthFailed, garbage errSecDecode, and neither stores anything")
        func refusals() throws {
            defer { try? FileManager.default.removeItem(at: directory) }
            let (p12, _) = try makeP12(name: "P12 Refusals", key: ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
            #expect(importP12(p12, passphrase: "wrong", memoryOnly: false).0 == errSecAuthFailed)
            #expect(importP12(Data("not a p12".utf8), passphrase: "s3cret").0 == errSecDecode)
            var truncated = p12
            truncated.removeLast(40)
            #expect(importP12(truncated, passphrase: "s3cret").0 == errSecDecode)
            let query: [String: Any] = [kSecClass as String: kSecClassCertificate, kSecAttrLabel as String: "P12 Refusals"]
            #expect(SecItemCopyMatching(query as CFDictionary, nil) == errSecItemNotFound)
        }

        @Test("hostile .p12 bytes (every truncation point, 400 seeded byte flips): an error status, never a crash")
        func hostileBytes() throws {
            defer { try? FileManager.default.removeItem(at: directory) }
            let (p12, _) = try makeP12(name: "P12 Hostile", key: ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
                                       extra: ["-legacy"])
            for length in stride(from: 0, to: p12.count, by: 7) {
                #expect(importP12(p12.prefix(length), passphrase: "s3cret").0 != errSecSuccess)
            }
            var generator = SplitMix64(seed: 0x9e37)
            for _ in 0..<400 {
                var mutated = p12
                let index = Int(generator.next() % UInt64(mutated.count))
                mutated[index] ^= UInt8(truncatingIfNeeded: generator.next() | 1)
                let status = importP12(mutated, passphrase: "s3cret").0
                #expect([errSecSuccess, errSecAuthFailed, errSecDecode].contains(status))
            }
        }

        @Test("an empty passphrase opens a .p12 exported with an empty one")
        func emptyPassphrase() throws {
            defer { try? FileManager.default.removeItem(at: directory) }
            let (p12, _) = try makeP12(name: "P12 Empty", key: ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384"],
                                       passphrase: "")
            let (status, items) = importP12(p12, passphrase: "")
            #expect(status == errSecSuccess)
            #expect(items.count == 1)
        }

        @Test("imported into the keychain: found as an identity, imported twice without error, the key stored as a reference")
        func importIntoKeychain() throws {
            defer { try? FileManager.default.removeItem(at: directory) }
            let name = "P12 Stored \(UUID().uuidString.prefix(6))"
            let (p12, _) = try makeP12(name: name, key: ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
            let (status, items) = importP12(p12, passphrase: "s3cret", memoryOnly: false)
            #expect(status == errSecSuccess)
            #expect(items.first?[kSecImportItemLabel as String] as? String == name)
            #expect(importP12(p12, passphrase: "s3cret", memoryOnly: false).0 == errSecSuccess)
            var found: CFTypeRef?
            let query: [String: Any] = [kSecClass as String: kSecClassIdentity, kSecAttrLabel as String: name,
                                        kSecReturnRef as String: true, kSecMatchLimit as String: kSecMatchLimitAll]
            #expect(SecItemCopyMatching(query as CFDictionary, &found) == errSecSuccess)
            let identities = try #require(found as? [SecIdentity])
            #expect(identities.count == 1)
            let first = try #require(identities.first)
            try signsLikeItsCertificate(first, algorithm: .ecdsaSignatureMessageX962SHA256)
            #expect(SecItemDelete([kSecClass as String: kSecClassIdentity, kSecAttrLabel as String: name] as CFDictionary)
                == errSecSuccess)
        }

        @Test("an identity from memory added with kSecValueRef is found as kSecClassIdentity; twice is a duplicate")
        func addIdentity() throws {
            defer { try? FileManager.default.removeItem(at: directory) }
            let name = "P12 Added \(UUID().uuidString.prefix(6))"
            let (p12, _) = try makeP12(name: name, key: ["-newkey", "rsa:2048"])
            let identity = try #require(importP12(p12, passphrase: "s3cret").1.first?[kSecImportItemIdentity as String]
                as? SecIdentity)
            let add: [String: Any] = [kSecValueRef as String: identity, kSecAttrLabel as String: name]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecDuplicateItem)
            var found: CFTypeRef?
            let query: [String: Any] = [kSecClass as String: kSecClassIdentity, kSecAttrLabel as String: name,
                                        kSecReturnRef as String: true]
            #expect(SecItemCopyMatching(query as CFDictionary, &found) == errSecSuccess)
            let added = try #require(found as? SecIdentity)
            try signsLikeItsCertificate(added, algorithm: .rsaSignatureMessagePKCS1v15SHA256)
            #expect(SecItemDelete([kSecClass as String: kSecClassIdentity, kSecAttrLabel as String: name] as CFDictionary)
                == errSecSuccess)
        }
    }
}

