import Crypto
import Foundation
import Testing
@testable import KeychainStorage

/// The blind indexes' HMAC, computed with its key schedule done once (issue 22 §3: a quarter of an in-process find
/// went to swift-crypto's generic HMAC). It must give exactly HMAC-SHA256's bytes: every stored index depends on it.
@Suite("The keyed hash of the blind indexes")
struct KeyedHashTests {
    @Test("the same bytes as HMAC<SHA256>, for keys shorter than, as long as and longer than a block, any message",
          arguments: [0, 16, 32, 64, 65, 200])
    func sameAsHMAC(keyLength: Int) {
        var generator = SystemRandomNumberGenerator()
        for messageLength in [0, 1, 31, 32, 55, 56, 63, 64, 65, 127, 1000] {
            let key = SymmetricKey(data: (0..<keyLength).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let message = (0..<messageLength).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = Array(HMAC<SHA256>.authenticationCode(for: message, using: key))
            let keyed = KeyedHash(key: key)
            let code = message.withUnsafeBytes { Array(keyed.authenticationCode($0)) }
            #expect(code == expected, "key \(keyLength) bytes, message \(messageLength) bytes")
            // Used twice: the keyed state is not consumed.
            #expect(message.withUnsafeBytes { Array(keyed.authenticationCode($0)) } == expected)
            #expect(message.withUnsafeBytes { keyed.index($0) } == Data(expected.prefix(16)))
        }
    }

    // Every stored index depends on these bytes: computed here again with HKDF, AAD and HMAC<SHA256>.
    @Test("a stored group, account or service index is HMAC(class key, AAD(\"kc2/bidx\", kind, column, v1)), v1 the format-1 index")
    func classIndexes() {
        let deviceKey = SymmetricKey(size: .bits256)
        let header = FileHeader(dbUUID: UUID(), dbSalt: Data((0..<32).map { UInt8($0) }), passwordSalt: Data(count: 32),
                                hasPassword: false, kdf: .standard, keybagGeneration: 1)
        let keys = DeviceKeys(deviceKey: deviceKey, header: header)
        func derived(_ label: String) -> SymmetricKey {
            Sealing.hkdf(deviceKey, salt: header.dbSalt, info: Array("kc1/\(label)".utf8))
        }
        func expected(_ value: [UInt8], column: String, label: String, kind: String) -> Data {
            let v1 = Data(HMAC<SHA256>.authenticationCode(for: value, using: derived(label)).prefix(16))
            var input = AAD("kc2/bidx")
            input.append(kind)
            input.append(column)
            input.append(v1)
            return Data(HMAC<SHA256>.authenticationCode(for: input.bytes, using: derived("bidx/class")).prefix(16))
        }
        for value in [[], Array("a".utf8), Array("com.example.service-ünïcode".utf8), [UInt8](repeating: 7, count: 300)] {
            for kind in ["genp", "inet", ""] {
                #expect(keys.accountIndex(value, kind: kind) == expected(value, column: "account", label: "bidx/acct", kind: kind))
                #expect(keys.serviceIndex(value, kind: kind) == expected(value, column: "service", label: "bidx/svce", kind: kind))
                let group = String(decoding: value, as: UTF8.self)
                #expect(keys.groupIndex(group, kind: kind)
                        == expected(Array(group.utf8), column: "group", label: "bidx/agrp", kind: kind))
                // The migration's path, from a stored format-1 value.
                let v1 = Data(HMAC<SHA256>.authenticationCode(for: value, using: derived("bidx/acct")).prefix(16))
                #expect(keys.classIndex(v1, kind: kind, column: "account")
                        == expected(value, column: "account", label: "bidx/acct", kind: kind))
            }
        }
    }

    @Test("RFC 4231 test case 2 (key \"Jefe\")")
    func rfc4231() {
        let keyed = KeyedHash(key: SymmetricKey(data: Array("Jefe".utf8)))
        let code = Array("what do ya want for nothing?".utf8).withUnsafeBytes { keyed.authenticationCode($0) }
        #expect(code.map { String(format: "%02x", $0) }.joined()
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }
}
