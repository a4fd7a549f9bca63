import Crypto
import Foundation

/// One entry of an account's device log (docs/SYNC-PROTOCOL.md "Device log"): which device joined or left, which
/// epoch is current, signed by a device that was already trusted (the first by itself). Each entry names the hash of
/// the one before it, so a server that drops, reorders or forks entries is caught by a device that checks the chain.
public struct DeviceLogEntry: Sendable, Equatable {
    public enum Kind: UInt8, Sendable {
        case genesis = 1, addDevice = 2, removeDevice = 3
    }

    public var kind: Kind
    public var seq: UInt32
    /// SHA-256 of the previous signed entry (``SignedLogEntry/chainHash``); 32 zero bytes for the first.
    public var previous: Data
    public var account: Data
    /// The device that joins or leaves.
    public var device: DeviceRecord
    /// The item-key epoch from this entry on.
    public var epoch: Int32
    /// The recovery key's public halves (genesis only; empty otherwise): it may sign as a device after a recovery.
    public var recoverySigningKey: Data
    public var recoveryAgreementKey: Data
    /// Seconds since 1970 on the writing device's clock (informational).
    public var time: Int64

    public init(kind: Kind, seq: UInt32, previous: Data, account: Data, device: DeviceRecord, epoch: Int32,
                recoverySigningKey: Data = Data(), recoveryAgreementKey: Data = Data(), time: Int64)
    {
        self.kind = kind
        self.seq = seq
        self.previous = previous
        self.account = account
        self.device = device
        self.epoch = epoch
        self.recoverySigningKey = recoverySigningKey
        self.recoveryAgreementKey = recoveryAgreementKey
        self.time = time
    }

    public var encoded: Data {
        var out = Data("keychain-sync-log-v1".utf8)
        out.append(kind.rawValue)
        withUnsafeBytes(of: seq.bigEndian) { out.append(contentsOf: $0) }
        for field in [previous, account, device.id, device.signingKey, device.agreementKey,
                      recoverySigningKey, recoveryAgreementKey] {
            withUnsafeBytes(of: UInt16(field.count).bigEndian) { out.append(contentsOf: $0) }
            out.append(field)
        }
        withUnsafeBytes(of: epoch.bigEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: time.bigEndian) { out.append(contentsOf: $0) }
        return out
    }

    public init?(encoded: Data) {
        var reader = Data(encoded)
        let magic = Data("keychain-sync-log-v1".utf8)
        guard reader.starts(with: magic) else { return nil }
        reader.removeFirst(magic.count)
        func take(_ n: Int) -> Data? {
            guard reader.count >= n else { return nil }
            defer { reader.removeFirst(n) }
            return Data(reader.prefix(n))
        }
        func integer<T: FixedWidthInteger>(_: T.Type) -> T? {
            take(MemoryLayout<T>.size).map { $0.reduce(T(0)) { $0 << 8 | T($1) } }
        }
        func field() -> Data? { integer(UInt16.self).flatMap { take(Int($0)) } }
        guard let kindByte = take(1), let kind = Kind(rawValue: kindByte[kindByte.startIndex]),
              let seq = integer(UInt32.self),
              let previous = field(), previous.count == 32,
              let account = field(), account.count == SyncLimits.idLength,
              let id = field(), id.count == SyncLimits.idLength,
              let signing = field(), let agreement = field(),
              let recoverySigning = field(), let recoveryAgreement = field(),
              let epoch = integer(Int32.self), let time = integer(Int64.self),
              reader.isEmpty
        else { return nil }
        self.init(kind: kind, seq: seq, previous: previous, account: account,
                  device: DeviceRecord(id: id, signingKey: signing, agreementKey: agreement), epoch: epoch,
                  recoverySigningKey: recoverySigning, recoveryAgreementKey: recoveryAgreement, time: time)
    }

    public func signed(by signer: Data, key: P256.Signing.PrivateKey) throws -> SignedLogEntry {
        let bytes = encoded
        return SignedLogEntry(entry: bytes, signer: signer, signature: try key.signature(for: bytes).rawRepresentation)
    }
}

extension SignedLogEntry {
    /// What the next entry names as `previous`.
    public var chainHash: Data {
        var hasher = SHA256()
        hasher.update(data: entry)
        hasher.update(data: signer)
        hasher.update(data: signature)
        return Data(hasher.finalize())
    }

    public func isSigned(by publicKey: Data) -> Bool {
        guard let key = try? P256.Signing.PublicKey(x963Representation: publicKey),
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        else { return false }
        return key.isValidSignature(signature, for: entry)
    }
}
