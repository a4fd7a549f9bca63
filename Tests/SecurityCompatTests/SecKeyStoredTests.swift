import Foundation
import Security
import Testing

extension SecurityCompatSuite {
    /// Keys stored in the keychain, as Apple's documentation and common libraries write it: a tagged key pair made
    /// permanent, found again by tag with kSecReturnRef, used to sign; keys that must not leave never do.
    @Suite("SecKey: keys stored in the keychain", .serialized)
    struct SecKeyStoredTests {
        init() { TestEnvironment.setUp() }

        func makeKey(tag: String, privateAttributes extra: [String: Any] = [:]) throws -> SecKey {
            var privateAttributes: [String: Any] = [
                kSecAttrIsPermanent as String: true,
                kSecAttrApplicationTag as String: Data(tag.utf8),
            ]
            privateAttributes.merge(extra) { _, new in new }
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                kSecAttrKeySizeInBits as String: 256,
                kSecPrivateKeyAttrs as String: privateAttributes,
            ]
            var error: Unmanaged<CFError>?
            guard let key = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
                throw error!.takeRetainedValue() as Error
            }
            return key
        }

        func find(tag: String) -> (OSStatus, SecKey?) {
            let query: [String: Any] = [
                kSecClass as String: kSecClassKey,
                kSecAttrApplicationTag as String: Data(tag.utf8),
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                kSecReturnRef as String: true,
            ]
            var item: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &item)
            return (status, item.map { $0 as! SecKey })
        }

        func delete(tag: String) {
            _ = SecItemDelete([kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data(tag.utf8)] as CFDictionary)
        }

        @Test("a permanent key pair, found again by tag with kSecReturnRef, signs; its public key verifies")
        func storeFindSign() throws {
            let tag = "com.example.keys.\(UUID().uuidString)"
            defer { delete(tag: tag) }
            let created = try makeKey(tag: tag)
            let (status, found) = find(tag: tag)
            #expect(status == errSecSuccess)
            let key = try #require(found)
            let message = Data("signed by a stored key".utf8)
            var error: Unmanaged<CFError>?
            let signature = try #require(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message as CFData, &error),
                                         "\(String(describing: error?.takeRetainedValue()))")
            let publicKey = try #require(SecKeyCopyPublicKey(key))
            #expect(SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData, signature, nil))
            #expect(SecKeyCopyPublicKey(created) == publicKey)
            // Apple's derived attributes on the stored item.
            let attributes = try #require(SecKeyCopyAttributes(key) as? [String: Any])
            #expect((attributes[kSecAttrKeyClass as String] as? NSNumber)?.intValue == 1)
            #expect((attributes[kSecAttrKeySizeInBits as String] as? NSNumber)?.intValue == 256)
            #expect(attributes[kSecAttrApplicationTag as String] as? Data == Data(tag.utf8))
            let label = try #require(attributes[kSecAttrApplicationLabel as String] as? Data)
            let publicAttributes = try #require(SecKeyCopyAttributes(publicKey) as? [String: Any])
            #expect(publicAttributes[kSecAttrApplicationLabel as String] as? Data == label)
            // The same pair again: the private key's primary key (label, tag, …) is taken.
            #expect(SecItemAdd([kSecValueRef as String: created] as CFDictionary, nil) == errSecDuplicateItem)
        }

        @Test("a key that is not extractable is used, never read: kSecReturnData and the external representation are errSecKeyIsSensitive")
        func nonExtractable() throws {
            let tag = "com.example.sealed.\(UUID().uuidString)"
            defer { delete(tag: tag) }
            let key = try makeKey(tag: tag, privateAttributes: [kSecAttrIsExtractable as String: false])
            var data: CFTypeRef?
            let query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data(tag.utf8),
                                        kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecReturnData as String: true]
            #expect(SecItemCopyMatching(query as CFDictionary, &data) == errSecKeyIsSensitive)
            #expect(data == nil)
            var error: Unmanaged<CFError>?
            #expect(SecKeyCopyExternalRepresentation(key, &error) == nil)
            #expect(error.map { CFErrorGetCode($0.takeRetainedValue()) } == Int(errSecKeyIsSensitive))
            // It still signs and decrypts where it lives.
            let message = Data("still useful".utf8)
            let signature = try #require(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message as CFData, nil))
            let publicKey = try #require(SecKeyCopyPublicKey(key))
            #expect(SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData, signature, nil))
            let sealed = try #require(SecKeyCreateEncryptedData(publicKey, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
                                                                message as CFData, nil))
            #expect(SecKeyCreateDecryptedData(key, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM, sealed, nil) as Data? == message)
        }

        @Test("SecItemUpdate cannot make a key extractable or insensitive again: errSecParam, and the key stays sealed")
        func protectionOnlyTightens() throws {
            let tag = "com.example.tighten.\(UUID().uuidString)"
            defer { delete(tag: tag) }
            _ = try makeKey(tag: tag, privateAttributes: [kSecAttrIsExtractable as String: false])
            let query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data(tag.utf8),
                                        kSecAttrKeyClass as String: kSecAttrKeyClassPrivate]
            let loosen: [String: Any] = [kSecAttrIsExtractable as String: true, kSecAttrIsSensitive as String: false]
            #expect(SecItemUpdate(query as CFDictionary, loosen as CFDictionary) == errSecParam)
            var data: CFTypeRef?
            var reading = query
            reading[kSecReturnData as String] = true
            #expect(SecItemCopyMatching(reading as CFDictionary, &data) == errSecKeyIsSensitive)
            #expect(data == nil)
            // A label change, or tightening, is fine.
            #expect(SecItemUpdate(query as CFDictionary, [kSecAttrLabel as String: "renamed"] as CFDictionary) == errSecSuccess)

            let sensitiveTag = "com.example.sensitive.\(UUID().uuidString)"
            defer { delete(tag: sensitiveTag) }
            _ = try makeKey(tag: sensitiveTag, privateAttributes: [kSecAttrIsSensitive as String: true])
            let sensitive: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data(sensitiveTag.utf8),
                                            kSecAttrKeyClass as String: kSecAttrKeyClassPrivate]
            #expect(SecItemUpdate(sensitive as CFDictionary, [kSecAttrIsSensitive as String: false] as CFDictionary) == errSecParam)
        }

        @Test("a key stored without a use is refused that use (kSecAttrCanSign, CanDecrypt false): errSecKeyUsageIncorrect")
        func usageEnforced() throws {
            let tag = "com.example.nosign.\(UUID().uuidString)"
            defer { delete(tag: tag) }
            let key = try makeKey(tag: tag, privateAttributes: [kSecAttrCanSign as String: false, kSecAttrCanDecrypt as String: false])
            let message = Data("not for signing".utf8)
            var error: Unmanaged<CFError>?
            #expect(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message as CFData, &error) == nil)
            #expect(error.map { CFErrorGetCode($0.takeRetainedValue()) } == Int(errSecKeyUsageIncorrect))
            let publicKey = try #require(SecKeyCopyPublicKey(key))
            let sealed = try #require(SecKeyCreateEncryptedData(publicKey, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
                                                                message as CFData, nil))
            #expect(SecKeyCreateDecryptedData(key, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM, sealed, nil) == nil)
        }

        @Test("an access control with PrivateKeyUsage: the private bytes never come back, signing works")
        func privateKeyUsage() throws {
            let tag = "com.example.pku.\(UUID().uuidString)"
            defer { delete(tag: tag) }
            let access = try #require(SecAccessControlCreateWithFlags(
                nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .privateKeyUsage, nil))
            let key = try makeKey(tag: tag, privateAttributes: [kSecAttrAccessControl as String: access])
            var data: CFTypeRef?
            let query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data(tag.utf8),
                                        kSecReturnData as String: true]
            #expect(SecItemCopyMatching(query as CFDictionary, &data) == errSecKeyIsSensitive)
            #expect(SecKeyCopyExternalRepresentation(key, nil) == nil)
            var signError: Unmanaged<CFError>?
            #expect(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("x".utf8) as CFData, &signError) != nil,
                    "\(String(describing: signError?.takeRetainedValue()))")
        }

        @Test("an extractable stored key gives its bytes back; a key in memory is stored with kSecValueRef")
        func extractableAndValueRef() throws {
            let tag = "com.example.open.\(UUID().uuidString)"
            defer { delete(tag: tag) }
            let stored = try makeKey(tag: tag)
            let bytes = try #require(SecKeyCopyExternalRepresentation(stored, nil) as Data?)
            #expect(bytes.count == 97)

            let memoryTag = "com.example.memory.\(UUID().uuidString)"
            defer { delete(tag: memoryTag) }
            let inMemory = try #require(SecKeyCreateRandomKey(
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256] as NSDictionary, nil))
            #expect(SecItemAdd([kSecValueRef as String: inMemory, kSecAttrApplicationTag as String: Data(memoryTag.utf8)]
                               as CFDictionary, nil) == errSecSuccess)
            let (status, found) = find(tag: memoryTag)
            #expect(status == errSecSuccess)
            let foundKey = try #require(found)
            #expect(SecKeyCopyPublicKey(foundKey) == SecKeyCopyPublicKey(inMemory))
        }
    }
}
