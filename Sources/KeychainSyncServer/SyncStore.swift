import Foundation
import KeychainSyncProtocol
import Logging
import PostgresNIO

/// The server's state in PostgreSQL. Every write to an account runs in one transaction that first locks the account's
/// row, so the account's change counter (`seq`) is handed out and committed in order: a device that has read up to
/// seq N never misses a change numbered N or lower, whichever instance wrote it.
struct SyncStore: Sendable {
    let client: PostgresClient
    let logger: Logger
    /// Tombstones older than this are forgotten.
    let tombstoneHorizon: Int64

    enum WriteOutcome: Sendable, Equatable {
        case accepted(WriteAccepted)
        case conflict(ItemChange?)
        /// The account moved to a later epoch: a device learns it from the device log, then writes again.
        case staleEpoch(Int32)
        case accountFull
        case noAccount
        /// The request's nonce was used before: nothing was written.
        case replayed
    }

    enum CreateOutcome: Sendable { case created, exists }

    func ping() async throws {
        for try await _ in try await client.query("SELECT 1", logger: logger) {}
    }

    func createAccount(_ creation: AccountCreation) async throws -> CreateOutcome {
        try await client.withTransaction(logger: logger) { db in
            var inserted = false
            for try await _ in try await db.query(
                "INSERT INTO accounts (id) VALUES (\(creation.account)) ON CONFLICT DO NOTHING RETURNING id",
                logger: logger) { inserted = true }
            guard inserted else { return .exists }
            let device = creation.device
            try await db.query("""
                INSERT INTO devices (account, id, signing_key, agreement_key)
                VALUES (\(creation.account), \(device.id), \(device.signingKey), \(device.agreementKey))
                """, logger: logger)
            let genesis = creation.genesis
            try await db.query("""
                INSERT INTO device_log (account, seq, entry, signer, signature)
                VALUES (\(creation.account), 0, \(genesis.entry), \(genesis.signer), \(genesis.signature))
                """, logger: logger)
            // The recovery key signs requests as a device of its own (to recover the account after every device
            // is lost); its id is derived from its key, so it cannot take another device's place.
            if let entry = DeviceLogEntry(encoded: genesis.entry), entry.recoverySigningKey.count == 65,
               entry.recoveryAgreementKey.count == 32
            {
                let id = VerifiedDeviceLog.recoveryID(entry.recoverySigningKey)
                try await db.query("""
                    INSERT INTO devices (account, id, signing_key, agreement_key)
                    VALUES (\(creation.account), \(id), \(entry.recoverySigningKey), \(entry.recoveryAgreementKey))
                    """, logger: logger)
            }
            try await storeShares(creation.shares ?? [], account: creation.account, db: db)
            return .created
        }
    }

    /// The device's public signing key and whether it was revoked; nil when the account has no such device.
    func device(account: Data, id: Data) async throws -> (signingKey: Data, revoked: Bool)? {
        let rows = try await client.query(
            "SELECT signing_key, revoked FROM devices WHERE account = \(account) AND id = \(id)", logger: logger)
        for try await (key, revoked) in rows.decode((Data, Bool).self) { return (key, revoked) }
        return nil
    }

    /// Records a request's nonce; false when it was seen before (a replay).
    func useNonce(account: Data, nonce: Data, expires: Date) async throws -> Bool {
        try await forgetExpiredNonces()
        var fresh = false
        for try await _ in try await client.query("""
            INSERT INTO nonces (account, nonce, expires) VALUES (\(account), \(nonce), \(expires))
            ON CONFLICT DO NOTHING RETURNING 1
            """, logger: logger) { fresh = true }
        return fresh
    }

    /// Now and then (one call in 64), the nonces whose requests are too old to be accepted anyway go.
    private func forgetExpiredNonces() async throws {
        if Int.random(in: 0..<64) == 0 {
            try await client.query("DELETE FROM nonces WHERE expires < now()", logger: logger)
        }
    }

    enum ChangesOutcome: Sendable { case page(ChangePage), resync, noAccount }

    func changes(account: Data, after: Int64, limit: Int) async throws -> ChangesOutcome {
        var purged: Int64?
        for try await value in try await client.query(
            "SELECT purged_seq FROM accounts WHERE id = \(account)", logger: logger).decode(Int64.self) {
            purged = value
        }
        guard let purged else { return .noAccount }
        // Tombstones after `after` may have been forgotten: the device cannot know what was deleted.
        if after > 0 && after < purged { return .resync }
        var changes: [ItemChange] = []
        let rows = try await client.query("""
            SELECT id, epoch, version, seq, deleted, modified, ciphertext FROM items
            WHERE account = \(account) AND seq > \(after) ORDER BY seq LIMIT \(limit + 1)
            """, logger: logger)
        for try await (id, epoch, version, seq, deleted, modified, ciphertext)
            in rows.decode((Data, Int32, Int64, Int64, Bool, Date, Data?).self) {
            changes.append(ItemChange(id: id, epoch: epoch, version: version, seq: seq, deleted: deleted,
                                      modified: Int64(modified.timeIntervalSince1970 * 1000), ciphertext: ciphertext))
        }
        let more = changes.count > limit
        if more { changes.removeLast() }
        return .page(ChangePage(changes: changes, last: changes.last?.seq ?? after, more: more,
                                horizonSeconds: tombstoneHorizon))
    }

    /// Writes a new version of an item (ciphertext) or its tombstone, if the item's current version is `base` (0 when
    /// the server has none): compare-and-swap, so the first writer wins and the loser gets the current row. In one
    /// transaction, in this order: the request's nonce is recorded (a replay writes nothing); the account's row is
    /// locked (change numbers are handed out in commit order); a write under an epoch older than the account's is
    /// refused; the item is compared with `base`; a new item must fit the account; the item and the account's
    /// counters are written; a tombstone forgets the account's tombstones older than the horizon; every instance's
    /// waiting requests for the account are notified when it commits. The steps are the database function
    /// `sync_write` (migration 4), so that the account stays locked for no network round trip.
    func write(account: Data, id: Data, base: Int64, epoch: Int32, ciphertext: Data, deleted: Bool,
               nonce: Data, nonceExpires: Date) async throws -> WriteOutcome
    {
        try await forgetExpiredNonces()
        return try await client.withConnection { connection in
            let outcome = try await write(on: connection, account: account, id: id, base: base, epoch: epoch,
                                          ciphertext: ciphertext, deleted: deleted, nonce: nonce,
                                          nonceExpires: nonceExpires)
            // The call is a transaction of its own, committed after its row has come: the next query on the
            // connection runs only once the commit is done, and fails if it failed (a full NOTIFY queue, a crash),
            // so that no write is acknowledged before it is durable. (No lock is held by then.)
            try await connection.query("SELECT 1", logger: logger)
            return outcome
        }
    }

    private func write(on connection: PostgresConnection, account: Data, id: Data, base: Int64, epoch: Int32,
                       ciphertext: Data, deleted: Bool, nonce: Data, nonceExpires: Date) async throws -> WriteOutcome
    {
        let rows = try await connection.query("""
            SELECT * FROM sync_write(\(account), \(id), \(base), \(epoch), \(ciphertext), \(deleted), \(nonce),
                                     \(nonceExpires), \(Int32(SyncLimits.maxItemsPerAccount)),
                                     \(Double(tombstoneHorizon)), \(ChangeNotifier.channel))
            """, logger: logger)
        for try await (outcome, accountEpoch, version, seq, epochNow, versionNow, seqNow, deletedNow, modifiedNow,
                       ciphertextNow)
            in rows.decode((String, Int32?, Int64?, Int64?, Int32?, Int64?, Int64?, Bool?, Date?, Data?).self)
        {
            switch outcome {
            case "accepted":
                guard let version, let seq else { break }
                return .accepted(WriteAccepted(version: version, seq: seq))
            case "conflict":
                // The item as the server holds it (none: every column null).
                guard let epochNow, let versionNow, let seqNow, let deletedNow, let modifiedNow else {
                    return .conflict(nil)
                }
                let modified = Int64(modifiedNow.timeIntervalSince1970 * 1000)
                return .conflict(ItemChange(id: id, epoch: epochNow, version: versionNow, seq: seqNow,
                                            deleted: deletedNow, modified: modified, ciphertext: ciphertextNow))
            case "stale-epoch":
                guard let accountEpoch else { break }
                return .staleEpoch(accountEpoch)
            case "account-full": return .accountFull
            case "no-account": return .noAccount
            case "replayed": return .replayed
            default: break
            }
            throw SyncStoreError("sync_write answered \(outcome) without its values")
        }
        throw SyncStoreError("sync_write answered nothing")
    }

    func deviceLog(account: Data) async throws -> DeviceLog {
        var entries: [SignedLogEntry] = []
        for try await (entry, signer, signature) in try await client.query(
            "SELECT entry, signer, signature FROM device_log WHERE account = \(account) ORDER BY seq",
            logger: logger).decode((Data, Data, Data).self) {
            entries.append(SignedLogEntry(entry: entry, signer: signer, signature: signature))
        }
        return DeviceLog(entries: entries)
    }
}

/// The database answered in a way this server does not know (a schema that another version made).
struct SyncStoreError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
