#if os(Linux)
import Foundation
import KeychainCore
import LocalAuthentication
import Security
import Testing

extension SecurityCompatSuite {
    /// LocalAuthentication with the Security calls, in Apple's idioms.
    @Suite("LocalAuthentication", .serialized)
    struct LocalAuthenticationTests {
        init() { TestEnvironment.setUp() }

        @Test("no sensor and no passcode: canEvaluatePolicy says why, with Apple's codes")
        func policies() {
            let context = LAContext(prompter: nil)
            var error: NSError?
            #expect(!context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
            #expect(error?.code == LAError.Code.biometryNotAvailable.rawValue)
            #expect(error?.domain == LAErrorDomain)
            #expect(context.biometryType == .none)
            // The test keychain was created without a password: no passcode is set.
            #expect(!context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
            #expect(error?.code == LAError.Code.passcodeNotSet.rawValue)
            context.touchIDAuthenticationAllowableReuseDuration = 3600
            #expect(context.touchIDAuthenticationAllowableReuseDuration == LATouchIDAuthenticationMaximumAllowableReuseDuration)
        }

        @Test("an application password set on the context protects and opens an item")
        func applicationPassword() throws {
            let service = "la-\(UUID().uuidString)"
            let context = LAContext(prompter: nil)
            #expect(context.setCredential(Data("app secret".utf8), type: .applicationPassword))
            #expect(context.isCredentialSet(.applicationPassword))
            var error: Unmanaged<CFError>?
            let access = try #require(SecAccessControlCreateWithFlags(
                kCFAllocatorDefault, kSecAttrAccessibleWhenUnlocked, .applicationPassword, &error))
            let add: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: "a", kSecValueData as String: Data("guarded".utf8),
                kSecAttrAccessControl as String: access, kSecUseAuthenticationContext as String: context,
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)

            var result: CFTypeRef?
            var query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecReturnData as String: true, kSecUseAuthenticationContext as String: context,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect((result as? Data).map { String(decoding: $0, as: UTF8.self) } == "guarded")

            let other = LAContext(prompter: nil)
            other.setCredential(Data("wrong".utf8), type: .applicationPassword)
            query[kSecUseAuthenticationContext as String] = other
            query[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUIFail
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecInteractionNotAllowed)
            query.removeValue(forKey: kSecUseAuthenticationContext as String)
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecInteractionNotAllowed)

            context.invalidate()
            #expect(!context.isCredentialSet(.applicationPassword))
            #expect(SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service] as CFDictionary) == errSecSuccess)
        }

        @Test("user presence on a keychain without a passcode cannot be satisfied: errSecAuthFailed")
        func userPresenceWithoutPasscode() throws {
            let service = "la-\(UUID().uuidString)"
            let access = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleAfterFirstUnlock, .userPresence, nil))
            let add: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecValueData as String: Data("x".utf8), kSecAttrAccessControl as String: access,
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            var result: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecReturnData as String: true,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecAuthFailed)
            let skip: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecReturnAttributes as String: true, kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip,
            ]
            #expect(SecItemCopyMatching(skip as CFDictionary, &result) == errSecItemNotFound)
            #expect(SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service] as CFDictionary) == errSecSuccess)
        }
    }
}
#endif
