#if os(Linux)
import Foundation
import Security
import Testing

extension SecurityCompatSuite {
    /// The conformance vectors of semantics §10 through `SecItem*`, in one private access group per run so the
    /// shared default keychain holds nothing else that matches (the process's groups are its application identifier).
    @Suite("Semantics §10 through SecItem", .serialized)
    struct ConformanceThroughSecItemTests {
        init() { TestEnvironment.setUp() }

        @Test("vectors 1–27")
        func vectors() throws {
            let s = "vectors-\(UUID().uuidString)"
            func q(_ extra: [String: Any]) -> CFDictionary {
                var d: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: s]
                for (k, v) in extra { d[k] = v }
                return d as CFDictionary
            }
            var result: CFTypeRef?
            // 1, 2, 3, 4
            #expect(SecItemAdd(q([kSecAttrAccount as String: "a", kSecValueData as String: Data("p".utf8)]), nil) == errSecSuccess)
            #expect(SecItemAdd(q([kSecAttrAccount as String: "a", kSecValueData as String: Data("p".utf8)]), nil) == errSecDuplicateItem)
            #expect(SecItemAdd(q([kSecAttrAccount as String: "a", kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock]), nil) == errSecDuplicateItem)
            #expect(SecItemAdd(q([kSecAttrAccount as String: "a", kSecAttrSynchronizable as String: true]), nil) == errSecSuccess)
            // 1: stored defaults
            #expect(SecItemCopyMatching(q([kSecAttrAccount as String: "a", kSecReturnAttributes as String: true]), &result) == errSecSuccess)
            let attributes = try #require(result as? [String: Any])
            #expect(attributes[kSecAttrAccessGroup as String] as? String == "com.example.compat-tests")
            #expect(attributes[kSecAttrAccessible as String] as? String == "ak")
            #expect((attributes[kSecAttrSynchronizable as String] as? NSNumber)?.intValue == 0)
            // 5: no return keys, result untouched
            result = nil
            #expect(SecItemCopyMatching(q([kSecAttrAccount as String: "a"]), &result) == errSecSuccess)
            #expect(result == nil)
            // 6, 7
            #expect(SecItemCopyMatching(q([kSecAttrAccount as String: "a", kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitAll]), &result) == errSecSuccess)
            #expect((result as? [Data])?.count == 1)
            #expect(SecItemCopyMatching(q([kSecAttrAccount as String: "a", kSecAttrSynchronizable as String: kSecAttrSynchronizableAny, kSecReturnAttributes as String: true, kSecMatchLimit as String: kSecMatchLimitAll]), &result) == errSecSuccess)
            #expect((result as? [[String: Any]])?.count == 2)
            // 8
            #expect(SecItemCopyMatching(q([kSecAttrAccount as String: "A"]), &result) == errSecItemNotFound)
            #expect(SecItemCopyMatching(q([kSecAttrAccount as String: "A", kSecMatchCaseInsensitive as String: true]), &result) == errSecItemNotFound)
            // 9, 10
            #expect(SecItemAdd(q([:]), nil) == errSecSuccess)
            #expect(SecItemAdd(q([kSecAttrAccount as String: ""]), nil) == errSecDuplicateItem)
            let dataService: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: Data(s.utf8), kSecAttrAccount as String: "a"]
            #expect(SecItemAdd(dataService as CFDictionary, nil) == errSecDuplicateItem)
            // 11, 12
            #expect(SecItemCopyMatching(q([kSecAttrServer as String: "x"]), &result) == errSecNoSuchAttr)
            #expect(SecItemCopyMatching([kSecAttrAccount as String: "a"] as CFDictionary, &result) == errSecParam)
            #expect(SecItemCopyMatching([kSecClass as String: "bogus"] as CFDictionary, &result) == errSecNoSuchClass)
            // 13, 14, 15
            let newData = [kSecValueData as String: Data("q".utf8)] as CFDictionary
            // macOS strips return and match keys from an update query and updates every match (iOS: errSecParam)
            #expect(SecItemUpdate(q([kSecAttrAccount as String: "a", kSecReturnData as String: true]), newData) == errSecSuccess)
            #expect(SecItemUpdate(q([kSecAttrAccount as String: "a", kSecMatchLimit as String: kSecMatchLimitOne]), newData) == errSecSuccess)
            #expect(SecItemUpdate(q([kSecAttrAccount as String: "a"]), [kSecClass as String: kSecClassGenericPassword] as CFDictionary) == errSecNoSuchAttr)
            // 16
            #expect(SecItemUpdate(q([kSecAttrAccount as String: "a"]), newData) == errSecSuccess)
            #expect(SecItemCopyMatching(q([kSecAttrAccount as String: "a", kSecReturnData as String: true]), &result) == errSecSuccess)
            #expect(result as? Data == Data("q".utf8))
            // 17, 18
            #expect(SecItemAdd(q([kSecAttrAccount as String: "b"]), nil) == errSecSuccess)
            #expect(SecItemUpdate(q([kSecAttrAccount as String: "b"]), [kSecAttrAccount as String: "a"] as CFDictionary) == errSecDuplicateItem)
            #expect(SecItemUpdate(q([kSecAttrAccount as String: "zzz"]), newData) == errSecItemNotFound)
            // 19, 20
            // macOS deletes every match with kSecMatchLimitAll (iOS: errSecParam); see docs/COMPATIBILITY.md
            #expect(SecItemDelete(q([kSecMatchLimit as String: kSecMatchLimitAll])) == errSecSuccess)
            #expect(SecItemDelete(q([:])) == errSecItemNotFound)
            #expect(SecItemCopyMatching(q([kSecAttrSynchronizable as String: true]), &result) == errSecSuccess)
            // 21, 22, 23, 24
            #expect(SecItemAdd(q([kSecAttrAccount as String: "c", kSecAttrAccessGroup as String: "G9"]), nil) == errSecMissingEntitlement)
            let ac = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [], nil))
            #expect(SecItemAdd(q([kSecAttrAccount as String: "c", kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlocked, kSecAttrAccessControl as String: ac]), nil) == errSecParam)
            #expect(SecItemAdd(q([kSecAttrAccount as String: "c", kSecAttrAccessControl as String: ac, kSecAttrSynchronizable as String: true]), nil) == errSecParam)
            var error: Unmanaged<CFError>?
            #expect(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.userPresence, .or], &error) == nil)
            // 25
            #expect(SecItemCopyMatching(q([kSecAttrSynchronizable as String: true, kSecReturnPersistentRef as String: true]), &result) == errSecSuccess)
            let ref = try #require(result as? Data)
            let withAttribute: [String: Any] = [kSecValuePersistentRef as String: ref, kSecAttrAccount as String: "a"]
            #expect(SecItemCopyMatching(withAttribute as CFDictionary, &result) == errSecParam)
            #expect(SecItemCopyMatching([kSecValuePersistentRef as String: ref, kSecReturnAttributes as String: true] as CFDictionary, &result) == errSecSuccess)
            // 26
            for n in 0..<3 { #expect(SecItemAdd(q([kSecAttrAccount as String: "n\(n)"]), nil) == errSecSuccess) }
            #expect(SecItemCopyMatching(q([kSecMatchLimit as String: 2, kSecReturnAttributes as String: true]), &result) == errSecSuccess)
            #expect((result as? [[String: Any]])?.count == 2)
            // 27
            let skip = [kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip]
            #expect(SecItemAdd(q(skip.merging([kSecAttrAccount as String: "x"]) { a, _ in a }), nil) == errSecParam)
            #expect(SecItemUpdate(q(skip), [kSecAttrLabel as String: "l"] as CFDictionary) == errSecParam)
            #expect(SecItemDelete(q(skip)) == errSecParam)
            _ = SecItemDelete(q([kSecAttrSynchronizable as String: kSecAttrSynchronizableAny]))
        }
    }
}
#endif
