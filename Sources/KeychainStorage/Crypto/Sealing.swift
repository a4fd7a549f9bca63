import Crypto
import Foundation
import KeychainCore

/// AES-256-GCM with a random nonce and explicit associated data; the one AEAD the file uses.
enum Sealing {
    static func seal(_ plaintext: some DataProtocol, key: SymmetricKey, aad: [UInt8]) throws -> Data {
        try AES.GCM.seal(plaintext, using: key, nonce: AES.GCM.Nonce(), authenticating: aad).combined!
    }

    /// Opens a sealed blob; any failure (wrong key, altered bytes, other AAD) is `errSecDecode`.
    static func open(_ blob: Data, key: SymmetricKey, aad: [UInt8]) throws(KeychainError) -> Data {
        do {
            return try AES.GCM.open(AES.GCM.SealedBox(combined: blob), using: key, authenticating: aad)
        } catch {
            throw .decode("integrity check failed")
        }
    }

    static func hkdf(_ ikm: SymmetricKey, salt: some DataProtocol, info: [UInt8]) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: info, outputByteCount: 32)
    }

    static func mac(_ data: [UInt8], key: SymmetricKey) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: data, using: key))
    }
}

/// Builds associated data: a domain tag, then length-prefixed fields in a fixed order.
struct AAD {
    private(set) var bytes: [UInt8]
    init(_ domain: String) {
        bytes = []
        bytes.reserveCapacity(256)
        append(domain)
    }
    mutating func append(_ field: some Collection<UInt8>) {
        appendLength(field.count)
        bytes.append(contentsOf: field)
    }
    mutating func append(_ s: String) {
        var s = s
        s.withUTF8 { append($0) }
    }
    /// Data's bytes copied at once (through the generic overload, Data is read a byte at a time).
    mutating func append(_ data: Data) { data.withUnsafeBytes { append($0) } }
    mutating func append(_ n: Int64) { withUnsafeBytes(of: n.bigEndian) { append($0) } }
    mutating func append(_ u: UUID) { withUnsafeBytes(of: u.uuid) { append($0) } }
    mutating func append(_ field: UnsafeRawBufferPointer) {
        appendLength(field.count)
        bytes.append(contentsOf: field)
    }
    mutating func append(_ field: UnsafeBufferPointer<UInt8>) { append(UnsafeRawBufferPointer(field)) }
    private mutating func appendLength(_ count: Int) {
        withUnsafeBytes(of: UInt32(count).bigEndian) { bytes.append(contentsOf: $0) }
    }
}

extension SymmetricKey {
    static func random() -> SymmetricKey { SymmetricKey(size: .bits256) }
    var bytes: [UInt8] { withUnsafeBytes { Array($0) } }
}
