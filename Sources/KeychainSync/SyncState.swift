import Crypto
import Foundation
import KeychainCore
import KeychainSyncProtocol

/// A keychain's sync state on this device, kept in the keychain itself (``KeychainFile/syncState()``: an item
/// of keychaind's own group, sealed under the keychain's keys like every item). JSON inside that sealed item.
struct SyncState: Codable, Sendable {
    /// What this device knows of one synchronizable item on the server.
    struct Tracked: Codable, Sendable, Equatable {
        /// The server's version of the item this device last sent or took.
        var version: Int64
        /// The item's generation here when it was sent or taken: another generation means it changed here since.
        var generation: Int64
    }

    var server: String
    var account: Data
    var device: Data
    /// P-256 signing key (raw scalar) and X25519 key-agreement key (raw): this device's, never leaving it.
    var signingKey: Data
    var agreementKey: Data
    var epoch: Int32
    /// The account's item key of each epoch this device holds.
    var epochKeys: [Int32: Data]
    /// The server's change number this device has taken everything up to.
    var cursor: Int64
    /// By item id (hex).
    var items: [String: Tracked]
    /// The device log as this device last verified it.
    var log: [SignedLogEntry]
    var lastSync: Double?
    /// While joining: the code the server gave; the account is unknown until a trusted device claims the join.
    var joinCode: String?
    /// Items deleted (by id, hex) with their tombstone's version: an older version of them is never taken again.
    var deleted: [String: Int64]? = nil
    /// PEM certificates that alone may vouch for the server (`--ca-file`); nil: the system's roots.
    var certificateAuthorities: Data? = nil

    /// At most this many deleted ids are remembered (the oldest versions are forgotten first).
    static let deletedMemory = 100_000

    mutating func rememberDeleted(_ key: String, version: Int64) {
        var all = deleted ?? [:]
        all[key] = max(all[key] ?? 0, version)
        if all.count > Self.deletedMemory {
            for (old, _) in all.sorted(by: { $0.value < $1.value }).prefix(all.count - Self.deletedMemory) {
                all[old] = nil
            }
        }
        deleted = all
    }

    var record: DeviceRecord? {
        guard let signing = try? P256.Signing.PrivateKey(rawRepresentation: signingKey),
              let agreement = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: agreementKey)
        else { return nil }
        return DeviceRecord(id: device, signingKey: signing.publicKey.x963Representation,
                            agreementKey: agreement.publicKey.rawRepresentation)
    }

    func agreement() throws(KeychainError) -> Curve25519.KeyAgreement.PrivateKey {
        guard let key = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: agreementKey) else {
            throw KeychainError.decode("the device's agreement key is damaged")
        }
        return key
    }

    static func decode(_ secret: SecretBytes) throws(KeychainError) -> SyncState {
        do {
            return try secret.withUnsafeBytes { try JSONDecoder().decode(SyncState.self, from: Data($0)) }
        } catch {
            throw KeychainError.decode("the keychain's sync state is damaged")
        }
    }

    func encoded() throws(KeychainError) -> SecretBytes {
        guard var bytes = try? Array(JSONEncoder().encode(self)) else {
            throw KeychainError(.internalComponent, "the sync state cannot be written")
        }
        return SecretBytes(consuming: &bytes)
    }

    func signing() throws(KeychainError) -> P256.Signing.PrivateKey {
        guard let key = try? P256.Signing.PrivateKey(rawRepresentation: signingKey) else {
            throw KeychainError.decode("the device's signing key is damaged")
        }
        return key
    }

    func epochKey(_ epoch: Int32) -> SymmetricKey? { epochKeys[epoch].map { SymmetricKey(data: $0) } }

    func report(recoveryKey: SecretBytes? = nil) -> SyncReport {
        var report = SyncReport(server: server, account: account.hexString, device: device.hexString,
                                epoch: Int(epoch), items: items.count, lastSync: lastSync, recoveryKey: recoveryKey)
        report.joinCode = joinCode
        if let verified = try? VerifiedDeviceLog(log, account: account) {
            report.devices = verified.devices.count
            let recovery = VerifiedDeviceLog.recoveryID(verified.recoverySigningKey)
            report.deviceList = verified.approvals.filter { verified.devices[$0.device] != nil }.map { approval in
                SyncDevice(id: approval.device.hexString,
                           approvedBy: approval.by == recovery ? "recovery" : approval.by.hexString,
                           isThisDevice: approval.device == device)
            }
        }
        return report
    }
}

extension SyncState: CustomStringConvertible, CustomDebugStringConvertible {
    /// Never the keys: an account, a device, an epoch and counts.
    var description: String {
        "SyncState(account: \(account.hexString), device: \(device.hexString), epoch: \(epoch), items: \(items.count))"
    }

    var debugDescription: String { description }
}
