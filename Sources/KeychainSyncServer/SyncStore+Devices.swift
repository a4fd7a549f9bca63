import Foundation
import KeychainSyncProtocol
import Logging
import PostgresNIO

/// Joins, the device log and key shares. The server keeps the log one chain (each entry's seq and previous hash
/// checked under the account's row lock) and lets only a device of the account append to it; whether an entry is
/// to be trusted is for the devices to decide (they verify every signature from the first entry).
extension SyncStore {
    static let joinLifetime: Int64 = 600
    static let maxPendingJoins = 10_000

    enum JoinOutcome: Sendable { case ticket(JoinTicket), full }

    func createJoin(_ request: JoinRequest, now: Date) async throws -> JoinOutcome {
        try await client.withTransaction(logger: logger) { db in
            try await db.query("DELETE FROM joins WHERE expires < now()", logger: logger)
            var pending = 0
            for try await count in try await db.query("SELECT count(*) FROM joins", logger: logger).decode(Int.self) {
                pending = count
            }
            guard pending < Self.maxPendingJoins else { return .full }
            let code = Self.joinCode()
            let expires = now.addingTimeInterval(Double(Self.joinLifetime))
            let device = request.device
            try await db.query("""
                INSERT INTO joins (code, device_id, signing_key, agreement_key, expires)
                VALUES (\(code), \(device.id), \(device.signingKey), \(device.agreementKey), \(expires))
                """, logger: logger)
            return .ticket(JoinTicket(code: code, expiresSeconds: Self.joinLifetime))
        }
    }

    /// Ten characters of Crockford's base32 (50 bits): typed by a person on the trusted device.
    static func joinCode() -> String {
        let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        return String((0..<10).map { _ in alphabet[Int.random(in: 0..<32)] })
    }

    struct Join: Sendable {
        var device: DeviceRecord
        var account: Data?
        var claim: Data?
        var approved: Bool
        var expired: Bool
    }

    func join(_ code: String) async throws -> Join? {
        let rows = try await client.query("""
            SELECT device_id, signing_key, agreement_key, account, claim, approved, expires < now() FROM joins
            WHERE code = \(code)
            """, logger: logger)
        for try await (id, signing, agreement, account, claim, approved, expired)
            in rows.decode((Data, Data, Data, Data?, Data?, Bool, Bool).self) {
            return Join(device: DeviceRecord(id: id, signingKey: signing, agreementKey: agreement), account: account,
                        claim: claim, approved: approved, expired: expired)
        }
        return nil
    }

    enum ClaimOutcome: Sendable { case claimed(DeviceRecord), noJoin, takenByAnother }

    /// The approving device's account takes the join (once: a join another account claimed stays theirs).
    func claimJoin(_ code: String, account: Data, claim: Data) async throws -> ClaimOutcome {
        try await client.withTransaction(logger: logger) { db in
            var found: (DeviceRecord, Data?)?
            for try await (id, signing, agreement, owner) in try await db.query("""
                SELECT device_id, signing_key, agreement_key, account FROM joins
                WHERE code = \(code) AND expires > now() AND NOT approved FOR UPDATE
                """, logger: logger).decode((Data, Data, Data, Data?).self) {
                found = (DeviceRecord(id: id, signingKey: signing, agreementKey: agreement), owner)
            }
            guard let (device, owner) = found else { return .noJoin }
            if let owner, owner != account { return .takenByAnother }
            try await db.query("UPDATE joins SET account = \(account), claim = \(claim) WHERE code = \(code)",
                               logger: logger)
            return .claimed(device)
        }
    }

    enum AdditionOutcome: Sendable { case added, notNext, known, badJoin, noAccount }

    /// Appends `entry` (already checked to be a well-formed add or remove signed by `signer`) to the account's log,
    /// with the device row and the shares, in one transaction under the account's row lock.
    func appendToLog(account: Data, entry: DeviceLogEntry, signed: SignedLogEntry, shares: [KeyShare],
                     join: String?) async throws -> AdditionOutcome {
        try await client.withTransaction(logger: logger) { db in
            var exists = false
            for try await _ in try await db.query("SELECT 1 FROM accounts WHERE id = \(account) FOR UPDATE",
                                                  logger: logger) { exists = true }
            guard exists else { return .noAccount }
            var last: SignedLogEntry?
            var count = 0
            for try await (seq, bytes, signer, signature) in try await db.query("""
                SELECT seq, entry, signer, signature FROM device_log WHERE account = \(account) ORDER BY seq DESC LIMIT 1
                """, logger: logger).decode((Int, Data, Data, Data).self) {
                last = SignedLogEntry(entry: bytes, signer: signer, signature: signature)
                count = seq + 1
            }
            guard let last, Int(entry.seq) == count, entry.previous == last.chainHash else { return .notNext }
            if let join {
                var matches = false
                for try await (id, owner) in try await db.query("""
                    SELECT device_id, account FROM joins WHERE code = \(join) AND expires > now() AND NOT approved
                    FOR UPDATE
                    """, logger: logger).decode((Data, Data?).self) {
                    matches = id == entry.device.id && owner == account
                }
                guard matches else { return .badJoin }
                try await db.query("UPDATE joins SET approved = true WHERE code = \(join)", logger: logger)
            }
            switch entry.kind {
            case .addDevice:
                var known = false
                for try await _ in try await db.query(
                    "SELECT 1 FROM devices WHERE account = \(account) AND id = \(entry.device.id)", logger: logger) {
                    known = true
                }
                guard !known else { return .known }
                try await db.query("""
                    INSERT INTO devices (account, id, signing_key, agreement_key)
                    VALUES (\(account), \(entry.device.id), \(entry.device.signingKey), \(entry.device.agreementKey))
                    """, logger: logger)
            case .removeDevice:
                try await db.query(
                    "UPDATE devices SET revoked = true WHERE account = \(account) AND id = \(entry.device.id)",
                    logger: logger)
                try await db.query(
                    "UPDATE accounts SET epoch = GREATEST(epoch, \(entry.epoch)) WHERE id = \(account)", logger: logger)
            case .genesis:
                return .notNext
            }
            try await db.query("""
                INSERT INTO device_log (account, seq, entry, signer, signature)
                VALUES (\(account), \(Int(entry.seq)), \(signed.entry), \(signed.signer), \(signed.signature))
                """, logger: logger)
            try await storeShares(shares, account: account, db: db)
            return .added
        }
    }

    func storeShares(_ shares: [KeyShare], account: Data, db: PostgresConnection) async throws {
        for share in shares {
            let bytes = try JSONEncoder().encode(share)
            try await db.query("""
                INSERT INTO key_shares (account, device, epoch, share) VALUES (\(account), \(share.recipient),
                \(share.epoch), \(bytes))
                ON CONFLICT (account, device, epoch) DO UPDATE SET share = EXCLUDED.share
                """, logger: logger)
        }
    }

    func shares(account: Data, device: Data) async throws -> KeyShares {
        var shares: [KeyShare] = []
        for try await bytes in try await client.query("""
            SELECT share FROM key_shares WHERE account = \(account) AND device = \(device) ORDER BY epoch
            """, logger: logger).decode(Data.self) {
            if let share = try? JSONDecoder().decode(KeyShare.self, from: bytes) { shares.append(share) }
        }
        return KeyShares(shares: shares)
    }
}
