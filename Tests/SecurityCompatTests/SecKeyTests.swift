import Crypto
import Foundation
import KeychainInterface
import Security
import Testing

/// SecKey for keys in memory: Apple-style code (JWT signing, key exchange of public keys, RSA OAEP), Apple's
/// external representations, and interoperability with OpenSSL both ways.
@Suite("SecKey: keys in memory")
struct SecKeyTests {
    /// What a JWT library does on Apple platforms: a P-256 key, ES256 over "header.payload", verified by the public
    /// key; a changed message fails with errSecVerifyFailed.
    @Test("ES256 as Apple-style code writes it: sign, verify, a changed message is errSecVerifyFailed")
    func jwtStyleSigning() throws {
        let attributes: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrKeySizeInBits as String: 256,
        ]
        var error: Unmanaged<CFError>?
        guard let privateKey = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
            Issue.record("no key: \(String(describing: error?.takeRetainedValue()))")
            return
        }
        let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
        let message = Data("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiIxMjM0In0".utf8)
        #expect(SecKeyIsAlgorithmSupported(privateKey, .sign, .ecdsaSignatureMessageX962SHA256))
        let signature = try #require(SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256,
                                                           message as CFData, &error) as Data?)
        #expect(SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData,
                                      signature as CFData, &error))
        var changed = message
        changed[0] ^= 1
        var verifyError: Unmanaged<CFError>?
        #expect(!SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, changed as CFData,
                                       signature as CFData, &verifyError))
        #expect(verifyError.map { CFErrorGetCode($0.takeRetainedValue()) } == -67808)
        // A public key cannot sign.
        #expect(!SecKeyIsAlgorithmSupported(publicKey, .sign, .ecdsaSignatureMessageX962SHA256))
        var signError: Unmanaged<CFError>?
        #expect(SecKeyCreateSignature(publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData, &signError) == nil)
        #expect(signError.map { CFErrorGetCode($0.takeRetainedValue()) } == -50)
    }

    @Test("external representations: X9.63 for EC (04‖X‖Y, private 04‖X‖Y‖K), PKCS#1 for RSA; they round-trip",
          arguments: [("73", 256, 65, 97), ("73", 384, 97, 145), ("73", 521, 133, 199), ("42", 2048, 270, 0)])
    func externalRepresentations(type: String, bits: Int, publicSize: Int, privateSize: Int) throws {
        let key = try #require(SecKeyCreateRandomKey(
            [kSecAttrKeyType: type, kSecAttrKeySizeInBits: bits] as NSDictionary, nil))
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let publicBytes = try #require(SecKeyCopyExternalRepresentation(publicKey, nil) as Data?)
        let privateBytes = try #require(SecKeyCopyExternalRepresentation(key, nil) as Data?)
        #expect(publicBytes.count == publicSize)
        if privateSize > 0 {
            #expect(privateBytes.count == privateSize)
            #expect(publicBytes.first == 0x04)
            #expect(privateBytes.prefix(publicSize) == publicBytes)  // the public point, then K
        } else {
            #expect(privateBytes.first == 0x30)  // a DER SEQUENCE (RSAPrivateKey)
        }
        #expect(SecKeyGetBlockSize(key) == (bits + 7) / 8)
        let rebuilt = try #require(SecKeyCreateWithData(privateBytes as CFData, [
            kSecAttrKeyType: type, kSecAttrKeyClass: kSecAttrKeyClassPrivate, kSecAttrKeySizeInBits: bits,
        ] as NSDictionary, nil))
        #expect(rebuilt == key)
        let rebuiltPublic = try #require(SecKeyCreateWithData(publicBytes as CFData, [
            kSecAttrKeyType: type, kSecAttrKeyClass: kSecAttrKeyClassPublic,
        ] as NSDictionary, nil))
        #expect(rebuiltPublic == publicKey)
        #expect(SecKeyCopyPublicKey(rebuilt) == publicKey)
        // The description names the key, never its bytes.
        let hex = privateBytes.suffix(16).map { String(format: "%02x", $0) }.joined()
        #expect(!key.description.lowercased().contains(hex))
        #expect(key.description.contains("PrivateKey"))
    }

    @Test("attributes as Apple's: class, type, size, the application label shared by both halves")
    func attributes() throws {
        let key = try #require(SecKeyCreateRandomKey(
            [kSecAttrKeyType: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits: "256"] as NSDictionary, nil))
        let privateAttributes = try #require(SecKeyCopyAttributes(key) as? [String: Any])
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let publicAttributes = try #require(SecKeyCopyAttributes(publicKey) as? [String: Any])
        #expect(privateAttributes[kSecAttrKeyClass as String] as? String == kSecAttrKeyClassPrivate as String)
        #expect(publicAttributes[kSecAttrKeyClass as String] as? String == kSecAttrKeyClassPublic as String)
        #expect(privateAttributes[kSecAttrKeyType as String] as? String == kSecAttrKeyTypeECSECPrimeRandom as String)
        #expect((privateAttributes[kSecAttrKeySizeInBits as String] as? NSNumber)?.intValue == 256)
        #expect((privateAttributes[kSecAttrCanSign as String] as? NSNumber)?.boolValue == true)
        #expect((publicAttributes[kSecAttrCanVerify as String] as? NSNumber)?.boolValue == true)
        let label = try #require(privateAttributes[kSecAttrApplicationLabel as String] as? Data)
        #expect(label.count == 20)
        #expect(publicAttributes[kSecAttrApplicationLabel as String] as? Data == label)
        #expect(CFGetTypeID(key) == SecKeyGetTypeID())
    }

    @Test("digest and message variants agree; RFC 4754 is r‖s; a digest of the wrong size is errSecParam")
    func digestVariants() throws {
        let key = try #require(SecKeyCreateRandomKey(
            [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 521] as NSDictionary, nil))
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let message = Data("a message".utf8)
        let digest = Data(SHA256.hash(data: message))
        let overDigest = try #require(SecKeyCreateSignature(key, .ecdsaSignatureDigestX962SHA256, digest as CFData, nil))
        #expect(SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData, overDigest, nil))
        let raw = try #require(SecKeyCreateSignature(key, .ecdsaSignatureMessageRFC4754SHA512, message as CFData, nil) as Data?)
        #expect(raw.count == 132)
        #expect(SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageRFC4754SHA512, message as CFData, raw as CFData, nil))
        var error: Unmanaged<CFError>?
        #expect(SecKeyCreateSignature(key, .ecdsaSignatureDigestX962SHA256, message as CFData, &error) == nil)
        #expect(error.map { CFErrorGetCode($0.takeRetainedValue()) } == -50)
    }

    @Test("what swift-crypto cannot run says so: SHA-224, raw RSA, OAEP-SHA512 are unsupported, errSecParam")
    func unsupportedAlgorithms() throws {
        let rsa = try #require(SecKeyCreateRandomKey(
            [kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits: 2048] as NSDictionary, nil))
        #expect(!SecKeyIsAlgorithmSupported(rsa, .sign, .rsaSignatureMessagePKCS1v15SHA224))
        #expect(!SecKeyIsAlgorithmSupported(rsa, .sign, .rsaSignatureRaw))
        #expect(!SecKeyIsAlgorithmSupported(rsa, .decrypt, .rsaEncryptionOAEPSHA512))
        #expect(!SecKeyIsAlgorithmSupported(rsa, .sign, .ecdsaSignatureMessageX962SHA256))
        #expect(SecKeyIsAlgorithmSupported(rsa, .sign, .rsaSignatureMessagePSSSHA256))
        var error: Unmanaged<CFError>?
        #expect(SecKeyCreateSignature(rsa, .rsaSignatureMessagePKCS1v15SHA224, Data([1]) as CFData, &error) == nil)
        let failure = try #require(error?.takeRetainedValue())
        #expect(CFErrorGetCode(failure) == -50)
        #expect("\(failure)".contains("algorithm not supported by the key"))
    }

    @Test("bad parameters: an unknown type or size is errSecParam; the Secure Enclave is errSecUnimplemented")
    func badParameters() {
        func code(_ parameters: NSDictionary) -> Int? {
            var error: Unmanaged<CFError>?
            let key = SecKeyCreateRandomKey(parameters, &error)
            return key == nil ? error.map { CFErrorGetCode($0.takeRetainedValue()) } : 0
        }
        #expect(code([kSecAttrKeyType: "99", kSecAttrKeySizeInBits: 256]) == -50)
        #expect(code([kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 255]) == -50)
        #expect(code([kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits: 1024]) == -50)
        #expect(code([kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
                      kSecAttrTokenID: kSecAttrTokenIDSecureEnclave]) == -4)
        #expect(code([kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom]) == -50)  // no size
        var error: Unmanaged<CFError>?
        #expect(SecKeyCreateWithData(Data([4, 1, 2]) as CFData, [kSecAttrKeyType: kSecAttrKeyTypeEC,
                                                                 kSecAttrKeyClass: kSecAttrKeyClassPublic] as NSDictionary, &error) == nil)
        #expect(error.map { CFErrorGetCode($0.takeRetainedValue()) } == -50)
    }

    /// Ciphertexts that Apple's SecKeyCreateEncryptedData made (published with their keys by jedda/ECIES, whose
    /// Go tests decrypt them; the plaintext is each case's name). SHA-224 cases are left out: not run here.
    @Test("ECIES: ciphertexts made by Apple's Security framework open here", arguments: [
        ("P256-SHA256-VIV", 256, SecKeyAlgorithm.eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
         "MHcCAQEEIHGhxnpu3kG/nW5ozDZJ+TTFQvL6MynCcQWD6jHV4p0UoAoGCCqGSM49AwEHoUQDQgAEzgFYw3Rqc72IIYHV7JH6M245n/nLnxyre1A7sc5nOt31ZyfJQLXGs4dY0cggne28ueXHID5lKz1JNChY49NHYg==",
         "BI6sBCGyf916GQSV3DHOvmFxOmzbV9pq08wcOdKaepP2/Qtepj9M71dYkzXf6OqIstDyyVIxfnAMfUpxZzoCHDbalYRzzwhqHwg7K6RNl1F29PVdLNtJH498yJSfloW/"),
        ("P384-SHA384-VIV", 384, SecKeyAlgorithm.eciesEncryptionCofactorVariableIVX963SHA384AESGCM,
         "MIGkAgEBBDC5Lt6wBRiiEC2O71i3lv8Jtgg+YP4Y3gCj7B7nOtdQO/5PQPRjpFPJ3ft0yjbzHEagBwYFK4EEACKhZANiAAToVnztZKN1KVhot+MoN3CiPDZ0PoCDXrdP1uHQ61nz4XVrNdxgxyNUJC6cd0gsbujme66wxrq28zqWYBKvrFtIlS4W+NkuyCi5nABkHno7alAWv/fD7aQ8A3ZmWZohsaU=",
         "BM45TREbxELfwpTVBmltz+sB3vhkM85m/yiAsE8JSNmXVOeeUGzmxP5Z2jegApPxtOS8ilfhTN/m2XkOoJWGw3MKuekq5V5PcdvAi5xKcoOEynkS7uAKS3nhBH/+g+9/iNoTcRSrEpbgm8dOCGe+VRQ7hK8vI0ZRw74kernlNDw="),
        ("P384-SHA384-0IV", 384, SecKeyAlgorithm.eciesEncryptionCofactorX963SHA384AESGCM,
         "MIGkAgEBBDCveSReIMZa6hbWVgmESfu/jMpEqIldBHcx4nQ46zxJ+hvm4lnesKrn0P0BkFYZ0jSgBwYFK4EEACKhZANiAAT0ctzSPeNUinYOJdYtCafXAsTKHLGY4WPPRM8pYL5x1UrvnPN0G1yiF4QsTX2Pgyvh2qositdwRGxv3ruo1yR8TcztRXugZF4a5xmcZuQW8hcEmPuk+xS5XXUMzryiEQc=",
         "BERkPl0YZUa9r7JV4W6n/rxsGBpzwdCpIgRaOKxRYuLHx3v5hGnTM1oGOEZzJQnpfvtperUyFfnPB5GP5ioxK4YkrqfjIlF0ip18v30o7TWReJ+MrKYWcC7/TGe/SxPagi/zX9uz4N0Jzp3GFarI5LUQ9mJNIna/3ajuBC9Du94="),
        ("P521-SHA512-0IV", 521, SecKeyAlgorithm.eciesEncryptionCofactorX963SHA512AESGCM,
         "MIHcAgEBBEIAqKpwdZ9JdC3JdVpM7gj1Bgkep3LNTkYWqEYqwNe5w7oyzDh1yU0LVZzefyZNdaagU6DGNdZ+5u9cHqnh9GrQ5gWgBwYFK4EEACOhgYkDgYYABAD+MDxfbvbe9ZRZcZgWyDBbpf3JxHii0iScjxNqNWClJWlehHfX8niGE6VNktRQ3lMIwDSvUy3Esiex3gu8RHZnwAGzPjwLm1/w2YbOfp2TCNTL8m6eYUfLU0SNW7B61koL+Sk50yTHoseP7+lmM2t8x6uKsyLdo+XCIevpW8IEh0s5wg==",
         "BABqJoMa89aD0rRkZ+WrmWTeqUfcr3uvLmyk7KlbWPm45m0ptDeqsaxFtqeM0VR6IoBMQcvcCcW+hzlLPr7i15LJlADzKYe7al7Vp10fJBnnhM2K7Z12o/VtOynEEt+ed5IkP9BiopN/3swl79caHQqXxX+SWQijwosMh0rGFJZPjsPFcPpe8Aj9CiJ3y0hRH1D4fp+qtpx9LOBLyuXvRwdFi0Y="),
        ("P521-SHA512-VIV", 521, SecKeyAlgorithm.eciesEncryptionCofactorVariableIVX963SHA512AESGCM,
         "MIHcAgEBBEIAg0dkiDMo6frSBz50hC2luT3T0oMv/nPnu4nUR+x9PWuGic4cBHkrlrUOwyTBfGmug8fYxNy2ytJhBEyCGookSK+gBwYFK4EEACOhgYkDgYYABACAYs51q+pIrE2k92p2ltjs0iBHTe8Kj+w1+x5hfmXS1tX0aR+kabb5qe6Q83Bsvq/dmj3R59XWmIaTz6tJprSr2gDqS2i9wpWspmDND2dYvhKECXj099CQt19V94qYyUjbXMEDkpvq5ZWQ2DBOnR3XnuwWOYj+Pskg0lseKkok4CtJ4A==",
         "BABIki+hjR7WmHUZz03yTelbH+eEwn0Dtpv8Fxwh7cyaue2ZceAytjlbQD2YA3FHC2Z0NMlk/B0C2Es8dZmPE9keEgBsUW0PjT4CyefgFIc2YEm5yDpcbJEKhj6FlGnOir1nJz8ZMTMdiY6vIrRCBLo6+Ek7iSfQIOGrdER3ESnE/gOdWsd4O3VmDQrwLboTIjKfngmBGlC5sdYUzSbQlsX2UUs="),
    ])
    func eciesKnownAnswers(name: String, bits: Int, algorithm: SecKeyAlgorithm, sec1: String, ciphertext: String) throws {
        let der = try #require(Data(base64Encoded: sec1))
        let x963: Data = switch bits {
        case 256: try P256.Signing.PrivateKey(derRepresentation: der).x963Representation
        case 384: try P384.Signing.PrivateKey(derRepresentation: der).x963Representation
        default: try P521.Signing.PrivateKey(derRepresentation: der).x963Representation
        }
        let key = try #require(SecKeyCreateWithData(x963 as CFData, [
            kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
        ] as NSDictionary, nil))
        let sealed = try #require(Data(base64Encoded: ciphertext))
        var error: Unmanaged<CFError>?
        let opened = SecKeyCreateDecryptedData(key, algorithm, sealed as CFData, &error) as Data?
        #expect(opened.map { String(decoding: $0, as: UTF8.self) } == name,
                "\(String(describing: error?.takeRetainedValue()))")
        // One bit changed anywhere (here in the tag) and nothing opens.
        var damaged = sealed
        damaged[damaged.count - 1] ^= 1
        #expect(SecKeyCreateDecryptedData(key, algorithm, damaged as CFData, nil) == nil)
    }

    @Test("ECIES round trip on every curve, standard and variable IV; Apple's layout: point ‖ ciphertext ‖ 16-byte tag",
          arguments: [256, 384, 521])
    func eciesRoundTrip(bits: Int) throws {
        let key = try #require(SecKeyCreateRandomKey(
            [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: bits] as NSDictionary, nil))
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let message = Data("thirty-one bytes of plain text.".utf8)
        for algorithm in [SecKeyAlgorithm.eciesEncryptionStandardX963SHA256AESGCM,
                          .eciesEncryptionCofactorVariableIVX963SHA512AESGCM, .eciesEncryptionCofactorX963SHA1AESGCM] {
            #expect(SecKeyIsAlgorithmSupported(publicKey, .encrypt, algorithm))
            let sealed = try #require(SecKeyCreateEncryptedData(publicKey, algorithm, message as CFData, nil) as Data?)
            let pointSize = 1 + 2 * ((bits + 7) / 8)
            #expect(sealed.count == pointSize + message.count + 16)
            #expect(SecKeyCreateDecryptedData(key, algorithm, sealed as CFData, nil) as Data? == message)
        }
        #expect(!SecKeyIsAlgorithmSupported(publicKey, .decrypt, .eciesEncryptionStandardX963SHA256AESGCM))
        #expect(!SecKeyIsAlgorithmSupported(key, .decrypt, .eciesEncryptionStandardX963SHA224AESGCM))
    }

    @Test("ECDH: both sides agree, raw and through the X9.63 KDF; the KDF needs a requested size")
    func keyExchange() throws {
        let alice = try #require(SecKeyCreateRandomKey(
            [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 384] as NSDictionary, nil))
        let bob = try #require(SecKeyCreateRandomKey(
            [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 384] as NSDictionary, nil))
        let alicePublic = try #require(SecKeyCopyPublicKey(alice))
        let bobPublic = try #require(SecKeyCopyPublicKey(bob))
        let raw1 = try #require(SecKeyCopyKeyExchangeResult(alice, .ecdhKeyExchangeStandard, bobPublic, [:] as NSDictionary, nil) as Data?)
        let raw2 = try #require(SecKeyCopyKeyExchangeResult(bob, .ecdhKeyExchangeCofactor, alicePublic, [:] as NSDictionary, nil) as Data?)
        #expect(raw1 == raw2)
        #expect(raw1.count == 48)
        let parameters: [NSString: Any] = [SecKeyKeyExchangeParameter.requestedSize.rawValue: 32,
                                           SecKeyKeyExchangeParameter.sharedInfo.rawValue: Data("context".utf8)]
        let derived1 = try #require(SecKeyCopyKeyExchangeResult(alice, .ecdhKeyExchangeStandardX963SHA256, bobPublic,
                                                                parameters as NSDictionary, nil) as Data?)
        let derived2 = try #require(SecKeyCopyKeyExchangeResult(bob, .ecdhKeyExchangeStandardX963SHA256, alicePublic,
                                                                parameters as NSDictionary, nil) as Data?)
        #expect(derived1 == derived2)
        #expect(derived1.count == 32)
        #expect(derived1 != raw1.prefix(32))
        var error: Unmanaged<CFError>?
        #expect(SecKeyCopyKeyExchangeResult(alice, .ecdhKeyExchangeStandardX963SHA256, bobPublic, [:] as NSDictionary, &error) == nil)
        #expect(error.map { CFErrorGetCode($0.takeRetainedValue()) } == -50)
    }
}

/// The same keys through OpenSSL, the other implementation every Linux machine has.
@Suite("SecKey and OpenSSL", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")))
struct SecKeyOpenSSLTests {
    let directory: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("seckey-openssl-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    @discardableResult
    func openssl(_ arguments: String..., input: Data = Data()) throws -> Data {
        let output = try ChildProcess.run("/usr/bin/openssl", arguments: arguments, input: input)
        guard output.termination == .exited(0) else {
            throw OpenSSLFailure(arguments: arguments, stderr: String(decoding: output.stderr, as: UTF8.self))
        }
        return output.stdout
    }

    struct OpenSSLFailure: Error { let arguments: [String]; let stderr: String }

    /// SubjectPublicKeyInfo for a P-256 public key in X9.63 form (the fixed DER prefix, then the point).
    func p256SPKI(_ point: Data) -> Data {
        Data([0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86,
              0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00]) + point
    }

    @Test("an ECDSA P-256 signature made here verifies in OpenSSL; one made by OpenSSL verifies here")
    func ecdsaBothWays() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let message = Data("signed both ways".utf8)
        try message.write(to: URL(fileURLWithPath: path("message")))
        // Ours → OpenSSL.
        let key = try #require(SecKeyCreateRandomKey(
            [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256] as NSDictionary, nil))
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let point = try #require(SecKeyCopyExternalRepresentation(publicKey, nil) as Data?)
        try p256SPKI(point).write(to: URL(fileURLWithPath: path("ours.der")))
        let signature = try #require(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message as CFData, nil) as Data?)
        try signature.write(to: URL(fileURLWithPath: path("ours.sig")))
        let verified = try openssl("dgst", "-sha256", "-verify", path("ours.der"), "-keyform", "DER",
                                   "-signature", path("ours.sig"), path("message"))
        #expect(String(decoding: verified, as: UTF8.self).contains("Verified OK"))
        // OpenSSL → ours.
        try openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path("theirs.pem"))
        let spki = try openssl("pkey", "-in", path("theirs.pem"), "-pubout", "-outform", "DER")
        let theirSignature = try openssl("dgst", "-sha256", "-sign", path("theirs.pem"), path("message"))
        let theirKey = try #require(SecKeyCreateWithData(spki.suffix(65) as CFData, [
            kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic,
        ] as NSDictionary, nil))
        #expect(SecKeyVerifySignature(theirKey, .ecdsaSignatureMessageX962SHA256, message as CFData,
                                      theirSignature as CFData, nil))
    }

    @Test("RSA: PSS and PKCS#1 v1.5 signatures and OAEP-SHA256 ciphertexts made here open in OpenSSL, and back")
    func rsaBothWays() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let message = Data("rsa both ways".utf8)
        try message.write(to: URL(fileURLWithPath: path("message")))
        let key = try #require(SecKeyCreateRandomKey(
            [kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits: 2048] as NSDictionary, nil))
        let privateDER = try #require(SecKeyCopyExternalRepresentation(key, nil) as Data?)
        try privateDER.write(to: URL(fileURLWithPath: path("ours.der")))
        try openssl("rsa", "-inform", "DER", "-in", path("ours.der"), "-out", path("ours.pem"))
        try openssl("rsa", "-in", path("ours.pem"), "-pubout", "-out", path("ours.pub"))

        let pss = try #require(SecKeyCreateSignature(key, .rsaSignatureMessagePSSSHA256, message as CFData, nil) as Data?)
        try pss.write(to: URL(fileURLWithPath: path("pss.sig")))
        let pssVerified = try openssl("dgst", "-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32",
                                      "-verify", path("ours.pub"), "-signature", path("pss.sig"), path("message"))
        #expect(String(decoding: pssVerified, as: UTF8.self).contains("Verified OK"))
        let pkcs1 = try #require(SecKeyCreateSignature(key, .rsaSignatureMessagePKCS1v15SHA384, message as CFData, nil) as Data?)
        try pkcs1.write(to: URL(fileURLWithPath: path("pkcs1.sig")))
        let pkcs1Verified = try openssl("dgst", "-sha384", "-verify", path("ours.pub"), "-signature", path("pkcs1.sig"),
                                        path("message"))
        #expect(String(decoding: pkcs1Verified, as: UTF8.self).contains("Verified OK"))

        let secret = Data("a session key, 32 bytes long....".utf8)
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let ciphertext = try #require(SecKeyCreateEncryptedData(publicKey, .rsaEncryptionOAEPSHA256, secret as CFData,
                                                                nil) as Data?)
        #expect(ciphertext.count == 256)
        try ciphertext.write(to: URL(fileURLWithPath: path("oaep.bin")))
        let opened = try openssl("pkeyutl", "-decrypt", "-inkey", path("ours.pem"), "-pkeyopt", "rsa_padding_mode:oaep",
                                 "-pkeyopt", "rsa_oaep_md:sha256", "-pkeyopt", "rsa_mgf1_md:sha256", "-in", path("oaep.bin"))
        #expect(opened == secret)

        // OpenSSL → ours: its PSS signature verifies, its OAEP ciphertext opens.
        let theirPSS = try openssl("dgst", "-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest",
                                   "-sign", path("ours.pem"), path("message"))
        #expect(SecKeyVerifySignature(key, .rsaSignatureMessagePSSSHA256, message as CFData, theirPSS as CFData, nil))
        try secret.write(to: URL(fileURLWithPath: path("secret")))
        let theirCiphertext = try openssl("pkeyutl", "-encrypt", "-pubin", "-inkey", path("ours.pub"),
                                          "-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha256",
                                          "-pkeyopt", "rsa_mgf1_md:sha256", "-in", path("secret"))
        #expect(SecKeyCreateDecryptedData(key, .rsaEncryptionOAEPSHA256, theirCiphertext as CFData, nil) as Data? == secret)
        var error: Unmanaged<CFError>?
        var damaged = theirCiphertext
        damaged[10] ^= 0xff
        #expect(SecKeyCreateDecryptedData(key, .rsaEncryptionOAEPSHA256, damaged as CFData, &error) == nil)
        #expect(error.map { CFErrorGetCode($0.takeRetainedValue()) } == -50)
    }

    @Test("ECDH with OpenSSL: the raw shared secret is the one `openssl pkeyutl -derive` computes")
    func ecdhWithOpenSSL() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = try #require(SecKeyCreateRandomKey(
            [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256] as NSDictionary, nil))
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let point = try #require(SecKeyCopyExternalRepresentation(publicKey, nil) as Data?)
        try p256SPKI(point).write(to: URL(fileURLWithPath: path("ours.der")))
        try openssl("pkey", "-pubin", "-inform", "DER", "-in", path("ours.der"), "-out", path("ours.pem"))
        try openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path("theirs.pem"))
        let spki = try openssl("pkey", "-in", path("theirs.pem"), "-pubout", "-outform", "DER")
        let theirs = try #require(SecKeyCreateWithData(spki.suffix(65) as CFData, [
            kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic,
        ] as NSDictionary, nil))
        let ours = try #require(SecKeyCopyKeyExchangeResult(key, .ecdhKeyExchangeStandard, theirs, [:] as NSDictionary, nil) as Data?)
        let openssls = try openssl("pkeyutl", "-derive", "-inkey", path("theirs.pem"), "-peerkey", path("ours.pem"))
        #expect(ours == openssls)
    }
}
