#if os(Linux)
import Foundation
import Security
import Synchronization
import Testing

let callbackEvents = Mutex<[UInt32]>([])

func recordEvent(_ event: SecKeychainEvent, _ info: UnsafeMutablePointer<SecKeychainCallbackInfo>,
                 _ context: UnsafeMutableRawPointer?) -> OSStatus {
    callbackEvents.withLock { $0.append(event.rawValue) }
    return noErr
}

extension SecurityCompatSuite {
    /// The legacy macOS calls, written as macOS code writes them.
    @Suite("SecKeychain legacy API", .serialized)
    struct SecKeychainTests {
        init() { TestEnvironment.setUp() }

        @Test("create, add, find, lock, unlock, modify, delete, with Apple's statuses")
        func lifecycle() throws {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("legacy-\(UUID().uuidString).keychain").path
            var keychain: SecKeychain?
            let password = "correct horse"
            #expect(SecKeychainCreate(path, UInt32(password.utf8.count), password, false, nil, &keychain) == errSecSuccess)
            let kc = try #require(keychain)
            defer { _ = SecKeychainDelete(kc) }
            var again: SecKeychain?
            #expect(SecKeychainCreate(path, 0, nil, true, nil, &again) == errSecDuplicateKeychain)

            var status: SecKeychainStatus = 0
            #expect(SecKeychainGetStatus(kc, &status) == errSecSuccess)
            #expect(status & kSecUnlockStateStatus != 0)

            let service = "legacy-service", account = "legacy-account", secret = "legacy secret"
            var item: SecKeychainItem?
            #expect(SecKeychainAddGenericPassword(kc, UInt32(service.utf8.count), service, UInt32(account.utf8.count), account,
                                                  UInt32(secret.utf8.count), secret, &item) == errSecSuccess)
            #expect(item != nil)
            #expect(SecKeychainAddGenericPassword(kc, UInt32(service.utf8.count), service, UInt32(account.utf8.count), account,
                                                  1, "x", nil) == errSecDuplicateItem)

            var length: UInt32 = 0
            var data: UnsafeMutableRawPointer?
            var found: SecKeychainItem?
            #expect(SecKeychainFindGenericPassword(kc, UInt32(service.utf8.count), service, 0, nil, &length, &data, &found) == errSecSuccess)
            #expect(String(decoding: UnsafeRawBufferPointer(start: data, count: Int(length)), as: UTF8.self) == secret)
            #expect(SecKeychainItemFreeContent(nil, data) == errSecSuccess)

            #expect(SecKeychainLock(kc) == errSecSuccess)
            #expect(SecKeychainGetStatus(kc, &status) == errSecSuccess)
            #expect(status & kSecUnlockStateStatus == 0)
            #expect(SecKeychainSetUserInteractionAllowed(false) == errSecSuccess)
            var allowed: DarwinBoolean = true
            #expect(SecKeychainGetUserInteractionAllowed(&allowed) == errSecSuccess)
            #expect(!allowed.boolValue)
            #expect(SecKeychainFindGenericPassword(kc, UInt32(service.utf8.count), service, 0, nil, &length, &data, nil) == errSecInteractionNotAllowed)
            #expect(SecKeychainUnlock(kc, 0, nil, false) == errSecInteractionNotAllowed)
            _ = SecKeychainSetUserInteractionAllowed(true)
            #expect(SecKeychainUnlock(kc, 5, "wrong", true) == errSecAuthFailed)
            #expect(SecKeychainUnlock(kc, UInt32(password.utf8.count), password, true) == errSecSuccess)

            let newSecret = "changed"
            let label = "new label"
            let foundItem = try #require(found)
            var labelBytes = Array(label.utf8)
            let modified = labelBytes.withUnsafeMutableBytes { buffer in
                var attribute = SecKeychainAttribute(tag: SecItemAttr.labelItemAttr.rawValue, length: UInt32(buffer.count),
                                                     data: buffer.baseAddress)
                return withUnsafeMutablePointer(to: &attribute) { pointer in
                    var list = SecKeychainAttributeList(count: 1, attr: pointer)
                    return SecKeychainItemModifyAttributesAndData(foundItem, &list, UInt32(newSecret.utf8.count), newSecret)
                }
            }
            #expect(modified == errSecSuccess)
            #expect(SecKeychainFindGenericPassword(kc, 0, nil, UInt32(account.utf8.count), account, &length, &data, nil) == errSecSuccess)
            #expect(String(decoding: UnsafeRawBufferPointer(start: data, count: Int(length)), as: UTF8.self) == newSecret)
            _ = SecKeychainItemFreeContent(nil, data)

            #expect(SecKeychainItemDelete(try #require(found)) == errSecSuccess)
            #expect(SecKeychainItemDelete(try #require(found)) == errSecInvalidItemRef)
            #expect(SecKeychainFindGenericPassword(kc, UInt32(service.utf8.count), service, 0, nil, nil, nil, nil) == errSecItemNotFound)
        }

        @Test("internet passwords: zero port, protocol and authentication type are wildcards")
        func internetPasswords() throws {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("legacy-\(UUID().uuidString).keychain").path
            var keychain: SecKeychain?
            #expect(SecKeychainCreate(path, 2, "pw", false, nil, &keychain) == errSecSuccess)
            let kc = try #require(keychain)
            defer { _ = SecKeychainDelete(kc) }
            let server = "example.com", account = "me"
            #expect(SecKeychainAddInternetPassword(kc, UInt32(server.utf8.count), server, 0, nil, UInt32(account.utf8.count), account,
                                                   0, nil, 443, .HTTPS, .htmlForm, 2, "pw", nil) == errSecSuccess)
            var length: UInt32 = 0
            var data: UnsafeMutableRawPointer?
            #expect(SecKeychainFindInternetPassword(kc, UInt32(server.utf8.count), server, 0, nil, 0, nil, 0, nil, 0, .any, .any,
                                                    &length, &data, nil) == errSecSuccess)
            #expect(length == 2)
            _ = SecKeychainItemFreeContent(nil, data)
            #expect(SecKeychainFindInternetPassword(kc, UInt32(server.utf8.count), server, 0, nil, 0, nil, 0, nil, 80, .any, .any,
                                                    nil, nil, nil) == errSecItemNotFound)
            #expect(SecKeychainFindInternetPassword(kc, UInt32(server.utf8.count), server, 0, nil, 0, nil, 0, nil, 443, .HTTP, .any,
                                                    nil, nil, nil) == errSecItemNotFound)
        }

        @Test("settings, open of a missing keychain, delete of nothing, callbacks")
        func settingsAndCallbacks() throws {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("legacy-\(UUID().uuidString).keychain").path
            var keychain: SecKeychain?
            #expect(SecKeychainCreate(path, 2, "pw", false, nil, &keychain) == errSecSuccess)
            let kc = try #require(keychain)
            var settings = SecKeychainSettings()
            settings.version = SEC_KEYCHAIN_SETTINGS_VERS1
            #expect(SecKeychainCopySettings(kc, &settings) == errSecSuccess)
            #expect(settings.lockInterval == 300)
            #expect(settings.lockOnSleep.boolValue)
            var newSettings = SecKeychainSettings(version: SEC_KEYCHAIN_SETTINGS_VERS1, lockOnSleep: false, useLockInterval: false,
                                                  lockInterval: UInt32(Int32.max))
            #expect(SecKeychainSetSettings(kc, &newSettings) == errSecSuccess)
            #expect(SecKeychainCopySettings(kc, &settings) == errSecSuccess)
            #expect(settings.lockInterval == UInt32(Int32.max))
            #expect(!settings.lockOnSleep.boolValue)

            var missing: SecKeychain?
            #expect(SecKeychainOpen("/nonexistent/dir/none.keychain", &missing) == errSecSuccess)
            var status: SecKeychainStatus = 0
            #expect(SecKeychainGetStatus(missing, &status) == errSecNoSuchKeychain)
            #expect(SecKeychainDelete(nil) == errSecInvalidKeychain)

            callbackEvents.withLock { $0 = [] }
            #expect(SecKeychainAddCallback(recordEvent, [.addEventMask, .deleteEventMask], nil) == errSecSuccess)
            #expect(SecKeychainAddCallback(recordEvent, .everyEventMask, nil) == errSecDuplicateCallback)
            var item: SecKeychainItem?
            #expect(SecKeychainAddGenericPassword(kc, 1, "s", 1, "a", 1, "p", &item) == errSecSuccess)
            #expect(SecKeychainItemDelete(try #require(item)) == errSecSuccess)
            _ = SecKeychainLock(kc)  // not in the mask
            #expect(SecKeychainRemoveCallback(recordEvent) == errSecSuccess)
            #expect(SecKeychainRemoveCallback(recordEvent) == errSecInvalidCallback)
            #expect(callbackEvents.withLock { $0 } == [SecKeychainEvent.addEvent.rawValue, SecKeychainEvent.deleteEvent.rawValue])
            #expect(SecKeychainDelete(kc) == errSecSuccess)
            #expect(!FileManager.default.fileExists(atPath: path + "-db") && !FileManager.default.fileExists(atPath: path))
        }

        @Test("SecRandomCopyBytes fills the buffer")
        func random() {
            var bytes = [UInt8](repeating: 0, count: 64)
            #expect(SecRandomCopyBytes(kSecRandomDefault, bytes.count, &bytes) == errSecSuccess)
            #expect(bytes.contains { $0 != 0 })
        }
    }
}
#endif
