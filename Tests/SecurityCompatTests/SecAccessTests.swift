import Foundation
import Security
import Testing

extension SecurityCompatSuite {
    /// macOS's legacy trusted-application objects, as Apple-style code passes them to SecItemAdd.
    @Suite("SecAccess and SecTrustedApplication", .serialized)
    struct SecAccessTests {
        @Test("trusted applications from paths (nil: this program) and an access object given to SecItemAdd")
        func accessOnAdd() throws {
            var own: SecTrustedApplication?
            #expect(SecTrustedApplicationCreateFromPath(nil, &own) == errSecSuccess)
            #expect(own?.description.contains("/") == true)
            var env: SecTrustedApplication?
            #expect(SecTrustedApplicationCreateFromPath("/usr/bin/env", &env) == errSecSuccess)
            var missing: SecTrustedApplication?
            #expect(SecTrustedApplicationCreateFromPath("/nonexistent/app", &missing) == errSecParam)
            #expect(missing == nil)

            var access: SecAccess?
            #expect(SecAccessCreate("Example" as CFString, [try #require(own), try #require(env)] as CFArray, &access)
                    == errSecSuccess)
            var onlyMe: SecAccess?
            #expect(SecAccessCreate("Example" as CFString, nil, &onlyMe) == errSecSuccess)
            var bad: SecAccess?
            #expect(SecAccessCreate("Example" as CFString, ["not an application"] as CFArray, &bad) == errSecParam)

            let service = "compat-access-\(UUID().uuidString)"
            let add: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                      kSecAttrAccount as String: "a", kSecValueData as String: Data("x".utf8),
                                      kSecAttrAccess as String: try #require(access)]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            // This process is in the list: it reads its item back.
            var result: CFTypeRef?
            let find: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                       kSecReturnData as String: true]
            #expect(SecItemCopyMatching(find as CFDictionary, &result) == errSecSuccess)
            #expect(result as? Data == Data("x".utf8))
            // kSecAttrAccess belongs to an add only.
            var withAccess = find
            #expect(onlyMe != nil)
            if let onlyMe { withAccess[kSecAttrAccess as String] = onlyMe }
            #expect(SecItemCopyMatching(withAccess as CFDictionary, &result) == errSecParam)
            #expect(SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service]
                                  as CFDictionary) == errSecSuccess)
        }
    }
}
