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

    @Test("RFC 4231 test case 2 (key \"Jefe\")")
    func rfc4231() {
        let keyed = KeyedHash(key: SymmetricKey(data: Array("Jefe".utf8)))
        let code = Array("what do ya want for nothing?".utf8).withUnsafeBytes { keyed.authenticationCode($0) }
        #expect(code.map { String(format: "%02x", $0) }.joined()
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }
}
