import Crypto
import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage
import KeychainSyncProtocol
import NIOHTTP1

/// Devices: joining an account, approving a device, and the device log every round checks.
extension SyncEngine {
    /// Asks the server to let this device join an account; the code goes to a device that already syncs.
    func join(server text: String, certificateAuthorities: Data?, file: KeychainFile) throws(KeychainError)
        -> SyncReport
    {
        let server = try SyncTransport.serverURL(text)
        try SyncTransport.checkAuthorities(certificateAuthorities)
        if let existing = try file.syncState() {
            let state = try SyncState.decode(existing)
            guard state.joinCode != nil else {
                throw KeychainError(.duplicateItem, "this keychain already syncs with \(state.server)")
            }
            return state.report()  // already waiting: the same code
        }
        let device = Self.randomID()
        let signing = P256.Signing.PrivateKey()
        let agreement = Curve25519.KeyAgreement.PrivateKey()
        let record = DeviceRecord(id: device, signingKey: signing.publicKey.x963Representation,
                                  agreementKey: agreement.publicKey.rawRepresentation)
        let transport = SyncTransport(server: server, device: device, key: signing,
                                      certificateAuthorities: certificateAuthorities)
        guard let body = try? JSONEncoder().encode(JoinRequest(device: record)) else {
            throw KeychainError(.internalComponent, "the join cannot be described")
        }
        let reply = try transport.send(.POST, "/v1/joins", body: body)
        guard reply.status == 201 else { throw SyncTransport.failure(reply, doing: "start a join") }
        let ticket = try SyncTransport.decode(JoinTicket.self, reply)
        let state = SyncState(server: server.absoluteString, account: Data(), device: device,
                              signingKey: signing.rawRepresentation, agreementKey: agreement.rawRepresentation,
                              epoch: 0, epochKeys: [:], cursor: 0, items: [:], log: [], lastSync: nil,
                              joinCode: ticket.code, certificateAuthorities: certificateAuthorities)
        try file.saveSyncState(state.encoded())
        return state.report()
    }

    /// Where this device's join stands. Once a trusted device claimed it, the words to compare; once approved,
    /// the account's log (verified from its first entry, and extending the log the words were made from), the item
    /// keys (each share signed by a device of that log), then a first round.
    func joinStatus(file: KeychainFile, confirm: (String) -> ConfirmationResponse) throws(KeychainError) -> SyncReport {
        var state = try state(of: file)
        guard let code = state.joinCode, let record = state.record else { return state.report() }
        let transport = try SyncTransport(state)
        let reply = try transport.send(.GET, "/v1/joins/\(code)")
        if reply.status == 410 || reply.status == 404 {
            try file.removeSyncState()
            throw KeychainError(.itemNotFound, "the join code \(code) expired; run security sync-join again")
        }
        guard reply.status == 200 else { throw SyncTransport.failure(reply, doing: "tell how the join stands") }
        let status = try SyncTransport.decode(JoinStatus.self, reply)
        var report = state.report()
        guard status.device == record else { throw KeychainError.decode("the sync server changed this device's keys") }
        guard let claim = status.claim else { return report }
        let claimed = try Self.verify(claim.log, account: claim.account)
        guard claimed.devices[claim.approver] != nil else {
            throw KeychainError.decode("the device that claims this join is not in the account it names")
        }
        report.words = ConfirmationWords.words(account: claim.account, logHead: claimed.head, device: record)
        guard status.approved else { return report }
        // This side confirms too: a server that claimed the join itself, for an account of its own, shows words
        // that no device of the user's showed.
        let question = "This device asks to sync this keychain with another device's account. Allow it only if the "
            + "other device showed these words: \(report.words.joined(separator: " "))"
        switch confirm(question) {
        case .allow, .alwaysAllow: break
        case .deny, .cancelled: throw KeychainError(.authFailed, "the join was not allowed on this device")
        case .unavailable: throw KeychainError.interactionNotAllowed("nobody to ask whether the words match")
        }

        // In: the account's whole log, as the devices' signatures make it.
        state.account = claim.account
        let entries = try fetchLog(state: state, transport: transport)
        let log = try Self.verify(entries, account: claim.account)
        guard entries.count > claim.log.count, Array(entries.prefix(claim.log.count)) == claim.log else {
            throw KeychainError.decode("the sync server's device log is not the one the words were made from")
        }
        guard log.devices[state.device] == record,
              log.approvals.contains(where: { $0.device == state.device && $0.by == claim.approver })
        else { throw KeychainError.decode("the device log does not add this device by the device that claimed it") }
        let sharesReply = try transport.send(.GET, "/v1/accounts/\(claim.account.hexString)/shares")
        guard sharesReply.status == 200 else { throw SyncTransport.failure(sharesReply, doing: "send the item keys") }
        let agreement = try state.agreement()
        for share in try SyncTransport.decode(KeyShares.self, sharesReply).shares {
            guard let key = Self.open(share, log: log, account: claim.account, recipient: state.device,
                                      with: agreement)
            else { throw KeychainError.decode("a key share is not from a device of the account") }
            state.epochKeys[share.epoch] = key.withUnsafeBytes { Data($0) }
        }
        guard state.epochKeys[log.epoch] != nil else {
            throw KeychainError.decode("no device gave this device the item key of the current epoch")
        }
        state.epoch = log.epoch
        state.log = entries
        state.joinCode = nil
        try file.saveSyncState(state.encoded())
        var done = try round(file: file, state: state)
        done.words = report.words
        done.joined = true
        return done
    }

    /// Lets the device waiting with `code` in, after the user, asked where this program cannot answer, confirms
    /// that the new device shows the same words.
    func approve(code text: String, file: KeychainFile, confirm: (String) -> ConfirmationResponse)
        throws(KeychainError) -> SyncReport
    {
        let code = text.uppercased().filter { $0 != "-" && $0 != " " }
        guard code.count == 10 else { throw KeychainError.param("a join code is ten characters") }
        var state = try member(of: file)
        let transport = try SyncTransport(state)
        let log = try verifiedLog(state: &state, transport: transport)
        guard let body = try? JSONEncoder().encode(JoinClaim(account: state.account, approver: state.device,
                                                             log: state.log))
        else { throw KeychainError(.internalComponent, "the claim cannot be described") }
        let reply = try transport.send(.POST, "/v1/joins/\(code)/claim", body: body)
        guard reply.status == 200 else { throw SyncTransport.failure(reply, doing: "find the join \(code)") }
        let joining = try SyncTransport.decode(JoinStatus.self, reply).device
        guard joining.id.count == SyncLimits.idLength, log.devices[joining.id] == nil,
              (try? P256.Signing.PublicKey(x963Representation: joining.signingKey)) != nil,
              (try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: joining.agreementKey)) != nil
        else { throw KeychainError.decode("the joining device's keys are malformed") }
        let words = ConfirmationWords.words(account: state.account, logHead: log.head, device: joining)
        let question = "A new device asks to sync this keychain's synchronizable items. Allow it only if the new "
            + "device shows these words: \(words.joined(separator: " "))"
        switch confirm(question) {
        case .allow, .alwaysAllow: break
        case .deny, .cancelled: throw KeychainError(.authFailed, "the new device was not allowed")
        case .unavailable: throw KeychainError.interactionNotAllowed("nobody to ask whether the new device may join")
        }
        let signing = try state.signing()
        let entry: SignedLogEntry
        var shares: [KeyShare] = []
        do {
            entry = try DeviceLogEntry(kind: .addDevice, seq: UInt32(state.log.count), previous: log.head,
                                       account: state.account, device: joining, epoch: state.epoch,
                                       time: Int64(Date().timeIntervalSince1970)).signed(by: state.device, key: signing)
            for (epoch, key) in state.epochKeys.sorted(by: { $0.key < $1.key }) {
                shares.append(try KeyShare.wrap(SymmetricKey(data: key), account: state.account, epoch: epoch,
                                                to: joining, signer: state.device, signingKey: signing))
            }
        } catch {
            throw KeychainError(.internalComponent, "the new device's entry cannot be made")
        }
        guard let addition = try? JSONEncoder().encode(DeviceAddition(entry: entry, shares: shares, join: code)) else {
            throw KeychainError(.internalComponent, "the new device's entry cannot be described")
        }
        let added = try transport.send(.POST, "/v1/accounts/\(state.account.hexString)/devices", body: addition)
        guard added.status == 201 else { throw SyncTransport.failure(added, doing: "add the device") }
        state.log.append(entry)
        try file.saveSyncState(state.encoded())
        var report = state.report()
        report.words = words
        return report
    }

    /// A share's key, if the share is for `recipient` of `account` and signed by a device the log holds now (or by
    /// the recovery key): a removed device's shares count for nothing.
    static func open(_ share: KeyShare, log: VerifiedDeviceLog, account: Data, recipient: Data,
                     with agreement: Curve25519.KeyAgreement.PrivateKey) -> SymmetricKey? {
        let recovery = VerifiedDeviceLog.recoveryID(log.recoverySigningKey)
        let signer = share.signer == recovery ? log.recoverySigningKey : log.devices[share.signer]?.signingKey
        guard share.account == account, share.recipient == recipient, let signer, share.isSigned(by: signer) else {
            return nil
        }
        return try? share.open(with: agreement)
    }

    // MARK: - The device log

    func fetchLog(state: SyncState, transport: SyncTransport) throws(KeychainError) -> [SignedLogEntry] {
        let reply = try transport.send(.GET, "/v1/accounts/\(state.account.hexString)/devices")
        guard reply.status == 200 else { throw SyncTransport.failure(reply, doing: "list the devices") }
        return try SyncTransport.decode(DeviceLog.self, reply).entries
    }

    /// The server's device log, verified from its first entry, that must extend the one this device verified
    /// before (a log rolled back, cut or forked by the server is refused); stored in `state`.
    func verifiedLog(state: inout SyncState, transport: SyncTransport) throws(KeychainError) -> VerifiedDeviceLog {
        let entries = try fetchLog(state: state, transport: transport)
        guard entries.count >= state.log.count, Array(entries.prefix(state.log.count)) == state.log else {
            throw KeychainError.decode("the sync server's device log does not extend the one this device verified")
        }
        let log = try Self.verify(entries, account: state.account)
        state.log = entries
        return log
    }

    static func verify(_ entries: [SignedLogEntry], account: Data) throws(KeychainError) -> VerifiedDeviceLog {
        switch Result(catching: { () throws(VerifiedDeviceLog.Failure) in
            try VerifiedDeviceLog(entries, account: account)
        }) {
        case .success(let log): return log
        case .failure(.broken(let reason)): throw KeychainError.decode(reason)
        }
    }
}

extension SyncTransport {
    init(_ state: SyncState) throws(KeychainError) {
        self.init(server: try SyncTransport.serverURL(state.server), device: state.device, key: try state.signing(),
                  certificateAuthorities: state.certificateAuthorities)
    }
}
