import Crypto
import Foundation
import KeychainCore

/// The digest a signature algorithm signs, as one of swift-crypto's typed digests (its ECDSA and RSA calls take
/// only those, and RSA learns the hash for PKCS#1 v1.5 and PSS from the type).
///
/// A message is hashed here. A digest the caller made (Apple's `digest-…` algorithms) must become a typed digest
/// too, and swift-crypto has no public initialiser for one: its digests are plain structs of their bytes, so the
/// bytes are loaded into that layout, and ``available`` checks at first use, against real hashes, that the layout
/// still is what this relies on (if a future swift-crypto changes it, the `digest-…` algorithms report themselves
/// unsupported rather than sign the wrong thing).
struct TypedDigest {
    private let value: any Digest

    /// `orderBytes`: for ECDSA, the curve order's size in bytes (a short digest may be padded up to it).
    init(_ data: Data, input: KeyAlgorithm.SignatureInput, algorithm: KeyAlgorithm, orderBytes: Int? = nil)
        throws(KeychainError)
    {
        switch input {
        case .message(let hash):
            value = Self.hash(data, with: hash)
        case .digest(let hash):
            var bytes = [UInt8](data)
            if let hash, bytes.count != hash.byteCount {
                throw KeychainError(.param, "bad digest size for signing with algorithm \(algorithm.identifier)")
            }
            if hash == nil, let orderBytes, let padded = Self.ecdsaSize(for: bytes.count), padded <= orderBytes {
                // ECDSA reads a digest shorter than the curve's order as a number: leading zeros change nothing.
                bytes = [UInt8](repeating: 0, count: padded - bytes.count) + bytes
            }
            guard let loaded = Self.load(bytes) else {
                throw KeychainError(.param, "bad digest size for signing with algorithm \(algorithm.identifier)")
            }
            value = loaded
        }
    }

    func apply<R>(_ body: (any Digest) throws -> R) rethrows -> R { try body(value) }

    private static func hash(_ data: Data, with hash: KeyAlgorithm.Hash) -> any Digest {
        switch hash {
        case .sha1: Insecure.SHA1.hash(data: data)
        case .sha256, .sha224: SHA256.hash(data: data)  // SHA-224 never gets here (reported unsupported)
        case .sha384: SHA384.hash(data: data)
        case .sha512: SHA512.hash(data: data)
        }
    }

    /// The typed digest size a short digest of `count` bytes is padded to (nil: none, use it as it is).
    private static func ecdsaSize(for count: Int) -> Int? {
        [20, 32, 48, 64].contains(count) ? nil : [20, 32, 48, 64].first { $0 > count }
    }

    private static func load(_ bytes: [UInt8]) -> (any Digest)? {
        guard available else { return nil }
        return switch bytes.count {
        case 20: load(bytes, as: Insecure.SHA1Digest.self)
        case 32: load(bytes, as: SHA256Digest.self)
        case 48: load(bytes, as: SHA384Digest.self)
        case 64: load(bytes, as: SHA512Digest.self)
        default: nil
        }
    }

    private static func load<D: Digest>(_ bytes: [UInt8], as type: D.Type) -> D? {
        // A digest's storage is whole UInt64s (SHA-1: 24 bytes for 20), zero beyond its bytes.
        guard MemoryLayout<D>.size >= D.byteCount, bytes.count == D.byteCount, _isPOD(D.self) else { return nil }
        let storage = bytes + [UInt8](repeating: 0, count: MemoryLayout<D>.size - bytes.count)
        return storage.withUnsafeBytes { $0.loadUnaligned(as: D.self) }
    }

    /// Whether loading bytes gives the digest they are, for every type used (checked once, on real hashes).
    static let available: Bool = {
        let sample = Data("swift-keychain digest layout check".utf8)
        func same<D: Digest>(_ digest: D) -> Bool { load(Array(digest), as: D.self) == digest }
        return same(Insecure.SHA1.hash(data: sample)) && same(SHA256.hash(data: sample))
            && same(SHA384.hash(data: sample)) && same(SHA512.hash(data: sample))
    }()
}
