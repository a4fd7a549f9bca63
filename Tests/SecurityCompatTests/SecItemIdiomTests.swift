#if os(Linux)
import Foundation
import Security
import Testing

extension SecurityCompatSuite {
    /// Apple-style code, written the way iOS apps and wrapper libraries write it, compiled against our `Security`.
    /// Every test uses its own service name: the calls share the process's default keychain.
    @Suite("SecItem in Apple's idioms", .serialized)
    struct SecItemIdiomTests {
        init() { TestEnvironment.setUp() }

        @Test("store, read, update and delete a generic password with [String: Any] and kSec… as String")
        func genericPasswordRoundTrip() throws {
            let service = "compat-\(UUID().uuidString)"
            let account = "alice"
            let addQuery: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service,
                kSecAttrAccount as String: account,
                kSecValueData as String: "s3cret".data(using: .utf8)!,
                kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock,
            ]
            #expect(SecItemAdd(addQuery as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemAdd(addQuery as CFDictionary, nil) == errSecDuplicateItem)

            let readQuery: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service,
                kSecAttrAccount as String: account,
                kSecReturnData as String: true,
                kSecMatchLimit as String: kSecMatchLimitOne,
            ]
            var item: CFTypeRef?
            #expect(SecItemCopyMatching(readQuery as CFDictionary, &item) == errSecSuccess)
            let data = try #require(item as? Data)
            #expect(String(data: data, encoding: .utf8) == "s3cret")

            let match: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service,
                kSecAttrAccount as String: account,
            ]
            let changes: [String: Any] = [kSecValueData as String: Data("changed".utf8)]
            #expect(SecItemUpdate(match as CFDictionary, changes as CFDictionary) == errSecSuccess)
            var again: AnyObject?
            #expect(SecItemCopyMatching(readQuery as CFDictionary, &again) == noErr)
            #expect((again as? Data).flatMap { String(data: $0, encoding: .utf8) } == "changed")

            #expect(SecItemDelete(match as CFDictionary) == errSecSuccess)
            #expect(SecItemCopyMatching(readQuery as CFDictionary, &again) == errSecItemNotFound)
            #expect(SecItemDelete(match as CFDictionary) == errSecItemNotFound)
        }

        @Test("NSString keys are their strings, as on Apple platforms: results read with kSec… keys, NSDictionary equality, mixed keys")
        func nsStringKeys() throws {
            let service = "compat-\(UUID().uuidString)"
            // A query whose keys are the constants themselves (CFString = NSString) beside String keys.
            let add: [AnyHashable: Any] = [
                kSecClass: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount: "alice",
                kSecValueData: Data("s3cret".utf8),
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            defer { _ = SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrService: service] as CFDictionary) }
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecReturnAttributes as String: true, kSecReturnData as String: true,
            ]
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            // Read back with the constants as keys, the way wrapper libraries do.
            let attributes = try #require(result as? [AnyHashable: Any])
            #expect(attributes[kSecAttrAccount] as? String == "alice")
            #expect(attributes[kSecAttrService as String] as? String == service)
            #expect((attributes[kSecValueData] as? Data).map { String(decoding: $0, as: UTF8.self) } == "s3cret")
            let dictionary = try #require(result as? NSDictionary)
            #expect(dictionary[kSecAttrAccount] as? String == "alice")
            // A query compared with itself through NSDictionary, as caching wrappers do.
            #expect(NSDictionary(dictionary: query).isEqual(to: query))
            #expect(AnyHashable(kSecAttrAccount) == AnyHashable("acct"))
            #expect(Set<AnyHashable>([kSecClass, "class"]).count == 1)
        }

        @Test("attributes and data together come back as a dictionary; limit all as an array of dictionaries")
        func resultShapes() throws {
            let service = "compat-\(UUID().uuidString)"
            for account in ["a", "b", "c"] {
                let add: [CFString: Any] = [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: account,
                    kSecAttrLabel: "label \(account)", kSecValueData: Data(account.utf8),
                ]
                #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            }
            var result: CFTypeRef?
            let one: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: "b", kSecReturnAttributes as String: kCFBooleanTrue!,
                kSecReturnData as String: kCFBooleanTrue!,
            ]
            #expect(SecItemCopyMatching(one as CFDictionary, &result) == errSecSuccess)
            let dict = try #require(result as? [String: Any])
            #expect(dict[kSecAttrAccount as String] as? String == "b")
            #expect(dict[kSecAttrLabel as String] as? String == "label b")
            #expect(dict[kSecValueData as String] as? Data == Data("b".utf8))
            #expect(dict[kSecAttrAccessible as String] as? String == kSecAttrAccessibleWhenUnlocked as String)
            #expect(dict[kSecAttrCreationDate as String] is Date)

            let all: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecReturnAttributes as String: true, kSecMatchLimit as String: kSecMatchLimitAll,
            ]
            result = nil
            #expect(SecItemCopyMatching(all as CFDictionary, &result) == errSecSuccess)
            let items = try #require(result as? [[String: Any]])
            #expect(items.compactMap { $0[kSecAttrAccount as String] as? String }.sorted() == ["a", "b", "c"])

            let deleteAll: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service]
            #expect(SecItemDelete(deleteAll as CFDictionary) == errSecSuccess)
        }

        @Test("Foundation idioms on results: implicitly unwrapped keys, NSDictionary equality, NSString values")
        func foundationQuirks() throws {
            let service = "compat-\(UUID().uuidString)"
            let add: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                      kSecAttrAccount as String: "iuo", kSecValueData as String: Data("v".utf8)]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            var result: AnyObject?
            let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                        kSecReturnAttributes as String: true, kSecReturnData as String: true]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            let nsDictionary = try #require(result as? NSDictionary)
            let accountKey: String! = kSecAttrAccount as String
            #expect(nsDictionary[accountKey as Any] as? String == "iuo")
            #expect((result as? [String: Any])?[accountKey] as? String == "iuo")
            #expect(nsDictionary[kSecAttrAccount] as? NSString == "iuo")
            let subset = NSDictionary(dictionary: [kSecAttrAccount as String: "iuo", kSecValueData as String: Data("v".utf8)])
            let picked = NSDictionary(dictionary: [kSecAttrAccount as String: nsDictionary[kSecAttrAccount as String]!,
                                                   kSecValueData as String: nsDictionary[kSecValueData as String]!])
            #expect(picked.isEqual(subset))
            #expect(picked == subset)
            #expect(SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service] as CFDictionary) == errSecSuccess)
        }

        @Test("a wrapper's removeAll(): SecItemDelete with kSecMatchLimitAll deletes every match, as on macOS")
        func removeAllWithMatchLimit() {
            let service = "compat-\(UUID().uuidString)"
            for account in ["a", "b", "c"] {
                let add: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                          kSecAttrAccount as String: account, kSecValueData as String: Data("x".utf8)]
                #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            }
            let removeAll: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                            kSecMatchLimit as String: kSecMatchLimitAll]
            #expect(SecItemDelete(removeAll as CFDictionary) == errSecSuccess)
            var result: CFTypeRef?
            let find: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service]
            #expect(SecItemCopyMatching(find as CFDictionary, &result) == errSecItemNotFound)
            #expect(SecItemDelete(removeAll as CFDictionary) == errSecItemNotFound)
        }

        @Test("an update with the dictionary the item was read with (limit One, return data) updates it, as on macOS")
        func updateWithReadQuery() {
            let service = "compat-\(UUID().uuidString)"
            let add: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                      kSecAttrAccount as String: "a", kSecValueData as String: Data("old".utf8)]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            let read: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                       kSecAttrAccount as String: "a", kSecMatchLimit as String: kSecMatchLimitOne,
                                       kSecReturnData as String: true]
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(read as CFDictionary, &result) == errSecSuccess)
            #expect(SecItemUpdate(read as CFDictionary, [kSecValueData as String: Data("new".utf8)] as CFDictionary)
                    == errSecSuccess)
            #expect(SecItemCopyMatching(read as CFDictionary, &result) == errSecSuccess)
            #expect(result as? Data == Data("new".utf8))
            #expect(SecItemDelete(read as CFDictionary) == errSecSuccess)
        }

        @Test("Apple's status codes for bad input")
        func badInput() {
            var result: CFTypeRef?
            #expect(SecItemCopyMatching([kSecAttrAccount as String: "x"] as CFDictionary, &result) == errSecParam)
            #expect(SecItemCopyMatching([kSecClass as String: "bogus"] as CFDictionary, &result) == errSecNoSuchClass)
            let wrongAttribute: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrServer as String: "x"]
            #expect(SecItemCopyMatching(wrongAttribute as CFDictionary, &result) == errSecNoSuchAttr)
            let updateClass: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "x"]
            #expect(SecItemUpdate(updateClass as CFDictionary, [kSecClass as String: kSecClassInternetPassword] as CFDictionary)
                    == errSecNoSuchAttr)
            let otherGroup: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccessGroup as String: "not-mine"]
            #expect(SecItemAdd(otherGroup as CFDictionary, nil) == errSecMissingEntitlement)
        }

        @Test("SecAccessControlCreateWithFlags accepts Apple's combinations and rejects the rest with errSecParam")
        func accessControl() throws {
            var error: Unmanaged<CFError>?
            let ok = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.biometryAny, .or, .devicePasscode], &error)
            #expect(ok != nil)
            #expect(CFGetTypeID(ok) == SecAccessControlGetTypeID())
            let bad = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.userPresence, .or], &error)
            #expect(bad == nil)
            let nsError = try #require(error?.takeRetainedValue()) as Error as NSError
            #expect(nsError.code == Int(errSecParam))
            let access = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleAfterFirstUnlock, [], nil))
            let both: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "x",
                kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock, kSecAttrAccessControl as String: access,
            ]
            #expect(SecItemAdd(both as CFDictionary, nil) == errSecParam)
        }

        @Test("SecCopyErrorMessageString gives Apple's text")
        func messages() {
            #expect(SecCopyErrorMessageString(errSecItemNotFound, nil) as String? == "The specified item could not be found in the keychain.")
            #expect(SecCopyErrorMessageString(errSecDuplicateItem, nil) as String? == "The specified item already exists in the keychain.")
            #expect(SecCopyErrorMessageString(-1234567, nil) as String? == "OSStatus -1234567")
        }

        @Test("internet passwords with protocol and port constants")
        func internetPassword() throws {
            let server = "compat-\(UUID().uuidString).example.com"
            let add: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: server,
                kSecAttrProtocol as String: kSecAttrProtocolHTTPS, kSecAttrPort as String: 443,
                kSecAttrAccount as String: "bob", kSecAttrAuthenticationType as String: kSecAttrAuthenticationTypeHTMLForm,
                kSecValueData as String: Data("pw".utf8),
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            var result: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: server,
                kSecReturnAttributes as String: true, kSecReturnData as String: true,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            let dict = try #require(result as? NSDictionary)
            #expect(dict[kSecAttrProtocol as String] as? String == "htps")
            #expect((dict[kSecAttrPort as String] as? NSNumber)?.intValue == 443)
            #expect(SecItemDelete([kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: server] as CFDictionary) == errSecSuccess)
        }
    }
}

/// Points the process's default keychain at a private temporary home before the first call.
enum TestEnvironment {
    static let once: Void = {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("security-compat-\(UUID().uuidString)")
        setenv("XDG_DATA_HOME", root.appendingPathComponent("data").path, 1)
        setenv("XDG_STATE_HOME", root.appendingPathComponent("state").path, 1)
        setenv("XDG_CONFIG_HOME", root.appendingPathComponent("config").path, 1)
        setenv("KEYCHAIN_APPLICATION_IDENTIFIER", "com.example.compat-tests", 1)
        // The compat layer in-process (the end-to-end suites cover it through keychaind); the default, auto, would
        // start a keychaind beside the test runner for this temporary home.
        setenv("KEYCHAIN_BACKEND", "embedded", 1)
    }()
    static func setUp() { _ = once }
}
#endif
