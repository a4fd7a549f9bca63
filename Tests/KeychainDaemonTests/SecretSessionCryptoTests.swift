import Crypto
import Foundation
@testable import KeychainDaemon
import Testing

/// The Secret Service's DH session: the group arithmetic against values computed independently (Python's pow and
/// hmac), and both ends of a session agreeing.
@Suite("Secret Service session crypto")
struct SecretSessionCryptoTests {
    func hexBytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    @Test("modular exponentiation in the 1024-bit group matches an independent computation, and so does the key")
    func knownAnswer() throws {
        let a = ModP1024.number(bigEndian: hexBytes(String(repeating: "1234567890abcdef", count: 16)))!
        let peer = ModP1024.number(bigEndian: hexBytes("2dfe4b545908e5e20df76b00802c8b328a31594c08fc96a6f2ac6242f7b577790c8705765f3f3ea5fcd62b7f541c7701033cbb8d05cbc2710a62cb367da1ae4d2539d6a2f11aa4b3a3e237358a47518504b5a8c8c6b555df82f408bed4c74c87400d8beeba66ec77173c19e2cc2cda53d879039ad48f8d8055538df7be76652b"))!
        let shared = ModP1024.bytes(ModP1024.power(peer, a))
        #expect(shared == hexBytes("cdbda150d248ccef9e8a026598d10ce50a9e01698717707ef29306f25eca07d1e435c3182440bf064fc10afd57d402000c83fa000d72c3184bbb4caddbd531b920f3cf981e5872bf61f83f97309f84d7d1f3ee1793fcc9ed133c9878d7b5298aa833e7fcbed294a59415177fcc698850f675c139b89c55b7cf925d1aacbd7cfb"))
        let key = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: shared), outputByteCount: 16)
        #expect(key.withUnsafeBytes { Array($0) } == hexBytes("0ee6b8315af000b5e658b789432b55a7"))
    }

    @Test("a short exponent gives the same power whether its length is given or the full 1024 bits are walked")
    func shortExponent() {
        for _ in 0..<4 {
            let exponent = (0..<16).map { $0 < 4 ? UInt64.random(in: .min ... .max) : 0 }
            let base = ModP1024.power(ModP1024.generator, (0..<16).map { _ in UInt64.random(in: 0 ... .max >> 1) })
            #expect(ModP1024.power(base, exponent, bits: 256) == ModP1024.power(base, exponent))
        }
        // Every digit of the window (0 through 15), in a known power of two: 2^0xFEDCBA9876543210 is checked
        // against repeated squaring.
        let exponent: ModP1024.Number = [0xFEDC_BA98_7654_3210] + Array(repeating: 0, count: 15)
        var bySquaring = ModP1024.generator
        let montgomery = { (x: ModP1024.Number) in ModP1024.multiply(x, ModP1024.rSquared) }
        let plain = { (x: ModP1024.Number) in ModP1024.multiply(x, [1] + Array(repeating: 0, count: 15)) }
        var result = montgomery([1] + Array(repeating: 0, count: 15))
        var square = montgomery(bySquaring)
        for bit in 0..<64 {
            if exponent[0] >> UInt64(bit) & 1 == 1 { result = ModP1024.multiply(result, square) }
            square = ModP1024.multiply(square, square)
        }
        bySquaring = plain(result)
        #expect(ModP1024.power(ModP1024.generator, exponent, bits: 64) == bySquaring)
    }

    @Test("our public key from the generator's table is the generator raised by the window, for every digit and window")
    func generatorTable() {
        var exponents: [ModP1024.Number] = [
            [UInt64](repeating: 0, count: 16),                                        // 2⁰ = 1
            [1] + [UInt64](repeating: 0, count: 15),
            [UInt64](repeating: .max, count: 4) + [UInt64](repeating: 0, count: 12),  // every window at digit 15
            [0xFEDC_BA98_7654_3210, 0x0123_4567_89AB_CDEF, 0xF0E1_D2C3_B4A5_9687, 0x8000_0000_0000_0001]
                + [UInt64](repeating: 0, count: 12),
        ]
        for _ in 0..<4 { exponents.append((0..<16).map { $0 < 4 ? UInt64.random(in: .min ... .max) : 0 }) }
        for exponent in exponents {
            #expect(ModP1024.generatorPower(exponent) == ModP1024.power(ModP1024.generator, exponent, bits: 256))
        }
        #expect(ModP1024.generatorPower(exponents[0]) == [1] + [UInt64](repeating: 0, count: 15))
        #expect(ModP1024.generatorPower(exponents[1]) == ModP1024.generator)
    }

    @Test("a client and the service agree on the key: what one encrypts the other opens; bad public keys are refused")
    func agreement() throws {
        var clientSecret = (0..<16).map { _ in UInt64.random(in: .min ... .max) }
        clientSecret[15] >>= 1
        let clientPublic = ModP1024.bytes(ModP1024.power(ModP1024.generator, clientSecret))
        let (servicePublic, service) = try #require(SecretSessionCipher.negotiate(clientPublicKey: Array(clientPublic.drop { $0 == 0 })))
        let shared = ModP1024.bytes(ModP1024.power(ModP1024.number(bigEndian: servicePublic)!, clientSecret))
        let client = SecretSessionCipher(key: HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: shared), outputByteCount: 16))
        let (iv, sealed) = try #require(service.encrypt(Array("sixteen bytes!!!".utf8)))
        #expect(sealed.count == 32)  // PKCS#7 always pads
        #expect(client.decrypt(sealed, iv: iv) == Array("sixteen bytes!!!".utf8))
        for bad in [[], [1], ModP1024.bytes(ModP1024.prime), [UInt8](repeating: 0xFF, count: 129)] {
            #expect(SecretSessionCipher.negotiate(clientPublicKey: bad) == nil)
        }
    }
}

@Suite("Secret Service prompts")
struct SecretServicePromptOrderTests {
    @Test("prompts are numbered by their counter, so the oldest is p9 before p10 (not the string order)")
    func promptOrder() {
        let paths = ["p10", "p9", "p100", "p11"].map { SecretServiceServer.promptPrefix + $0 }
        #expect(paths.min { SecretServiceServer.promptNumber($0) < SecretServiceServer.promptNumber($1) }
                == SecretServiceServer.promptPrefix + "p9")
        #expect(paths.sorted().first == SecretServiceServer.promptPrefix + "p10")  // what a string sort would evict
    }
}
