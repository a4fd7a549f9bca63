import Crypto
import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage
import KeychainSyncProtocol
import NIOHTTP1

/// Epochs: removing a device starts one (a new item key for the devices that stay, items sealed again under it),
/// and recovering the account with the recovery key.
extension SyncEngine {
    /// Removes device `id` (hex) from the account: a signed entry with the next epoch, its item key wrapped to
    /// every other device and to the recovery key, then every item sent again under it. The server refuses the
    /// removed device from then on; even with the server's whole database and its own old keys it cannot open
    /// what is written afterwards.
    func removeDevice(id text: String, file: KeychainFile) throws(KeychainError) -> SyncReport {
        guard let id = Data(hex: text.lowercased()), id.count == SyncLimits.idLength else {
            throw KeychainError.param("a device id is 32 hex digits (security sync-status lists them)")
        }
        var state = try member(of: file)
        guard id != state.device else {
            throw KeychainError.param("a device does not remove itself: run security sync-leave on it, or remove it from another")
        }
        let transport = try SyncTransport(state)
        let log = try verifiedLog(state: &state, transport: transport)
        if log.epoch != state.epoch { try takeEpoch(log, state: &state, transport: transport) }
        guard let leaving = log.devices[id] else { throw KeychainError(.itemNotFound, "no such device in the account") }
        let epoch = state.epoch + 1
        let key = SymmetricKey(size: .bits256)
        let signing = try state.signing()
        let recovery = DeviceRecord(id: VerifiedDeviceLog.recoveryID(log.recoverySigningKey),
                                    signingKey: log.recoverySigningKey, agreementKey: log.recoveryAgreementKey)
        let entry: SignedLogEntry
        var shares: [KeyShare] = []
        do {
            entry = try DeviceLogEntry(kind: .removeDevice, seq: UInt32(state.log.count), previous: log.head,
                                       account: state.account, device: leaving, epoch: epoch,
                                       time: Int64(Date().timeIntervalSince1970)).signed(by: state.device, key: signing)
            for staying in log.devices.values where staying.id != id {
                shares.append(try KeyShare.wrap(key, account: state.account, epoch: epoch, to: staying,
                                                signer: state.device, signingKey: signing))
            }
            if recovery.agreementKey.count == 32 {
                shares.append(try KeyShare.wrap(key, account: state.account, epoch: epoch, to: recovery,
                                                signer: state.device, signingKey: signing))
            }
        } catch {
            throw KeychainError(.internalComponent, "the removal cannot be made")
        }
        guard let body = try? JSONEncoder().encode(DeviceAddition(entry: entry, shares: shares, join: nil)) else {
            throw KeychainError(.internalComponent, "the removal cannot be described")
        }
        let reply = try transport.send(.POST, "/v1/accounts/\(state.account.hexString)/devices", body: body)
        guard reply.status == 201 else { throw SyncTransport.failure(reply, doing: "remove the device") }
        state.log.append(entry)
        state.epoch = epoch
        state.epochKeys[epoch] = key.withUnsafeBytes { Data($0) }
        // Every item goes up again under the new key (a generation no row has marks it changed).
        for tracked in state.items.keys { state.items[tracked]?.generation = -2 }
        try file.saveSyncState(state.encoded())
        var report = try round(file: file, state: state)
        if let saved = try file.syncState() { report.deviceList = try SyncState.decode(saved).report().deviceList }
        return report
    }

    /// The log moved to another epoch (a device was removed by another device): the new item key, from a share
    /// wrapped to this device and signed by a device of the verified log (or the recovery key).
    func takeEpoch(_ log: VerifiedDeviceLog, state: inout SyncState, transport: SyncTransport) throws(KeychainError) {
        if state.epochKeys[log.epoch] == nil {
            let reply = try transport.send(.GET, "/v1/accounts/\(state.account.hexString)/shares")
            guard reply.status == 200 else { throw SyncTransport.failure(reply, doing: "send the item keys") }
            let agreement = try state.agreement()
            for share in try SyncTransport.decode(KeyShares.self, reply).shares where state.epochKeys[share.epoch] == nil {
                guard let key = Self.open(share, log: log, account: state.account, recipient: state.device,
                                          with: agreement)
                else { throw KeychainError.decode("a key share is not from a device of the account") }
                state.epochKeys[share.epoch] = key.withUnsafeBytes { Data($0) }
            }
        }
        guard state.epochKeys[log.epoch] != nil else {
            throw KeychainError.decode("no device gave this device the item key of epoch \(log.epoch)")
        }
        state.epoch = log.epoch
    }

    /// Joins the account as a new device with the recovery key: the key's own signing key (named in the log's first
    /// entry) adds this device, and the item keys wrapped to the recovery key are wrapped again to this device.
    func recover(server text: String, recoveryKey typed: SecretBytes, certificateAuthorities: Data?,
                 file: KeychainFile) throws(KeychainError) -> SyncReport
    {
        let server = try SyncTransport.serverURL(text)
        try SyncTransport.checkAuthorities(certificateAuthorities)
        guard let recovery = RecoveryKey(typed: typed) else {
            throw KeychainError.param("that is not a recovery key (twelve groups of eight hex digits)")
        }
        if let existing = try file.syncState(), try SyncState.decode(existing).joinCode == nil {
            throw KeychainError(.duplicateItem, "this keychain already syncs")
        }
        let asRecovery = SyncTransport(server: server, device: recovery.id, key: recovery.signing,
                                       certificateAuthorities: certificateAuthorities)
        let logReply = try asRecovery.send(.GET, "/v1/accounts/\(recovery.account.hexString)/devices")
        guard logReply.status == 200 else { throw SyncTransport.failure(logReply, doing: "recognise the recovery key") }
        let entries = try SyncTransport.decode(DeviceLog.self, logReply).entries
        let log = try Self.verify(entries, account: recovery.account)
        guard log.recoverySigningKey == recovery.signing.publicKey.x963Representation,
              log.recoveryAgreementKey == recovery.agreement.publicKey.rawRepresentation
        else { throw KeychainError.decode("the account's first entry names another recovery key") }
        let sharesReply = try asRecovery.send(.GET, "/v1/accounts/\(recovery.account.hexString)/shares")
        guard sharesReply.status == 200 else { throw SyncTransport.failure(sharesReply, doing: "send the item keys") }
        var keys: [Int32: SymmetricKey] = [:]
        for share in try SyncTransport.decode(KeyShares.self, sharesReply).shares {
            // Only a device the log holds now may have given it: a removed device's shares are passed over (the
            // first device's share of epoch 1 among them, once that device is gone and a later epoch exists).
            guard let key = Self.open(share, log: log, account: recovery.account, recipient: recovery.id,
                                      with: recovery.agreement)
            else { continue }
            keys[share.epoch] = key
        }
        guard keys[log.epoch] != nil else {
            throw KeychainError.decode("the recovery key was not given the item key of the current epoch")
        }
        // This device, added by the recovery key.
        let device = Self.randomID()
        let signing = P256.Signing.PrivateKey()
        let agreement = Curve25519.KeyAgreement.PrivateKey()
        let record = DeviceRecord(id: device, signingKey: signing.publicKey.x963Representation,
                                  agreementKey: agreement.publicKey.rawRepresentation)
        let entry: SignedLogEntry
        var shares: [KeyShare] = []
        do {
            entry = try DeviceLogEntry(kind: .addDevice, seq: UInt32(entries.count), previous: log.head,
                                       account: recovery.account, device: record, epoch: log.epoch,
                                       time: Int64(Date().timeIntervalSince1970)).signed(by: recovery.id, key: recovery.signing)
            for (epoch, key) in keys.sorted(by: { $0.key < $1.key }) {
                shares.append(try KeyShare.wrap(key, account: recovery.account, epoch: epoch, to: record,
                                                signer: recovery.id, signingKey: recovery.signing))
            }
        } catch {
            throw KeychainError(.internalComponent, "the new device's entry cannot be made")
        }
        guard let body = try? JSONEncoder().encode(DeviceAddition(entry: entry, shares: shares, join: nil)) else {
            throw KeychainError(.internalComponent, "the new device's entry cannot be described")
        }
        let added = try asRecovery.send(.POST, "/v1/accounts/\(recovery.account.hexString)/devices", body: body)
        guard added.status == 201 else { throw SyncTransport.failure(added, doing: "add this device") }
        var epochKeys: [Int32: Data] = [:]
        for (epoch, key) in keys { epochKeys[epoch] = key.withUnsafeBytes { Data($0) } }
        let state = SyncState(server: server.absoluteString, account: recovery.account, device: device,
                              signingKey: signing.rawRepresentation, agreementKey: agreement.rawRepresentation,
                              epoch: log.epoch, epochKeys: epochKeys, cursor: 0, items: [:], log: entries + [entry],
                              lastSync: nil, joinCode: nil, certificateAuthorities: certificateAuthorities)
        if try file.syncState() != nil { try file.removeSyncState() }  // a join left waiting
        try file.saveSyncState(state.encoded())
        var report = try round(file: file, state: state)
        report.joined = true
        return report
    }
}
