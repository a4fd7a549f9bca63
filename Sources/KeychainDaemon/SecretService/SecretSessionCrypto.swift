import Crypto
import Foundation
import KeychainCore
import _CryptoExtras

/// The Secret Service's `dh-ietf1024-sha256-aes128-cbc-pkcs7` session (the specification's "Transfer of Secrets"):
/// Diffie-Hellman in RFC 2409's second Oakley group (1024-bit MODP, generator 2), the shared secret left-padded to
/// 128 bytes, HKDF-SHA256 with no salt and no info to a 16-byte key, then AES-128-CBC with PKCS#7 (always padded)
/// and a fresh 16-byte IV carried in the secret's parameters. The bus is a local socket of the user's; this keeps
/// secrets out of bus monitors and logs, which is what libsecret asks for by default.
struct SecretSessionCipher: Sendable {
    let key: SymmetricKey

    /// Answers a client's public key (big-endian, any length): our public key (128 bytes) and the session's cipher.
    static func negotiate(clientPublicKey: [UInt8]) -> (publicKey: [UInt8], cipher: SecretSessionCipher)? {
        guard let peer = ModP1024.number(bigEndian: clientPublicKey), ModP1024.isValidPublic(peer) else { return nil }
        var (exponent, publicKey) = SessionKeyPair.make()
        var power = ModP1024.power(peer, exponent, bits: 256)
        var shared = ModP1024.bytes(power)
        let key = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: shared), outputByteCount: 16)
        // Our private exponent and the shared secret are not kept past this call.
        ModP1024.wipe(&exponent)
        ModP1024.wipe(&power)
        shared.withUnsafeMutableBytes { if let base = $0.baseAddress { wipe(base, $0.count) } }
        return (ModP1024.bytes(publicKey), SecretSessionCipher(key: key))
    }

    /// (IV, ciphertext) of a secret.
    func encrypt(_ plaintext: [UInt8]) -> (iv: [UInt8], ciphertext: [UInt8])? {
        var iv = [UInt8](repeating: 0, count: 16)
        iv.withUnsafeMutableBytes { fillRandom($0) }
        guard let cbcIV = try? AES._CBC.IV(ivBytes: iv), let sealed = try? AES._CBC.encrypt(plaintext, using: key, iv: cbcIV)
        else { return nil }
        return (iv, Array(sealed))
    }

    func decrypt(_ ciphertext: [UInt8], iv: [UInt8]) -> [UInt8]? {
        guard iv.count == 16, let cbcIV = try? AES._CBC.IV(ivBytes: iv),
              let plain = try? AES._CBC.decrypt(ciphertext, using: key, iv: cbcIV)
        else { return nil }
        return Array(plain)
    }
}

/// Fills `buffer` from the kernel's generator in one call (the standard library's generator, and swift-crypto's
/// random keys on Linux, take 8 bytes per system call: a session's key and each secret's IV were 20 calls).
/// (getentropy(3): getrandom(2) underneath, at most 256 bytes, never a partial fill.)
func fillRandom(_ buffer: UnsafeMutableRawBufferPointer) {
    precondition(buffer.count <= 256)
    guard getentropy(buffer.baseAddress, buffer.count) == 0 else { fatalError("getentropy failed: errno \(errno)") }
}

/// Our side's key pair for one session, made on the call's own thread: from the generator's table it is 64
/// products (some 35 µs), less than what handing it over from another thread cost (a wake-up and a sleep per
/// session, when a pair was made ahead there). Each pair serves one session.
enum SessionKeyPair {
    typealias Number = ModP1024.Number

    /// A 256-bit private exponent: the group's prime is safe, and 256 bits is well past its ~80-bit strength.
    static func make() -> (exponent: Number, publicKey: Number) {
        var exponent = Number(repeating: 0, count: ModP1024.limbs)
        exponent.withUnsafeMutableBytes { fillRandom(UnsafeMutableRawBufferPointer(rebasing: $0[..<32])) }
        exponent[3] |= 1 << 63
        return (exponent, ModP1024.generatorPower(exponent))
    }
}

/// Arithmetic modulo RFC 2409's 1024-bit prime: 16 little-endian 64-bit limbs, Montgomery multiplication.
enum ModP1024 {
    typealias Number = [UInt64]
    static let limbs = 16

    /// FFFFFFFF FFFFFFFF C90FDAA2 2168C234 … ECE65381 FFFFFFFF FFFFFFFF (RFC 2409 §6.2).
    static let prime: Number = number(hex: """
        FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD\
        EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED\
        EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF
        """)
    static let generator: Number = [2] + Array(repeating: 0, count: 15)

    /// -p⁻¹ mod 2⁶⁴ (Newton's iteration doubles the correct bits each step).
    static let primeInverse: UInt64 = {
        var inverse: UInt64 = 1
        for _ in 0..<7 { inverse = inverse &* (2 &- prime[0] &* inverse) }
        return 0 &- inverse
    }()

    /// R² mod p, R = 2¹⁰²⁴: one doubled 2048 times, reduced as it goes.
    static let rSquared: Number = {
        var x: Number = [1] + Array(repeating: 0, count: 15)
        for _ in 0..<2048 {
            var carry: UInt64 = 0
            for i in 0..<limbs {
                let next = x[i] >> 63
                x[i] = x[i] << 1 | carry
                carry = next
            }
            if carry != 0 || !isLess(x, prime) { x = subtract(x, prime) }
        }
        return x
    }()

    static func number(hex: String) -> Number {
        let digits = Array(hex.utf8)
        var out = Number(repeating: 0, count: limbs)
        for (index, digit) in digits.reversed().enumerated() {
            let value = UInt64(digit <= UInt8(ascii: "9") ? digit - 48 : digit - 55)
            out[index / 16] |= value << UInt64(4 * (index % 16))
        }
        return out
    }

    /// A big-endian integer of any length below 2¹⁰²⁴, else nil.
    static func number(bigEndian bytes: [UInt8]) -> Number? {
        let trimmed = bytes.drop { $0 == 0 }
        guard trimmed.count <= 128 else { return nil }
        var out = Number(repeating: 0, count: limbs)
        for (index, byte) in trimmed.reversed().enumerated() {
            out[index / 8] |= UInt64(byte) << UInt64(8 * (index % 8))
        }
        return out
    }

    /// 128 bytes, big-endian (the shared secret's padding the specification asks).
    static func bytes(_ number: Number) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        for limb in number.reversed() {
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: limb >> UInt64(shift))) }
        }
        return out
    }

    /// 1 < y < p − 1: refuses the values that would force a known shared secret.
    static func isValidPublic(_ y: Number) -> Bool {
        let one: Number = [1] + Array(repeating: 0, count: 15)
        var pMinusOne = prime
        pMinusOne[0] -= 1
        return isLess(one, y) && isLess(y, pMinusOne)
    }

    static func isLess(_ a: Number, _ b: Number) -> Bool {
        for i in stride(from: limbs - 1, through: 0, by: -1) where a[i] != b[i] { return a[i] < b[i] }
        return false
    }

    static func subtract(_ a: Number, _ b: Number) -> Number { subtractWithBorrow(a, b).difference }

    /// a − b, and 1 when it went below zero (a < b), else 0.
    static func subtractWithBorrow(_ a: Number, _ b: Number) -> (difference: Number, borrow: UInt64) {
        var out = a
        var borrow: UInt64 = 0
        for i in 0..<limbs {
            let (d1, o1) = a[i].subtractingReportingOverflow(b[i])
            let (d2, o2) = d1.subtractingReportingOverflow(borrow)
            out[i] = d2
            borrow = UInt64(o1 ? 1 : 0) | UInt64(o2 ? 1 : 0)
        }
        return (out, borrow)
    }

    /// a·b·R⁻¹ mod p (CIOS Montgomery multiplication).
    static func multiply(_ a: Number, _ b: Number) -> Number {
        precondition(a.count == limbs && b.count == limbs)
        var result = Number(repeating: 0, count: limbs)
        a.withUnsafeBufferPointer { a in
            b.withUnsafeBufferPointer { b in
                result.withUnsafeMutableBufferPointer { r in
                    multiply(into: r.baseAddress!, a.baseAddress!, b.baseAddress!)
                }
            }
        }
        return result
    }

    /// r = a·b·R⁻¹ mod p, on 16-limb buffers; `r` must not overlap `a` or `b`. Nothing is allocated: a session's
    /// key agreement is some 340 of these on the path of every secret-tool call, and an array per product cost a
    /// fifth of their time. The arithmetic wraps (`&+`, `&*`) where it cannot overflow, so no check is compiled in.
    static func multiply(into r: UnsafeMutablePointer<UInt64>, _ a: UnsafePointer<UInt64>, _ b: UnsafePointer<UInt64>) {
        r.update(repeating: 0, count: limbs)
        let inverse = primeInverse
        var t = (UInt64(0), UInt64(0))  // the two limbs above the 16 of `r`: t[16], t[17]
        prime.withUnsafeBufferPointer { p in
            for i in 0..<limbs {
                var carry: UInt64 = 0
                let bi = UInt128(b[i])
                for j in 0..<limbs {
                    let s = UInt128(r[j]) &+ UInt128(a[j]) &* bi &+ UInt128(carry)
                    r[j] = UInt64(truncatingIfNeeded: s)
                    carry = UInt64(truncatingIfNeeded: s >> 64)
                }
                var s = UInt128(t.0) &+ UInt128(carry)
                t.0 = UInt64(truncatingIfNeeded: s)
                t.1 = UInt64(truncatingIfNeeded: s >> 64)
                let m = UInt128(r[0] &* inverse)
                s = UInt128(r[0]) &+ m &* UInt128(p[0])
                carry = UInt64(truncatingIfNeeded: s >> 64)
                for j in 1..<limbs {
                    s = UInt128(r[j]) &+ m &* UInt128(p[j]) &+ UInt128(carry)
                    r[j - 1] = UInt64(truncatingIfNeeded: s)
                    carry = UInt64(truncatingIfNeeded: s >> 64)
                }
                s = UInt128(t.0) &+ UInt128(carry)
                r[limbs - 1] = UInt64(truncatingIfNeeded: s)
                t.0 = t.1 &+ UInt64(truncatingIfNeeded: s >> 64)
            }
            // The final subtraction, without a branch on the value: r − p is taken when the product overflowed
            // (t.0 is 1) or r ≥ p (no borrow), picked by a mask, limb by limb after the borrow is known.
            var borrow: UInt64 = 0
            for i in 0..<limbs {
                let (d1, o1) = r[i].subtractingReportingOverflow(p[i])
                let (_, o2) = d1.subtractingReportingOverflow(borrow)
                borrow = UInt64(o1 ? 1 : 0) | UInt64(o2 ? 1 : 0)
            }
            let mask = 0 &- (((t.0 | (0 &- t.0)) >> 63) | (borrow ^ 1))
            borrow = 0
            for i in 0..<limbs {
                let (d1, o1) = r[i].subtractingReportingOverflow(p[i] & mask)
                let (d2, o2) = d1.subtractingReportingOverflow(borrow)
                r[i] = d2
                borrow = UInt64(o1 ? 1 : 0) | UInt64(o2 ? 1 : 0)
            }
        }
    }

    /// Zeroes a number that held a secret (a private exponent, a shared value).
    static func wipe(_ number: inout Number) {
        number.withUnsafeMutableBytes { if let base = $0.baseAddress { KeychainCore.wipe(base, $0.count) } }
    }

    /// base^exponent mod p for an exponent below 2^bits (a multiple of 4): a fixed 4-bit window, so every four bits
    /// cost four squarings and one multiplication (a third fewer products than bit by bit: a session's key
    /// agreement is on the path of every secret-tool call). The window's entry is picked by reading all sixteen
    /// with masks, and digit 0 multiplies by one, so time and memory accesses do not depend on the secret exponent.
    static func power(_ base: Number, _ exponent: Number, bits: Int = 1024) -> Number {
        precondition(bits % 4 == 0 && bits <= 1024 && base.count == limbs && exponent.count == limbs)
        // base⁰ … base¹⁵ (Montgomery form) one after another, then the running result, a product and the entry.
        var work = Number(repeating: 0, count: 19 * limbs)
        var out: Number = []
        work.withUnsafeMutableBufferPointer { work in
            let table = work.baseAddress!, result = table + 16 * limbs, product = result + limbs, selected = product + limbs
            montgomeryOne.withUnsafeBufferPointer { table.update(from: $0.baseAddress!, count: limbs) }
            base.withUnsafeBufferPointer { base in
                rSquared.withUnsafeBufferPointer { multiply(into: table + limbs, base.baseAddress!, $0.baseAddress!) }
            }
            for k in 2..<16 { multiply(into: table + k * limbs, table + (k - 1) * limbs, table + limbs) }
            result.update(from: table, count: limbs)
            for window in stride(from: bits / 4 - 1, through: 0, by: -1) {
                for _ in 0..<4 { multiply(result, by: result, scratch: product) }
                select(digit(of: exponent, window: window), from: table, into: selected)
                multiply(result, by: selected, scratch: product)
            }
            out = leavingMontgomery(result)
            // The table and the running result are powers of the secret exponent's prefixes.
            KeychainCore.wipe(UnsafeMutableRawPointer(table), 19 * limbs * 8)
        }
        return out
    }

    /// 2^exponent mod p for an exponent below 2²⁵⁶: our public key. The base never changes, so its powers are
    /// taken once (`generatorTable`) and each four bits of the exponent cost one product with an entry of it, no
    /// squaring: 64 products instead of some 340. The entry is read with masks, as in `power`.
    static func generatorPower(_ exponent: Number) -> Number {
        precondition(exponent.count == limbs && exponent[4...].allSatisfy { $0 == 0 })
        var work = Number(repeating: 0, count: 3 * limbs)
        var out: Number = []
        work.withUnsafeMutableBufferPointer { work in
            let result = work.baseAddress!, product = result + limbs, selected = product + limbs
            montgomeryOne.withUnsafeBufferPointer { result.update(from: $0.baseAddress!, count: limbs) }
            generatorTable.withUnsafeBufferPointer { table in
                for window in 0..<64 {
                    select(digit(of: exponent, window: window), from: table.baseAddress! + window * 16 * limbs, into: selected)
                    multiply(result, by: selected, scratch: product)
                }
            }
            out = leavingMontgomery(result)
            KeychainCore.wipe(UnsafeMutableRawPointer(result), 3 * limbs * 8)
        }
        return out
    }

    /// For each of the 64 four-bit windows w of a 256-bit exponent, 2^(d·16^w) for d = 0…15 (Montgomery form):
    /// 128 KiB, 1,024 products once per process.
    static let generatorTable: Number = {
        var table = Number(repeating: 0, count: 64 * 16 * limbs)
        table.withUnsafeMutableBufferPointer { table in
            let t = table.baseAddress!
            generator.withUnsafeBufferPointer { g in
                rSquared.withUnsafeBufferPointer { multiply(into: t + limbs, g.baseAddress!, $0.baseAddress!) }
            }
            for window in 0..<64 {
                let row = t + window * 16 * limbs
                montgomeryOne.withUnsafeBufferPointer { row.update(from: $0.baseAddress!, count: limbs) }
                if window > 0 {  // 2^(16^w) = (2^(15·16^(w−1)))·2^(16^(w−1))
                    multiply(into: row + limbs, row - limbs, row - 15 * limbs)
                }
                for d in 2..<16 { multiply(into: row + d * limbs, row + (d - 1) * limbs, row + limbs) }
            }
        }
        return table
    }()

    private static let unit: Number = [1] + Array(repeating: 0, count: 15)
    private static let montgomeryOne: Number = multiply(unit, rSquared)

    /// Bits 4w … 4w+3 of `exponent`.
    private static func digit(of exponent: Number, window w: Int) -> UInt64 {
        (exponent[w / 16] >> UInt64(4 * (w % 16))) & 0xF
    }

    /// result = result · factor (Montgomery), the product made in `scratch` first (`factor` may be `result`).
    private static func multiply(_ result: UnsafeMutablePointer<UInt64>, by factor: UnsafePointer<UInt64>,
                                 scratch: UnsafeMutablePointer<UInt64>) {
        multiply(into: scratch, result, factor)
        result.update(from: scratch, count: limbs)
    }

    /// x out of Montgomery form: x·R⁻¹ mod p.
    private static func leavingMontgomery(_ x: UnsafePointer<UInt64>) -> Number {
        var out = Number(repeating: 0, count: limbs)
        out.withUnsafeMutableBufferPointer { out in
            unit.withUnsafeBufferPointer { multiply(into: out.baseAddress!, x, $0.baseAddress!) }
        }
        return out
    }

    /// Copies entry `digit` of a 16-entry table into `selected`, reading every entry (masks, no branch or index on
    /// the digit).
    private static func select(_ digit: UInt64, from table: UnsafePointer<UInt64>, into selected: UnsafeMutablePointer<UInt64>) {
        selected.update(repeating: 0, count: limbs)
        for k in 0..<16 {
            let difference = UInt64(k) ^ digit
            let mask = ((difference | (0 &- difference)) >> 63) &- 1  // all ones when k == digit, else 0
            for j in 0..<limbs { selected[j] |= table[k * limbs + j] & mask }
        }
    }
}
