import Crypto
import Foundation
import KeychainCore
import _CryptoExtras

/// The second wrap of an item key for items with `kSecAccessControlApplicationPassword`: the key is sealed under
/// scrypt(application password), then (by the caller) under the class key, so neither password alone opens it.
///
/// Layout: version 1 ‖ log2(N) ‖ r ‖ p ‖ salt (32) ‖ AES-GCM(APK, item key, aad).
enum ApplicationPasswordLayer {
    static func aad(header: FileHeader, uuid: Data, generation: Int64) -> [UInt8] {
        var aad = AAD("kc1/ap")
        aad.append(header.dbUUID)
        aad.append(uuid)
        aad.append(generation)
        return aad.bytes
    }

    static func wrap(_ itemKey: [UInt8], password: SecretBytes, kdf: KDFParameters, aad: [UInt8]) throws(KeychainError)
        -> [UInt8]
    {
        let salt = SymmetricKey.random().bytes
        let key = try derive(password, salt: salt, n: kdf.n, r: kdf.r, p: kdf.p)
        do {
            let sealed = try Sealing.seal(itemKey, key: key, aad: aad)
            return [1, UInt8(kdf.n.trailingZeroBitCount), UInt8(kdf.r), UInt8(kdf.p)] + salt + [UInt8](sealed)
        } catch {
            throw KeychainError(.internalComponent, "sealing failed")
        }
    }

    static func unwrap(_ blob: Data, password: SecretBytes, aad: [UInt8]) throws(KeychainError) -> Data {
        let bytes = [UInt8](blob)
        guard bytes.count > 36, bytes[0] == 1, bytes[1] >= 15, bytes[1] <= 20, bytes[2] >= 8, bytes[2] <= 16,
            bytes[3] >= 1, bytes[3] <= 4
        else { throw KeychainError.decode("application password layer") }
        let key = try derive(password, salt: Array(bytes[4..<36]), n: 1 << Int(bytes[1]), r: Int(bytes[2]),
                             p: Int(bytes[3]))
        return try Sealing.open(Data(bytes[36...]), key: key, aad: aad)
    }

    private static func derive(_ password: SecretBytes, salt: [UInt8], n: Int, r: Int, p: Int) throws(KeychainError)
        -> SymmetricKey
    {
        do {
            return try password.withUnsafeBytes { pw in
                try KDF.Scrypt.deriveKey(from: pw, salt: salt, outputByteCount: 32, rounds: n, blockSize: r,
                                         parallelism: p)
            }
        } catch {
            throw KeychainError(.internalComponent, "scrypt failed")
        }
    }
}
