import Crypto
import Foundation
import KeychainCore
import _CryptoExtras

/// The header of a keychain file: what is needed to derive keys (CRYPTO-DESIGN §5).
struct FileHeader: Sendable {
    var dbUUID: UUID
    var dbSalt: Data
    var passwordSalt: Data
    var hasPassword: Bool
    var kdf: KDFParameters
    var keybagGeneration: Int64
}

/// Keys that need only the device key: blind indexes, manifest, device state, and the KEK of the Always classes.
struct DeviceKeys: Sendable {
    let deviceKEK: SymmetricKey
    let primaryIndex: BlindIndex
    let groupIndex: BlindIndex
    let accountIndex: BlindIndex
    let serviceIndex: BlindIndex
    let manifestKey: SymmetricKey
    let stateKey: SymmetricKey
    /// Format 2: each item class gets its own index space (see ``classIndex(_:kind:column:)``).
    private let classIndexKey: KeyedHash

    init(deviceKey: SymmetricKey, header: FileHeader) {
        func derive(_ label: String, uuid: Bool = false) -> SymmetricKey {
            var info = Array("kc1/\(label)".utf8)
            if uuid { withUnsafeBytes(of: header.dbUUID.uuid) { info.append(contentsOf: $0) } }
            return Sealing.hkdf(deviceKey, salt: header.dbSalt, info: info)
        }
        deviceKEK = derive("kek/dev", uuid: true)
        primaryIndex = BlindIndex(key: derive("bidx/primary"))
        groupIndex = BlindIndex(key: derive("bidx/agrp"))
        accountIndex = BlindIndex(key: derive("bidx/acct"))
        serviceIndex = BlindIndex(key: derive("bidx/svce"))
        manifestKey = derive("manifest")
        stateKey = derive("state")
        classIndexKey = KeyedHash(key: derive("bidx/class"))
    }

    /// The stored form of a group, account or service index (format 2): the format-1 value keyed once more with the
    /// item's class and column, so equal accounts of a generic and an internet password no longer share an index
    /// value. Computed from the format-1 value alone, so migrating needs no plaintext (and no unlock).
    func classIndex(_ v1: Data, kind: String, column: String) -> Data {
        v1.withUnsafeBytes { classIndex(v1: $0, kind: kind, column: column) }
    }

    /// ``classIndex(_:kind:column:)`` over the format-1 value's bytes. The keyed input is what ``AAD`` makes of
    /// ("kc2/bidx", kind, column, v1) (each field as its 32-bit big-endian length, then its bytes), written into
    /// one stack buffer: every find computes two of these, and the arrays and `Data` in between cost more than the
    /// hashing.
    private func classIndex(v1: UnsafeRawBufferPointer, kind: String, column: String) -> Data {
        var kind = kind, column = column
        return kind.withUTF8 { kind in
            column.withUTF8 { column in
                let domain = UnsafeRawBufferPointer(start: Self.classIndexDomain.utf8Start,
                                                    count: Self.classIndexDomain.utf8CodeUnitCount)
                let fields = [domain, UnsafeRawBufferPointer(kind), UnsafeRawBufferPointer(column), v1]
                let size = fields.reduce(0) { $0 + 4 + $1.count }
                return withUnsafeTemporaryAllocation(byteCount: size, alignment: 4) { buffer in
                    var offset = 0
                    for field in fields {
                        buffer.storeBytes(of: UInt32(field.count).bigEndian, toByteOffset: offset, as: UInt32.self)
                        offset += 4
                        if let base = field.baseAddress, !field.isEmpty {
                            (buffer.baseAddress! + offset).copyMemory(from: base, byteCount: field.count)
                        }
                        offset += field.count
                    }
                    return classIndexKey.index(UnsafeRawBufferPointer(buffer))
                }
            }
        }
    }

    private static let classIndexDomain: StaticString = "kc2/bidx"

    /// A group, account or service value's stored index: its format-1 code's first 16 bytes, keyed again with the
    /// class and column, with no `Data` or AAD array in between.
    private func classIndex(_ index: BlindIndex, _ bytes: [UInt8], kind: String, column: String) -> Data {
        index.withCode(bytes) { classIndex(v1: $0, kind: kind, column: column) }
    }

    func groupIndex(_ group: String, kind: String) -> Data {
        classIndex(groupIndex, Array(group.utf8), kind: kind, column: "group")
    }

    func accountIndex(_ bytes: [UInt8], kind: String) -> Data {
        classIndex(accountIndex, bytes, kind: kind, column: "account")
    }

    func serviceIndex(_ bytes: [UInt8], kind: String) -> Data {
        classIndex(serviceIndex, bytes, kind: kind, column: "service")
    }
}

/// A keyed blind index: HMAC-SHA256 truncated to 16 bytes.
struct BlindIndex: Sendable {
    private let keyed: KeyedHash

    init(key: SymmetricKey) { keyed = KeyedHash(key: key) }

    func callAsFunction(_ bytes: [UInt8]) -> Data { bytes.withUnsafeBytes { keyed.index($0) } }

    /// The index of `bytes` (the code's first 16 bytes) handed to `body` in place, not copied into a `Data`.
    func withCode<Result>(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        let code = bytes.withUnsafeBytes { keyed.authenticationCode($0) }
        return code.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0.prefix(16))) }
    }
}

/// HMAC-SHA256 (RFC 2104) with its key schedule done once: the inner and outer hashers already past the padded key,
/// so each code costs the message's hashing only. The same bytes as swift-crypto's `HMAC<SHA256>` (tested), without
/// its generic per-call work over `DataProtocol`, which cost several times the hashing itself: every find computes
/// four blind indexes, and they were a quarter of an in-process `SecItemCopyMatching`.
struct KeyedHash: Sendable {
    private let inner: SHA256
    private let outer: SHA256

    init(key: SymmetricKey) {
        var block = [UInt8](repeating: 0, count: SHA256.blockByteCount)
        key.withUnsafeBytes { key in
            if key.count > block.count {
                SHA256.hash(data: key).withUnsafeBytes { for (i, byte) in $0.enumerated() { block[i] = byte } }
            } else {
                for (i, byte) in key.enumerated() { block[i] = byte }
            }
        }
        var inner = SHA256()
        var outer = SHA256()
        var pad = block.map { $0 ^ 0x36 }
        pad.withUnsafeBytes { inner.update(bufferPointer: $0) }
        for i in pad.indices { pad[i] = block[i] ^ 0x5C }
        pad.withUnsafeBytes { outer.update(bufferPointer: $0) }
        for i in pad.indices {
            pad[i] = 0
            block[i] = 0
        }
        self.inner = inner
        self.outer = outer
    }

    func authenticationCode(_ message: UnsafeRawBufferPointer) -> SHA256.Digest {
        var inner = self.inner  // copies: the keyed states stay as they are
        inner.update(bufferPointer: message)
        var outer = self.outer
        inner.finalize().withUnsafeBytes { outer.update(bufferPointer: $0) }
        return outer.finalize()
    }

    /// The first 16 bytes of the code: a blind index as stored.
    func index(_ message: UnsafeRawBufferPointer) -> Data {
        authenticationCode(message).withUnsafeBytes { Data(bytes: $0.baseAddress!, count: 16) }
    }
}

enum KeyHierarchy {
    /// The KEK of the password classes: needs the password (through scrypt) and the device key.
    static func passwordKEK(password: SecretBytes?, header: FileHeader, deviceKey: SymmetricKey) throws(KeychainError)
        -> SymmetricKey
    {
        var info = Array("kc1/kek/pw".utf8)
        withUnsafeBytes(of: header.dbUUID.uuid) { info.append(contentsOf: $0) }
        guard header.hasPassword else {
            // A keychain without a password: the device alone protects it (a device without a passcode).
            info.append(contentsOf: Array("/none".utf8))
            return Sealing.hkdf(deviceKey, salt: header.dbSalt, info: info)
        }
        guard let password else { throw KeychainError(.authFailed, "a password is required") }
        guard header.kdf.isAcceptable else { throw KeychainError(.decode, "the file's KDF parameters are too weak") }
        let passwordKey: SymmetricKey
        do {
            passwordKey = try password.withUnsafeBytes { pw in
                try KDF.Scrypt.deriveKey(
                    from: pw, salt: header.passwordSalt, outputByteCount: 32, rounds: header.kdf.n,
                    blockSize: header.kdf.r, parallelism: header.kdf.p)
            }
        } catch {
            throw KeychainError(.internalComponent, "scrypt failed")
        }
        return Sealing.hkdf(passwordKey, salt: deviceKey.bytes, info: info)
    }

    static func classKeyAAD(_ accessibility: Accessibility, keyGeneration: Int64, header: FileHeader) -> [UInt8] {
        var aad = AAD("kc1/ck")
        aad.append(header.dbUUID)
        aad.append(accessibility.rawValue)
        aad.append(keyGeneration)
        aad.append(header.keybagGeneration)
        aad.append(Int64(header.kdf.id))
        aad.append(Int64(header.kdf.n))
        aad.append(Int64(header.kdf.r))
        aad.append(Int64(header.kdf.p))
        aad.append(header.passwordSalt)
        aad.append(Int64(header.hasPassword ? 1 : 0))
        return aad.bytes
    }

    static func metadataKey(classKey: SymmetricKey, header: FileHeader) -> SymmetricKey {
        Sealing.hkdf(classKey, salt: header.dbSalt, info: Array("kc1/meta".utf8))
    }

    /// Classes whose key is wrapped by the device KEK; the rest need the password KEK.
    static func isDeviceClass(_ a: Accessibility) -> Bool { a.protection == .deviceOnly }

    /// The classes a keychain holds keys for: WhenPasscodeSet only while it has a password.
    static func classes(hasPassword: Bool) -> [Accessibility] {
        Accessibility.allCases.filter { hasPassword || $0 != .whenPasscodeSetThisDeviceOnly }
    }
}
