/// The block ciphers of legacy PKCS#12 files, for reading them only: what `openssl pkcs12 -export -legacy`, older
/// OpenSSL, Windows and macOS wrote for years (keys under 3DES, certificates under 40-bit RC2). swift-crypto has
/// neither, and they are never used to protect anything new (export writes PBES2 with AES-256).
///
/// Written from FIPS 46-3 (DES) and RFC 2268 (RC2) with a bit-level clarity that is fine for the few kilobytes of a
/// .p12; checked against OpenSSL's output by the tests (PKCS12Tests).
enum LegacyBlockCipher {
    case tripleDES(DES, DES, DES)
    case rc2(RC2)

    /// 3DES with a 24-byte (three keys) or 16-byte (two keys, K3 = K1) key.
    static func tripleDES(key: [UInt8]) -> LegacyBlockCipher? {
        guard key.count == 24 || key.count == 16 else { return nil }
        let k1 = DES(key: Array(key[0..<8])), k2 = DES(key: Array(key[8..<16]))
        let k3 = key.count == 24 ? DES(key: Array(key[16..<24])) : k1
        return .tripleDES(k1, k2, k3)
    }

    /// The CBC decryption of `data` with PKCS#7 padding removed; nil when the padding is wrong (a wrong key).
    func decryptCBC(_ data: [UInt8], iv: [UInt8]) -> [UInt8]? {
        guard iv.count == 8, !data.isEmpty, data.count % 8 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(data.count)
        var previous = UInt64(bigEndian: iv)
        for offset in stride(from: 0, to: data.count, by: 8) {
            let block = UInt64(bigEndian: data[offset..<offset + 8])
            let plain = decryptBlock(block) ^ previous
            previous = block
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: plain >> UInt64(shift))) }
        }
        guard let pad = out.last, (1...8).contains(pad), out.suffix(Int(pad)).allSatisfy({ $0 == pad }) else { return nil }
        return Array(out.dropLast(Int(pad)))
    }

    func decryptBlock(_ block: UInt64) -> UInt64 {
        switch self {
        case .tripleDES(let k1, let k2, let k3): k1.decrypt(k2.encrypt(k3.decrypt(block)))
        case .rc2(let rc2): rc2.decrypt(block)
        }
    }
}

extension UInt64 {
    init(bigEndian bytes: some Collection<UInt8>) {
        self = bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}

/// DES (FIPS 46-3): sixteen Feistel rounds over the 64-bit block, bits numbered 1…64 from the most significant.
struct DES {
    private let subkeys: [UInt64]  // 16 round keys of 48 bits

    init(key: [UInt8]) {
        let key = UInt64(bigEndian: key)
        let permuted = Self.permute(key, Self.pc1, width: 64)
        var c = permuted >> 28, d = permuted & 0xFFF_FFFF
        var keys: [UInt64] = []
        for shift in Self.shifts {
            c = ((c << shift) | (c >> (28 - shift))) & 0xFFF_FFFF
            d = ((d << shift) | (d >> (28 - shift))) & 0xFFF_FFFF
            keys.append(Self.permute(c << 28 | d, Self.pc2, width: 56))
        }
        subkeys = keys
    }

    func encrypt(_ block: UInt64) -> UInt64 { rounds(block, keys: subkeys) }
    func decrypt(_ block: UInt64) -> UInt64 { rounds(block, keys: subkeys.reversed()) }

    private func rounds(_ block: UInt64, keys: [UInt64]) -> UInt64 {
        let permuted = Self.permute(block, Self.initialPermutation, width: 64)
        var left = permuted >> 32, right = permuted & 0xFFFF_FFFF
        for key in keys {
            (left, right) = (right, left ^ Self.feistel(right, key))
        }
        return Self.permute(right << 32 | left, Self.finalPermutation, width: 64)
    }

    private static func feistel(_ half: UInt64, _ key: UInt64) -> UInt64 {
        let expanded = permute(half, expansion, width: 32) ^ key
        var substituted: UInt64 = 0
        for box in 0..<8 {
            let six = Int((expanded >> UInt64(42 - 6 * box)) & 0x3F)
            let row = (six & 0x20) >> 4 | (six & 1), column = (six >> 1) & 0xF
            substituted = substituted << 4 | UInt64(sBoxes[box][row * 16 + column])
        }
        return permute(substituted, permutation, width: 32)
    }

    /// Output bit i (from the most significant) is input bit table[i] of a `width`-bit value.
    private static func permute(_ value: UInt64, _ table: [UInt8], width: Int) -> UInt64 {
        var out: UInt64 = 0
        for position in table { out = out << 1 | (value >> UInt64(width - Int(position))) & 1 }
        return out
    }

    private static let initialPermutation: [UInt8] = [
        58, 50, 42, 34, 26, 18, 10, 2, 60, 52, 44, 36, 28, 20, 12, 4, 62, 54, 46, 38, 30, 22, 14, 6,
        64, 56, 48, 40, 32, 24, 16, 8, 57, 49, 41, 33, 25, 17, 9, 1, 59, 51, 43, 35, 27, 19, 11, 3,
        61, 53, 45, 37, 29, 21, 13, 5, 63, 55, 47, 39, 31, 23, 15, 7,
    ]
    private static let finalPermutation: [UInt8] = [
        40, 8, 48, 16, 56, 24, 64, 32, 39, 7, 47, 15, 55, 23, 63, 31, 38, 6, 46, 14, 54, 22, 62, 30,
        37, 5, 45, 13, 53, 21, 61, 29, 36, 4, 44, 12, 52, 20, 60, 28, 35, 3, 43, 11, 51, 19, 59, 27,
        34, 2, 42, 10, 50, 18, 58, 26, 33, 1, 41, 9, 49, 17, 57, 25,
    ]
    private static let expansion: [UInt8] = [
        32, 1, 2, 3, 4, 5, 4, 5, 6, 7, 8, 9, 8, 9, 10, 11, 12, 13, 12, 13, 14, 15, 16, 17,
        16, 17, 18, 19, 20, 21, 20, 21, 22, 23, 24, 25, 24, 25, 26, 27, 28, 29, 28, 29, 30, 31, 32, 1,
    ]
    private static let permutation: [UInt8] = [
        16, 7, 20, 21, 29, 12, 28, 17, 1, 15, 23, 26, 5, 18, 31, 10,
        2, 8, 24, 14, 32, 27, 3, 9, 19, 13, 30, 6, 22, 11, 4, 25,
    ]
    private static let pc1: [UInt8] = [
        57, 49, 41, 33, 25, 17, 9, 1, 58, 50, 42, 34, 26, 18, 10, 2, 59, 51, 43, 35, 27,
        19, 11, 3, 60, 52, 44, 36, 63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22,
        14, 6, 61, 53, 45, 37, 29, 21, 13, 5, 28, 20, 12, 4,
    ]
    private static let pc2: [UInt8] = [
        14, 17, 11, 24, 1, 5, 3, 28, 15, 6, 21, 10, 23, 19, 12, 4, 26, 8, 16, 7, 27, 20, 13, 2,
        41, 52, 31, 37, 47, 55, 30, 40, 51, 45, 33, 48, 44, 49, 39, 56, 34, 53, 46, 42, 50, 36, 29, 32,
    ]
    private static let shifts: [UInt64] = [1, 1, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1]
    private static let sBoxes: [[UInt8]] = [
        [14, 4, 13, 1, 2, 15, 11, 8, 3, 10, 6, 12, 5, 9, 0, 7, 0, 15, 7, 4, 14, 2, 13, 1, 10, 6, 12, 11, 9, 5, 3, 8,
         4, 1, 14, 8, 13, 6, 2, 11, 15, 12, 9, 7, 3, 10, 5, 0, 15, 12, 8, 2, 4, 9, 1, 7, 5, 11, 3, 14, 10, 0, 6, 13],
        [15, 1, 8, 14, 6, 11, 3, 4, 9, 7, 2, 13, 12, 0, 5, 10, 3, 13, 4, 7, 15, 2, 8, 14, 12, 0, 1, 10, 6, 9, 11, 5,
         0, 14, 7, 11, 10, 4, 13, 1, 5, 8, 12, 6, 9, 3, 2, 15, 13, 8, 10, 1, 3, 15, 4, 2, 11, 6, 7, 12, 0, 5, 14, 9],
        [10, 0, 9, 14, 6, 3, 15, 5, 1, 13, 12, 7, 11, 4, 2, 8, 13, 7, 0, 9, 3, 4, 6, 10, 2, 8, 5, 14, 12, 11, 15, 1,
         13, 6, 4, 9, 8, 15, 3, 0, 11, 1, 2, 12, 5, 10, 14, 7, 1, 10, 13, 0, 6, 9, 8, 7, 4, 15, 14, 3, 11, 5, 2, 12],
        [7, 13, 14, 3, 0, 6, 9, 10, 1, 2, 8, 5, 11, 12, 4, 15, 13, 8, 11, 5, 6, 15, 0, 3, 4, 7, 2, 12, 1, 10, 14, 9,
         10, 6, 9, 0, 12, 11, 7, 13, 15, 1, 3, 14, 5, 2, 8, 4, 3, 15, 0, 6, 10, 1, 13, 8, 9, 4, 5, 11, 12, 7, 2, 14],
        [2, 12, 4, 1, 7, 10, 11, 6, 8, 5, 3, 15, 13, 0, 14, 9, 14, 11, 2, 12, 4, 7, 13, 1, 5, 0, 15, 10, 3, 9, 8, 6,
         4, 2, 1, 11, 10, 13, 7, 8, 15, 9, 12, 5, 6, 3, 0, 14, 11, 8, 12, 7, 1, 14, 2, 13, 6, 15, 0, 9, 10, 4, 5, 3],
        [12, 1, 10, 15, 9, 2, 6, 8, 0, 13, 3, 4, 14, 7, 5, 11, 10, 15, 4, 2, 7, 12, 9, 5, 6, 1, 13, 14, 0, 11, 3, 8,
         9, 14, 15, 5, 2, 8, 12, 3, 7, 0, 4, 10, 1, 13, 11, 6, 4, 3, 2, 12, 9, 5, 15, 10, 11, 14, 1, 7, 6, 0, 8, 13],
        [4, 11, 2, 14, 15, 0, 8, 13, 3, 12, 9, 7, 5, 10, 6, 1, 13, 0, 11, 7, 4, 9, 1, 10, 14, 3, 5, 12, 2, 15, 8, 6,
         1, 4, 11, 13, 12, 3, 7, 14, 10, 15, 6, 8, 0, 5, 9, 2, 6, 11, 13, 8, 1, 4, 10, 7, 9, 5, 0, 15, 14, 2, 3, 12],
        [13, 2, 8, 4, 6, 15, 11, 1, 10, 9, 3, 14, 5, 0, 12, 7, 1, 15, 13, 8, 10, 3, 7, 4, 12, 5, 6, 11, 0, 14, 9, 2,
         7, 11, 4, 1, 9, 12, 14, 2, 0, 6, 10, 13, 15, 3, 5, 8, 2, 1, 14, 7, 4, 10, 8, 13, 15, 12, 9, 0, 3, 5, 6, 11],
    ]
}

/// RC2 (RFC 2268) with an effective key length in bits (40 or 128 in PKCS#12).
struct RC2 {
    private let k: [UInt16]  // 64 expanded key words

    init?(key: [UInt8], effectiveBits: Int) {
        guard (1...128).contains(key.count), (1...1024).contains(effectiveBits) else { return nil }
        var l = [UInt8](repeating: 0, count: 128)
        l.replaceSubrange(0..<key.count, with: key)
        let t = key.count, t8 = (effectiveBits + 7) / 8
        let tm = UInt8(truncatingIfNeeded: 0xFF >> (8 * t8 - effectiveBits))
        for i in t..<128 { l[i] = Self.piTable[Int(l[i - 1] &+ l[i - t])] }
        l[128 - t8] = Self.piTable[Int(l[128 - t8] & tm)]
        for i in stride(from: 127 - t8, through: 0, by: -1) { l[i] = Self.piTable[Int(l[i + 1] ^ l[i + t8])] }
        k = (0..<64).map { UInt16(l[2 * $0]) | UInt16(l[2 * $0 + 1]) << 8 }
    }

    /// One 8-byte block; RC2's words are little-endian within it.
    func decrypt(_ block: UInt64) -> UInt64 {
        var r = (0..<4).map { i -> UInt16 in
            let shift = UInt64(56 - 16 * i)
            let b0 = UInt16(truncatingIfNeeded: block >> shift), b1 = UInt16(truncatingIfNeeded: block >> (shift - 8))
            return (b0 & 0xFF) | (b1 & 0xFF) << 8
        }
        var j = 63
        func rmix(_ i: Int) {
            let rotated = r[i] >> UInt16([1, 2, 3, 5][i]) | r[i] << UInt16(16 - [1, 2, 3, 5][i])
            r[i] = rotated &- k[j] &- (r[(i + 3) % 4] & r[(i + 2) % 4]) &- (~r[(i + 3) % 4] & r[(i + 1) % 4])
            j -= 1
        }
        func rmash(_ i: Int) { r[i] = r[i] &- k[Int(r[(i + 3) % 4] & 63)] }
        func round(mixes: Int) {
            for _ in 0..<mixes { rmix(3); rmix(2); rmix(1); rmix(0) }
        }
        round(mixes: 5)
        rmash(3); rmash(2); rmash(1); rmash(0)
        round(mixes: 6)
        rmash(3); rmash(2); rmash(1); rmash(0)
        round(mixes: 5)
        return r.reduce(0) { $0 << 16 | UInt64($1 & 0xFF) << 8 | UInt64($1 >> 8) }
    }

    private static let piTable: [UInt8] = [
        0xd9, 0x78, 0xf9, 0xc4, 0x19, 0xdd, 0xb5, 0xed, 0x28, 0xe9, 0xfd, 0x79, 0x4a, 0xa0, 0xd8, 0x9d,
        0xc6, 0x7e, 0x37, 0x83, 0x2b, 0x76, 0x53, 0x8e, 0x62, 0x4c, 0x64, 0x88, 0x44, 0x8b, 0xfb, 0xa2,
        0x17, 0x9a, 0x59, 0xf5, 0x87, 0xb3, 0x4f, 0x13, 0x61, 0x45, 0x6d, 0x8d, 0x09, 0x81, 0x7d, 0x32,
        0xbd, 0x8f, 0x40, 0xeb, 0x86, 0xb7, 0x7b, 0x0b, 0xf0, 0x95, 0x21, 0x22, 0x5c, 0x6b, 0x4e, 0x82,
        0x54, 0xd6, 0x65, 0x93, 0xce, 0x60, 0xb2, 0x1c, 0x73, 0x56, 0xc0, 0x14, 0xa7, 0x8c, 0xf1, 0xdc,
        0x12, 0x75, 0xca, 0x1f, 0x3b, 0xbe, 0xe4, 0xd1, 0x42, 0x3d, 0xd4, 0x30, 0xa3, 0x3c, 0xb6, 0x26,
        0x6f, 0xbf, 0x0e, 0xda, 0x46, 0x69, 0x07, 0x57, 0x27, 0xf2, 0x1d, 0x9b, 0xbc, 0x94, 0x43, 0x03,
        0xf8, 0x11, 0xc7, 0xf6, 0x90, 0xef, 0x3e, 0xe7, 0x06, 0xc3, 0xd5, 0x2f, 0xc8, 0x66, 0x1e, 0xd7,
        0x08, 0xe8, 0xea, 0xde, 0x80, 0x52, 0xee, 0xf7, 0x84, 0xaa, 0x72, 0xac, 0x35, 0x4d, 0x6a, 0x2a,
        0x96, 0x1a, 0xd2, 0x71, 0x5a, 0x15, 0x49, 0x74, 0x4b, 0x9f, 0xd0, 0x5e, 0x04, 0x18, 0xa4, 0xec,
        0xc2, 0xe0, 0x41, 0x6e, 0x0f, 0x51, 0xcb, 0xcc, 0x24, 0x91, 0xaf, 0x50, 0xa1, 0xf4, 0x70, 0x39,
        0x99, 0x7c, 0x3a, 0x85, 0x23, 0xb8, 0xb4, 0x7a, 0xfc, 0x02, 0x36, 0x5b, 0x25, 0x55, 0x97, 0x31,
        0x2d, 0x5d, 0xfa, 0x98, 0xe3, 0x8a, 0x92, 0xae, 0x05, 0xdf, 0x29, 0x10, 0x67, 0x6c, 0xba, 0xc9,
        0xd3, 0x00, 0xe6, 0xcf, 0xe1, 0x9e, 0xa8, 0x2c, 0x63, 0x16, 0x01, 0x3f, 0x58, 0xe2, 0x89, 0xa9,
        0x0d, 0x38, 0x34, 0x1b, 0xab, 0x33, 0xff, 0xb0, 0xbb, 0x48, 0x0c, 0x5f, 0xb9, 0xb1, 0xcd, 0x2e,
        0xc5, 0xf3, 0xdb, 0x47, 0xe5, 0xa5, 0x9c, 0x77, 0x0a, 0xa6, 0x20, 0x68, 0xfe, 0x7f, 0xc1, 0xad,
    ]
}
