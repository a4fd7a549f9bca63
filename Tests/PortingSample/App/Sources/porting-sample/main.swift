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
// Keys as the documentation writes them: a permanent P-256 key found again by its tag, an ES256 JWT signed with it
// (the DER signature turned into JOSE's r‖s, as JWT libraries do), verified with its public key.
let tag = Data("com.example.porting-sample.jwt".utf8)
let keyAttributes: [String: Any] = [
    kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
    kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag],
]
var keyError: Unmanaged<CFError>?
check("SecKeyCreateRandomKey, permanent", SecKeyCreateRandomKey(keyAttributes as CFDictionary, &keyError) != nil)
var keyItem: CFTypeRef?
let keyQuery: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                               kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecReturnRef as String: true]
check("key found by its tag", SecItemCopyMatching(keyQuery as CFDictionary, &keyItem) == errSecSuccess)
let signingKey = keyItem as! SecKey
func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}
let signingInput = base64URL(Data(#"{"alg":"ES256","typ":"JWT"}"#.utf8)) + "." + base64URL(Data(#"{"sub":"porting"}"#.utf8))
let derSignature = SecKeyCreateSignature(signingKey, .ecdsaSignatureMessageX962SHA256, Data(signingInput.utf8) as CFData,
                                         &keyError) as Data?
// SEQUENCE { INTEGER r, INTEGER s } → 32-byte r ‖ 32-byte s.
func joseSignature(_ der: Data) -> Data? {
    let bytes = [UInt8](der)
    guard bytes.count > 8, bytes[0] == 0x30 else { return nil }
    var index = bytes[1] & 0x80 != 0 ? 3 : 2
    var out = Data()
    for _ in 0..<2 {
        guard bytes[index] == 0x02 else { return nil }
        let length = Int(bytes[index + 1])
        let integer = bytes[(index + 2)..<(index + 2 + length)].drop { $0 == 0 }
        out += Data(repeating: 0, count: 32 - integer.count) + integer
        index += 2 + length
    }
    return out
}
let jose = derSignature.flatMap(joseSignature)
check("ES256 JWT signature is 64 bytes", jose?.count == 64)
let publicKey = SecKeyCopyPublicKey(signingKey)
check("JWT verifies with the public key", publicKey.map {
    SecKeyVerifySignature($0, .ecdsaSignatureMessageX962SHA256, Data(signingInput.utf8) as CFData,
                          (derSignature ?? Data()) as CFData, nil)
} == true)
check("the key is deleted by its tag", SecItemDelete([kSecClass: kSecClassKey, kSecAttrApplicationTag: tag] as CFDictionary)
    == errSecSuccess)

// A client identity for mutual TLS, imported from a .p12 as the documentation shows, then found as an identity.
if let path = ProcessInfo.processInfo.environment["PORTING_SAMPLE_P12"], let p12Data = FileManager.default.contents(atPath: path) {
    let options = [kSecImportExportPassphrase as String: "sample"]
    var rawItems: CFArray?
    check("SecPKCS12Import", SecPKCS12Import(p12Data as CFData, options as CFDictionary, &rawItems) == errSecSuccess)
    let items = rawItems! as! [[String: Any]]
    let identity = items[0][kSecImportItemIdentity as String] as! SecIdentity
    let added = SecItemAdd([kSecValueRef as String: identity] as CFDictionary, nil)
    check("storing the identity (already stored by the import, as on macOS)", added == errSecSuccess || added == errSecDuplicateItem)
    var certificate: SecCertificate?
    SecIdentityCopyCertificate(identity, &certificate)
    var summary: CFString?
    if let certificate { summary = SecCertificateCopySubjectSummary(certificate) }
    check("the identity's certificate", summary as String? == "porting client")
    var found: CFTypeRef?
    check("found as kSecClassIdentity", SecItemCopyMatching([kSecClass as String: kSecClassIdentity,
                                                            kSecReturnRef as String: true] as CFDictionary, &found) == errSecSuccess
        && found is SecIdentity)
} else {
    check("PORTING_SAMPLE_P12 names a .p12 file", false)
}
exit(exitCode)
