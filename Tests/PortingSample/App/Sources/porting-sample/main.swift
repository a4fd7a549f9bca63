import Foundation
import Security
import TinyKeychain

// An app as written for Apple platforms; each check prints one line, and the script compares the output.

func check(_ name: String, _ ok: Bool) {
    print("\(ok ? "ok" : "FAILED") \(name)")
    if !ok { exitCode = 1 }
}
nonisolated(unsafe) var exitCode: Int32 = 0

// The first call is a legacy one that finds nothing: finding out who is calling opens and creates no keychain.
let login = (ProcessInfo.processInfo.environment["XDG_DATA_HOME"] ?? "") + "/keychains/login.keychain-db"
var length: UInt32 = 0
check("a first legacy find answers not found",
      SecKeychainFindGenericPassword(nil, 3, "svc", 4, "acct", &length, nil, nil) == errSecItemNotFound)
check("and creates no keychain", !FileManager.default.fileExists(atPath: login))

// Recipe 2: the bundle identifier comes from the Info.plist beside the executable.
check("bundle identifier from Info.plist", Bundle.main.bundleIdentifier == "com.example.porting-sample")

let keychain = TinyKeychain()
check("wrapper's default service is the bundle identifier", keychain.service == "com.example.porting-sample")
check("wrapper set", keychain.set("s3cret", for: "alice") == errSecSuccess)
check("wrapper set again (delete then add)", keychain.set("newer", for: "alice") == errSecSuccess)
check("wrapper get", keychain.string(for: "alice") == "newer")
check("wrapper set bob", keychain.set("b", for: "bob") == errSecSuccess)
check("wrapper lists keys", keychain.allKeys() == ["alice", "bob"])

// Recipe 3: access groups come from the entitlements file beside the executable.
check("entitled shared group", keychain.set("shared", for: "carol", accessGroup: "group.example.shared") == errSecSuccess)
check("group not entitled", keychain.set("x", for: "dave", accessGroup: "group.someone-else") == errSecMissingEntitlement)

// Recipe 4: removeAll() takes the macOS branch (kSecMatchLimitAll) and deletes everything.
check("wrapper removeAll", keychain.removeAll() == errSecSuccess)
check("nothing left", keychain.allKeys().isEmpty)

// Plain SecItem code with [CFString: Any] and CFError handling, unchanged.
let query = [kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrAccount: "me",
             kSecValueData: Data("pw".utf8)] as [CFString: Any]
check("SecItemAdd internet password", SecItemAdd(query as CFDictionary, nil) == errSecSuccess)
var error: Unmanaged<CFError>?
let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.userPresence, .or], &error)
check("CFError from SecAccessControlCreateWithFlags",
      access == nil && CFErrorGetCode(error!.takeRetainedValue()) == Int(errSecParam))
check("SecItemDelete internet password",
      SecItemDelete([kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com"] as CFDictionary) == errSecSuccess)
exit(exitCode)
