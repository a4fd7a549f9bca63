import Crypto
import Foundation

/// The password-based key derivation of PKCS#12 itself (RFC 7292 appendix B.2): the MAC key of every .p12 file, and
/// the key and IV of the legacy PBE schemes (pbeWithSHAAnd3-KeyTripleDES-CBC, pbeWithSHAAnd40BitRC2-CBC, …).
enum PKCS12KeyDerivation {
    enum Purpose: UInt8 { case key = 1, iv = 2, mac = 3 }

    enum Hash {
        case sha1, sha256, sha384, sha512

        var outputSize: Int { switch self { case .sha1: 20; case .sha256: 32; case .sha384: 48; case .sha512: 64 } }
        var blockSize: Int { switch self { case .sha1, .sha256: 64; case .sha384, .sha512: 128 } }

        func digest(_ bytes: [UInt8]) -> [UInt8] {
            switch self {
            case .sha1: Array(Insecure.SHA1.hash(data: bytes))
            case .sha256: Array(SHA256.hash(data: bytes))
            case .sha384: Array(SHA384.hash(data: bytes))
            case .sha512: Array(SHA512.hash(data: bytes))
            }
        }

        func hmac(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
            let key = SymmetricKey(data: key)
            return switch self {
            case .sha1: Array(HMAC<Insecure.SHA1>.authenticationCode(for: message, using: key))
            case .sha256: Array(HMAC<SHA256>.authenticationCode(for: message, using: key))
            case .sha384: Array(HMAC<SHA384>.authenticationCode(for: message, using: key))
            case .sha512: Array(HMAC<SHA512>.authenticationCode(for: message, using: key))
            }
        }
    }

    /// The password as PKCS#12 wants it: UTF-16 big-endian with a two-byte terminator; nil stands for "no password"
    /// (an empty P, which some writers use for an empty password).
    static func bmpPassword(_ password: String?) -> [UInt8] {
        guard let password else { return [] }
        return password.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] } + [0, 0]
    }

    static func derive(_ purpose: Purpose, password: [UInt8], salt: [UInt8], iterations: Int, count: Int, hash: Hash)
        -> [UInt8]
    {
        let u = hash.outputSize, v = hash.blockSize
        func stretched(_ bytes: [UInt8]) -> [UInt8] {
            guard !bytes.isEmpty else { return [] }
            let length = v * ((bytes.count + v - 1) / v)
            return (0..<length).map { bytes[$0 % bytes.count] }
        }
        let d = [UInt8](repeating: purpose.rawValue, count: v)
        var i = stretched(salt) + stretched(password)
        var out: [UInt8] = []
        while out.count < count {
            var a = hash.digest(d + i)
            for _ in 1..<max(iterations, 1) { a = hash.digest(a) }
            out += a
            guard out.count < count, !i.isEmpty else { break }
            // I_j = (I_j + B + 1) mod 2^(8v), B being A repeated to v bytes.
            let b = (0..<v).map { a[$0 % u] }
            for block in stride(from: 0, to: i.count, by: v) {
                var carry: UInt16 = 1
                for k in stride(from: v - 1, through: 0, by: -1) {
                    let sum = UInt16(i[block + k]) + UInt16(b[k]) + carry
                    i[block + k] = UInt8(truncatingIfNeeded: sum)
                    carry = sum >> 8
                }
            }
        }
        return Array(out.prefix(count))
    }
}
