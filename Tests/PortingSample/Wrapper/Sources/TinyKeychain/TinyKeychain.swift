import Foundation
import Security  // recipe 1: Linux's Foundation cannot re-export Security, so every file that uses kSec* imports it

/// A wrapper in the usual style: a service name defaulting to the bundle identifier, upsert by delete-then-add,
/// and a removeAll() that takes the macOS branch on Linux (recipe 4).
public struct TinyKeychain {
    public let service: String

    /// Recipe 2: `Bundle.main.bundleIdentifier` is nil on Linux unless an Info.plist sits beside the executable,
    /// so never force-unwrap it.
    public init(service: String? = nil) {
        self.service = service ?? Bundle.main.bundleIdentifier ?? "com.example.tinykeychain"
    }

    private func base(_ key: String? = nil) -> [String: Any] {
        var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service]
        if let key { query[kSecAttrAccount as String] = key }
        return query
    }

    @discardableResult
    public func set(_ value: String, for key: String, accessGroup: String? = nil) -> OSStatus {
        _ = SecItemDelete(base(key) as CFDictionary)
        var add = base(key)
        add[kSecValueData as String] = Data(value.utf8)
        add[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlock
        if let accessGroup { add[kSecAttrAccessGroup as String] = accessGroup }
        return SecItemAdd(add as CFDictionary, nil)
    }

    public func string(for key: String) -> String? {
        var query = base(key)
        query[kSecReturnData as String] = kCFBooleanTrue
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        guard SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess, let data = result as? Data else {
            return nil
        }
        return String(data: data, encoding: .utf8)
    }

    public func allKeys() -> [String] {
        var query = base()
        query[kSecReturnAttributes as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        var result: CFTypeRef?
        guard SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess,
            let items = result as? [[String: Any]]
        else { return [] }
        return items.compactMap { $0[kSecAttrAccount as String] as? String }.sorted()
    }

    @discardableResult
    public func removeAll() -> OSStatus {
        var query = base()
        #if os(iOS) || os(tvOS) || os(watchOS)
        // The data-protection keychain deletes every match and rejects kSecMatchLimit.
        #else
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        #endif
        return SecItemDelete(query as CFDictionary)
    }
}
