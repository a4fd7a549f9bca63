#if os(Linux)
import Foundation
import Security
import Testing

extension SecurityCompatSuite {
    /// The Core Foundation calls keychain code makes beside SecItem, written as Apple-style Swift writes them.
    @Suite("Core Foundation calls around SecItem", .serialized)
    struct CoreFoundationTests {
        init() { TestEnvironment.setUp() }

        @Test("a CFError from SecAccessControlCreateWithFlags read with CFErrorGetDomain / GetCode / CopyUserInfo")
        func readingCFError() throws {
            var error: Unmanaged<CFError>?
            let access = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlocked,
                                                         [.userPresence, .or], &error)
            #expect(access == nil)
            let cfError = try #require(error?.takeRetainedValue())
            #expect(CFErrorGetDomain(cfError) as String == kCFErrorDomainOSStatus as String)
            #expect(CFErrorGetCode(cfError) == Int(errSecParam))
            let info = try #require(CFErrorCopyUserInfo(cfError) as? [String: Any])
            #expect(info[kCFErrorLocalizedDescriptionKey as String] is String)
            #expect((CFErrorCopyDescription(cfError) as String).isEmpty == false)
            let made = CFErrorCreate(nil, kCFErrorDomainOSStatus, CFIndex(errSecItemNotFound), nil)
            #expect(CFErrorGetCode(made) == -25300)
            #expect(CFErrorCopyDescription(made) as String
                    == "The operation couldn’t be completed. (NSOSStatusErrorDomain error -25300.)")
        }

        @Test("a wrapper's default service name from kCFBundleIdentifierKey; CFString and CFData built from C")
        func bundleKeyAndBuilders() {
            #expect(kCFBundleIdentifierKey as String == "CFBundleIdentifier")
            let service = (Bundle.main.infoDictionary?[kCFBundleIdentifierKey as String] as? String) ?? "fallback"
            #expect(!service.isEmpty)
            let s = "päss".withCString { CFStringCreateWithCString(kCFAllocatorDefault, $0, CFStringBuiltInEncodings.UTF8.rawValue) }
            #expect(s as String? == "päss")
            #expect(CFStringGetLength(s) == 4)
            let bytes: [UInt8] = [1, 2, 3]
            let data = CFDataCreate(nil, bytes, bytes.count)
            #expect(CFDataGetLength(data) == 3)
            #expect(CFDataGetBytePtr(data)[2] == 3)
            #expect(CFBooleanGetValue(kCFBooleanTrue) && !CFBooleanGetValue(kCFBooleanFalse))
            CFRelease(CFRetain(data))
        }

        @Test("a result walked with CFGetTypeID, CFArrayGetCount, CFArrayGetValueAtIndex and CFDictionaryGetValue")
        func walkingResults() throws {
            let service = "cf-\(UUID().uuidString)"
            for account in ["a", "b"] {
                let add = [kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: account,
                           kSecValueData: Data("pw-\(account)".utf8)] as [CFString: Any]
                #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            }
            defer { _ = SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrService: service] as CFDictionary) }
            var result: CFTypeRef?
            let query = [kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecMatchLimit: kSecMatchLimitAll,
                         kSecReturnAttributes: kCFBooleanTrue!, kSecReturnData: kCFBooleanTrue!] as [CFString: Any]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect(CFGetTypeID(result) == CFArrayGetTypeID())
            let array = try #require(result as? CFArray)
            #expect(CFArrayGetCount(array) == 2)
            var secrets: [String] = []
            for index in 0..<CFArrayGetCount(array) {
                let item = Unmanaged<CFDictionary>.fromOpaque(CFArrayGetValueAtIndex(array, index)).takeUnretainedValue()
                #expect(CFGetTypeID(item) == CFDictionaryGetTypeID())
                let key = Unmanaged.passUnretained(kSecValueData).toOpaque()
                #expect(CFDictionaryContainsKey(item, key))
                let value = Unmanaged<CFData>.fromOpaque(CFDictionaryGetValue(item, key)).takeUnretainedValue()
                secrets.append(String(decoding: value as Data, as: UTF8.self))
            }
            #expect(secrets.sorted() == ["pw-a", "pw-b"])
        }
    }
}
#endif
