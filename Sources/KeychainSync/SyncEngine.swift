import Crypto
import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage
import KeychainSyncProtocol
import Logging
import NIOHTTP1
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// keychaind's side of sync (docs/SYNC.md): a keychain's synchronizable items reach the account on the server,
/// end-to-end encrypted, and what other devices wrote comes back. One round at a time per keychain; no lock of the
/// keychain is held while the network is waited for (each step is its own short transaction).
public final class SyncEngine: KeychainSyncing {
    private let rounds = Mutex<Set<String>>([])
    let logger: Logger
    let background = Mutex<SyncScheduler?>(nil)

    public init(logger: Logger = Logger(label: "keychaind.sync")) {
        self.logger = logger
    }

    public func perform(_ request: SyncRequest, on file: KeychainFile,
                        confirm: (String) -> ConfirmationResponse) throws(KeychainError) -> SyncReport {
        if case .status = request { return try state(of: file).report() }  // reads only: no turn needed
        // One operation at a time per keychain. A command waits its turn (a background round takes seconds at
        // most); the background scheduler passes (``performIfIdle(_:on:)``).
        try takeTurn(file.url.path, waiting: .seconds(60))
        defer {
            endTurn(file.url.path)
            background.withLock { $0 }?.accountsMayHaveChanged()
        }
        switch request {
        case .setUp(let server, let authorities, let token):
            return try setUp(server: server, certificateAuthorities: authorities, registrationToken: token, file: file)
        case .now:
            return try round(file: file, state: try member(of: file))
        case .status: return try state(of: file).report()
        case .join(let server, let authorities):
            return try join(server: server, certificateAuthorities: authorities, file: file)
        case .joinStatus: return try joinStatus(file: file, confirm: confirm)
        case .approve(let code): return try approve(code: code, file: file, confirm: confirm)
        case .removeDevice(let id): return try removeDevice(id: id, file: file)
        case .recover(let server, let key, let authorities):
            return try recover(server: server, recoveryKey: key, certificateAuthorities: authorities, file: file)
        case .leave:
            let report = try state(of: file).report()
            try file.removeSyncState()
            return report
        }
    }

    /// A round unless another operation on the keychain is under way (then nil).
    func roundIfIdle(on file: KeychainFile) throws(KeychainError) -> SyncReport? {
        guard (try? takeTurn(file.url.path, waiting: .zero)) != nil else { return nil }
        defer { endTurn(file.url.path) }
        return try round(file: file, state: try member(of: file))
    }

    private func takeTurn(_ path: String, waiting patience: Duration) throws(KeychainError) {
        let clock = ContinuousClock()
        let deadline = clock.now + patience
        while !rounds.withLock({ $0.insert(path).inserted }) {
            guard clock.now < deadline else {
                throw KeychainError(.interactionNotAllowed, "another sync operation on this keychain is under way")
            }
            usleep(50_000)
        }
    }

    private func endTurn(_ path: String) { _ = rounds.withLock { $0.remove(path) } }

    /// The state of a keychain that is a device of an account (not one still joining).
    func member(of file: KeychainFile) throws(KeychainError) -> SyncState {
        let state = try state(of: file)
        guard state.joinCode == nil else {
            throw KeychainError(.interactionNotAllowed,
                                "this device is still joining: approve it on a device that syncs (security sync-approve \(state.joinCode ?? ""))")
        }
        return state
    }

    func state(of file: KeychainFile) throws(KeychainError) -> SyncState {
        guard let secret = try file.syncState() else {
            throw KeychainError(.itemNotFound, "this keychain does not sync (security sync-setup --server URL)")
        }
        return try SyncState.decode(secret)
    }

    // MARK: - Setting up

    /// Creates the account with this device as its first: the device's keys, the first epoch's item key and a
    /// recovery key (returned once, kept nowhere), then a first round.
    private func setUp(server text: String, certificateAuthorities: Data?, registrationToken: SecretBytes?,
                       file: KeychainFile) throws(KeychainError) -> SyncReport
    {
        let token = registrationToken.flatMap { $0.unprotectedString() }
        if let token, token.isEmpty || token.utf8.contains(where: { $0 < 0x21 || $0 > 0x7e }) {
            throw KeychainError.param("a registration token is one word of printable characters")
        }
        let server = try SyncTransport.serverURL(text)
        try SyncTransport.checkAuthorities(certificateAuthorities)
        if let existing = try file.syncState() {
            let state = try SyncState.decode(existing)
            throw KeychainError(.duplicateItem, "this keychain already syncs with \(state.server)")
        }
        let account = Self.randomID(), device = Self.randomID()
        let signing = P256.Signing.PrivateKey()
        let agreement = Curve25519.KeyAgreement.PrivateKey()
        let recovery = RecoveryKey(account: account, seed: SymmetricKey(size: .bits256))
        let record = DeviceRecord(id: device, signingKey: signing.publicKey.x963Representation,
                                  agreementKey: agreement.publicKey.rawRepresentation)
        let genesis: SignedLogEntry
        do {
            genesis = try DeviceLogEntry(
                kind: .genesis, seq: 0, previous: Data(count: 32), account: account, device: record, epoch: 1,
                recoverySigningKey: recovery.signing.publicKey.x963Representation,
                recoveryAgreementKey: recovery.agreement.publicKey.rawRepresentation,
                time: Int64(Date().timeIntervalSince1970)
            ).signed(by: device, key: signing)
        } catch {
            throw KeychainError(.internalComponent, "the device log cannot be signed")
        }
        let transport = SyncTransport(server: server, device: device, key: signing,
                                      certificateAuthorities: certificateAuthorities)
        let itemKey = SymmetricKey(size: .bits256)
        // The first epoch's key, wrapped to the recovery key too: it can recover the account with every device lost.
        guard let share = try? KeyShare.wrap(itemKey, account: account, epoch: 1, to: recovery.record, signer: device,
                                             signingKey: signing),
              let body = try? JSONEncoder().encode(AccountCreation(account: account, device: record, genesis: genesis,
                                                                   shares: [share]))
        else { throw KeychainError(.internalComponent, "the account cannot be described") }
        let reply = try transport.send(.POST, "/v1/accounts", body: body,
                                       headers: token.map { [(syncRegistrationTokenHeader, $0)] } ?? [])
        guard reply.status == 201 else { throw SyncTransport.failure(reply, doing: "create the account") }
        let state = SyncState(
            server: server.absoluteString, account: account, device: device,
            signingKey: signing.rawRepresentation, agreementKey: agreement.rawRepresentation, epoch: 1,
            epochKeys: [1: itemKey.withUnsafeBytes { Data($0) }], cursor: 0, items: [:],
            log: [genesis], lastSync: nil, joinCode: nil, certificateAuthorities: certificateAuthorities)
        try file.saveSyncState(state.encoded())
        logger.info("sync.account.created", metadata: ["server": "\(server.absoluteString)"])
        // No round here: whatever happens to the first round, the recovery key reaches the user (`security`
        // runs the round next).
        return state.report(recoveryKey: recovery.display)  // its only copy: the user's
    }

    static func randomID() -> Data { SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) } }

    // MARK: - A round

    /// Takes every change the server has after this device's cursor, then sends what changed here. What one step
    /// took is stored with the state in one transaction, so a round cut short at any point resumes correctly.
    func round(file: KeychainFile, state start: SyncState) throws(KeychainError) -> SyncReport {
        var state = start
        let transport = try SyncTransport(state)
        // The device log first: it must extend what this device verified, and still hold this device.
        let log = try verifiedLog(state: &state, transport: transport)
        guard log.devices[state.device] != nil else {
            throw KeychainError(.authFailed, "this device was removed from the sync account")
        }
        if log.epoch != state.epoch { try takeEpoch(log, state: &state, transport: transport) }
        var totals = SyncReport(server: state.server, account: state.account.hexString,
                                device: state.device.hexString, epoch: Int(state.epoch))
        try pull(file: file, state: &state, transport: transport, totals: &totals)
        try push(file: file, state: &state, transport: transport, totals: &totals)
        state.lastSync = Date().timeIntervalSince1970
        try file.saveSyncState(state.encoded())
        totals.items = state.items.count
        totals.lastSync = state.lastSync
        totals.devices = log.devices.count
        return totals
    }

    private func pull(file: KeychainFile, state: inout SyncState, transport: SyncTransport,
                      totals: inout SyncReport) throws(KeychainError)
    {
        var full = false  // the server forgot tombstones this device has not seen: take everything, by id
        var seen = Set<String>()
        while true {
            let reply = try transport.send(.GET, "/v1/accounts/\(state.account.hexString)/changes?after=\(state.cursor)&limit=\(SyncLimits.maxPage)")
            if reply.status == 410 && !full {
                logger.info("sync.resync", metadata: ["cursor": "\(state.cursor)"])
                full = true
                state.cursor = 0
                continue
            }
            guard reply.status == 200 else { throw SyncTransport.failure(reply, doing: "list changes") }
            let page = try SyncTransport.decode(ChangePage.self, reply)
            guard page.changes.allSatisfy({ $0.seq > state.cursor }), page.last >= state.cursor,
                  page.changes.count <= SyncLimits.maxPage
            else { throw KeychainError.decode("the sync server's changes go backwards") }
            var incoming: [IncomingSyncChange] = []
            var versions: [String: Int64] = [:]
            for change in page.changes {
                let key = change.id.hexString
                seen.insert(key)
                guard let taken = try take(change, state: state) else { continue }
                incoming.append(taken)
                versions[key] = change.version
            }
            state.cursor = page.last  // stored only with what the page brought, in one transaction
            if full && !page.more {
                // Everything the server has was listed. What this device tracks and the server no longer lists may
                // have been deleted while this device was away longer than tombstones are kept, or the server may
                // be lying: nothing is deleted on its word. Those items go up again as new (a deletion older than
                // the horizon can come back; an item is never lost).
                for key in state.items.keys where !seen.contains(key) { state.items[key] = nil }
            }
            try apply(incoming, versions: versions, to: &state, file: file, totals: &totals)
            if !page.more { return }
        }
    }

    /// An incoming change as this keychain takes it: nil when this device has it already (its own write coming
    /// back). Refuses what a trusted device would never have sent and a version older than one already taken.
    private func take(_ change: ItemChange, state: SyncState) throws(KeychainError) -> IncomingSyncChange? {
        guard change.id.count == SyncLimits.idLength, let id = UUID(data: change.id) else {
            throw KeychainError.decode("the sync server sent a malformed item id")
        }
        let known = state.items[change.id.hexString]?.version ?? state.deleted?[change.id.hexString]
        if let known {
            guard change.version >= known else {
                throw KeychainError.decode("the sync server sent an older version of an item than this device has")
            }
            if change.version == known { return nil }
        }
        // Sealed under an epoch older than the account's: from a device that was removed (or a forgery with its
        // key). Not taken; the devices of the account write under the current epoch only.
        if change.epoch < state.epoch { return nil }
        guard let ciphertext = change.ciphertext, let key = state.epochKey(change.epoch) else {
            throw KeychainError.decode("the sync server sent an item of an epoch this device has no key for")
        }
        if change.deleted {
            guard ItemCipher.isTombstone(ciphertext, epochKey: key, account: state.account, item: change.id,
                                         epoch: change.epoch, version: change.version)
            else { throw KeychainError.decode("a deletion from the sync server is not one a device of the account made") }
            return .deleted(id: id)
        }
        let plaintext: Data
        do {
            plaintext = try ItemCipher.open(ciphertext, epochKey: key, account: state.account, item: change.id,
                                            epoch: change.epoch, version: change.version)
        } catch {
            throw KeychainError.decode("an item from the sync server does not open: altered, moved or replayed")
        }
        return .item(id: id, record: SecretBytes(plaintext))
    }

    /// Records what a transaction took: each item's server version with its new generation here; items displaced
    /// or refused by the lower-id rule stay tracked with a generation no row has, so the next send deletes them on
    /// the server too.
    private static func track(_ result: SyncApplication, versions: [String: Int64], deletions: Set<String>,
                              in state: inout SyncState) {
        for (key, version) in versions {
            guard let id = UUID(hexString: key) else { continue }
            if version < 0 {
                state.items[key] = nil
            } else if deletions.contains(key) {
                state.items[key] = nil
                state.rememberDeleted(key, version: version)
            } else if let generation = result.generations[id] {
                state.items[key] = SyncState.Tracked(version: version, generation: generation)
            } else if result.refused.contains(id) {
                state.items[key] = SyncState.Tracked(version: version, generation: -1)
            } else if result.unusable.contains(id) {
                state.items[key] = nil
            } else {
                state.items[key] = nil  // deleted here (or was not here)
            }
        }
    }

    private func push(file: KeychainFile, state: inout SyncState, transport: SyncTransport,
                      totals: inout SyncReport) throws(KeychainError)
    {
        let here = try file.synchronizableItems()
        var generations: [String: Int64] = [:]
        for item in here { generations[item.id.data.hexString] = item.generation }
        let changed = here.filter { state.items[$0.id.data.hexString]?.generation != $0.generation }.map(\.id)
        let gone = state.items.filter { generations[$0.key] == nil }
        guard let epochKey = state.epochKey(state.epoch) else {
            throw KeychainError.decode("this device has no key for the account's current epoch")
        }
        var lost: [ItemChange] = []  // writes the server refused: its copy is taken here
        let base = "/v1/accounts/\(state.account.hexString)/items/"
        for batch in stride(from: 0, to: changed.count, by: 64).map({ Array(changed[$0..<min($0 + 64, changed.count)]) }) {
            for item in try file.syncRecords(batch) {
                guard let record = item.record else { continue }
                let key = item.id.data.hexString
                let known = state.items[key]?.version ?? 0
                let ciphertext: Data
                do {
                    ciphertext = try record.withUnsafeBytes { bytes throws(ItemCipher.Failure) in
                        try ItemCipher.seal(Data(bytes), epochKey: epochKey, account: state.account, item: item.id.data,
                                            epoch: state.epoch, version: known + 1)
                    }
                } catch {
                    logger.warning("sync.item.too-large")
                    continue
                }
                guard let body = try? JSONEncoder().encode(ItemWrite(base: known, epoch: state.epoch, ciphertext: ciphertext))
                else { continue }
                let reply = try transport.send(.PUT, base + key, body: body)
                switch reply.status {
                case 200:
                    let accepted = try SyncTransport.decode(WriteAccepted.self, reply)
                    guard accepted.version == known + 1 else {
                        throw KeychainError.decode("the sync server assigned an unexpected version")
                    }
                    state.items[key] = SyncState.Tracked(version: accepted.version, generation: item.generation)
                    totals.sent += 1
                case 409:
                    totals.conflicts += 1
                    if let current = try SyncTransport.decode(WriteConflict.self, reply).current {
                        guard current.id == item.id.data, current.version > known else {
                            throw KeychainError.decode("the sync server answered a write with another item or an older version")
                        }
                        lost.append(current)
                    }
                default: throw SyncTransport.failure(reply, doing: "store an item")
                }
            }
            // What the server accepted is recorded batch by batch: a failure later in the round loses none of it.
            try file.saveSyncState(state.encoded())
        }
        for (key, tracked) in gone {
            guard let id = Data(hex: key),
                  let tombstone = try? ItemCipher.sealTombstone(epochKey: epochKey, account: state.account, item: id,
                                                                epoch: state.epoch, version: tracked.version + 1),
                  let body = try? JSONEncoder().encode(ItemWrite(base: tracked.version, epoch: state.epoch,
                                                                 ciphertext: tombstone))
            else { continue }
            let reply = try transport.send(.DELETE, base + key, body: body)
            switch reply.status {
            case 200:
                let accepted = try SyncTransport.decode(WriteAccepted.self, reply)
                state.items[key] = nil
                state.rememberDeleted(key, version: accepted.version)
                totals.sent += 1
            case 409:
                let current = try SyncTransport.decode(WriteConflict.self, reply).current
                if let current, current.id.hexString != key || current.version <= tracked.version {
                    throw KeychainError.decode("the sync server answered a delete with another item or an older version")
                }
                if let current, !current.deleted {
                    totals.conflicts += 1
                    lost.append(current)  // another device changed it first: it comes back here
                } else {
                    state.items[key] = nil
                }
            default: throw SyncTransport.failure(reply, doing: "delete an item")
            }
        }
        guard !lost.isEmpty else {
            try file.saveSyncState(state.encoded())
            return
        }
        var incoming: [IncomingSyncChange] = []
        var versions: [String: Int64] = [:]
        for change in lost {
            // Newer than what this device sent (checked above): the server's copy replaces it.
            if let taken = try take(change, state: state) {
                incoming.append(taken)
                versions[change.id.hexString] = change.deleted ? -1 : change.version
            }
        }
        try apply(incoming, versions: versions, to: &state, file: file, totals: &totals)
    }

    /// Takes `incoming` into the keychain and stores the state that records it, in one transaction; `state` is
    /// the new one only once that committed.
    private func apply(_ incoming: [IncomingSyncChange], versions: [String: Int64], to state: inout SyncState,
                       file: KeychainFile, totals: inout SyncReport) throws(KeychainError)
    {
        var deletions = Set<String>()
        for change in incoming { if case .deleted(let id) = change { deletions.insert(id.data.hexString) } }
        var next = state
        let applied = try file.applySync(incoming) { result throws(KeychainError) in
            Self.track(result, versions: versions, deletions: deletions, in: &next)
            return try next.encoded()
        }
        state = next
        totals.received += applied.written
        totals.deleted += applied.deleted
    }
}

/// The recovery key: the account's id and 32 random bytes, shown to the user once as twelve groups of eight hex
/// digits. A signing and an agreement key pair derive from it: it signs as a device of its own (to add a new device
/// after every device was lost) and receives each epoch's item key.
struct RecoveryKey {
    let account: Data
    let signing: P256.Signing.PrivateKey
    let agreement: Curve25519.KeyAgreement.PrivateKey
    let display: SecretBytes

    init(account: Data, seed: SymmetricKey) {
        self.account = account
        func derive(_ label: String) -> Data {
            HKDF<SHA256>.deriveKey(inputKeyMaterial: seed, salt: account,
                                   info: Data("keychain-sync-recovery-\(label)".utf8),
                                   outputByteCount: 32).withUnsafeBytes { Data($0) }
        }
        // A P-256 scalar from 32 uniform bytes is valid but for a negligible chance; hash again if not.
        var material = derive("signing")
        var signing = try? P256.Signing.PrivateKey(rawRepresentation: material)
        while signing == nil {
            material = Data(SHA256.hash(data: material))
            signing = try? P256.Signing.PrivateKey(rawRepresentation: material)
        }
        self.signing = signing!
        agreement = try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: derive("agreement"))
        let hex = (account + seed.withUnsafeBytes { Data($0) }).hexString
        var groups: [String] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 8)
            groups.append(String(hex[index..<next]))
            index = next
        }
        display = SecretBytes(utf8: groups.joined(separator: "-"))
    }

    /// The key as the user typed it (dashes and spaces ignored); nil when it is not one.
    init?(typed: SecretBytes) {
        guard let text = typed.unprotectedString() else { return nil }
        let hex = text.lowercased().filter { !"- \n\t".contains($0) }
        guard hex.count == 96, let bytes = Data(hex: hex) else { return nil }
        self.init(account: Data(bytes.prefix(16)), seed: SymmetricKey(data: bytes.suffix(32)))
    }

    var id: Data { VerifiedDeviceLog.recoveryID(signing.publicKey.x963Representation) }

    var record: DeviceRecord {
        DeviceRecord(id: id, signingKey: signing.publicKey.x963Representation,
                     agreementKey: agreement.publicKey.rawRepresentation)
    }
}

extension UUID {
    var data: Data { withUnsafeBytes(of: uuid) { Data($0) } }

    init?(data: Data) {
        guard data.count == 16 else { return nil }
        let u = Array(data)
        self.init(uuid: (u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                         u[14], u[15]))
    }

    init?(hexString: String) {
        guard let data = Data(hex: hexString) else { return nil }
        self.init(data: data)
    }
}
