#if os(Linux)
import Foundation
import Security
import Testing

extension SecurityCompatSuite {
    /// The Apple-style program of `MigrationTests.readBackThroughSecurity`: that test runs this test binary again,
    /// as a program of its own, with KEYCHAIN_IMPORT_PROBE naming a JSON file of the items it moved in, and the
    /// environment of its home (keychaind's, where the user is asked). Off in every other run.
    @Suite("Probe: items another program moved in, read through SecItem (run by the moving-in tests only)",
           .enabled(if: ProcessInfo.processInfo.environment["KEYCHAIN_IMPORT_PROBE"] != nil))
    struct ImportedItemsProbe {
        /// Each expected item: `match` (a query in Apple's raw keys: class, svce or srvr, acct), `attributes` (what
        /// the result must hold, strings or numbers) and `secret_hex`.
        @Test("every item found by its class and attributes through SecItemCopyMatching, with its secret")
        func readBack() throws {
            let path = try #require(ProcessInfo.processInfo.environment["KEYCHAIN_IMPORT_PROBE"])
            let expected = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
                                        as? [[String: Any]])
            for item in expected {
                var query = try #require(item["match"] as? [String: Any])
                query[kSecReturnAttributes as String] = true
                query[kSecReturnData as String] = true
                var result: CFTypeRef?
                let status = SecItemCopyMatching(query as CFDictionary, &result)
                #expect(status == errSecSuccess, "\(item["match"] ?? "")")
                let found = result as? [String: Any] ?? [:]
                for (key, value) in item["attributes"] as? [String: Any] ?? [:] {
                    if let number = value as? NSNumber, !(value is String) {
                        #expect((found[key] as? NSNumber)?.int64Value == number.int64Value, "\(key)")
                    } else {
                        #expect(found[key] as? String == value as? String, "\(key)")
                    }
                }
                let secret = (found[kSecValueData as String] as? Data).map { $0.map { String(format: "%02x", $0) }.joined() }
                #expect(secret == item["secret_hex"] as? String, "\(item["match"] ?? "")")
            }
        }
    }
}
#endif
