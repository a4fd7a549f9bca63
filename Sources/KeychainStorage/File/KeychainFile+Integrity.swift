import Crypto
import Foundation
import GRDB
import KeychainCore
import Logging
import Synchronization

/// Integrity: the epoch kept in the device state (against rollback), the manifest checked at open, and the record
/// of files checked (so an untouched file need not be scanned again).
extension KeychainFile {
    /// Remembers the newest epoch beside the device key, at most once a second (and at lock and close). The
    /// state file is replaced atomically but not synced: if it lags, the rollback check is weaker, never wrong.
    func recordEpoch(_ epoch: Int64, header: FileHeader) {
        let now = configuration.clock()
        let due = epochRecord.withLock { record -> Bool in
            record.pending = max(record.pending ?? 0, epoch)
            return now.timeIntervalSince(record.lastWrite) >= 1 || now < record.lastWrite
        }
        if due { flushEpoch() }
    }

    /// Writes a pending epoch to the device state, unless the state already has a newer one.
    func flushEpoch() {
        guard let epoch = takePendingEpoch() else { return }
        updateDeviceState { state in
            guard state.epoch < epoch else { return false }
            state.epoch = epoch
            return true
        }
    }

    /// The epoch waiting to reach the device state, if any; the state counts as written now.
    func takePendingEpoch() -> Int64? {
        let now = configuration.clock()
        return epochRecord.withLock { record -> Int64? in
            defer { record = (nil, now) }
            return record.pending
        }
    }

    /// Loads the device state, lets `change` edit it, and saves it (not synced) when `change` says it changed.
    func updateDeviceState(_ change: (inout DeviceState) -> Bool) {
        let header = self.header.withLock { $0 }
        let path = statePath
        let key = deviceKeys.stateKey
        try? DeviceState.withLock(path: path) { () throws(KeychainError) in
            guard var state = try? DeviceState.load(path: path, key: key, dbUUID: header.dbUUID), change(&state)
            else { return }
            try? state.save(path: path, key: key, dbUUID: header.dbUUID, sync: false)
        }
    }

    /// Checks the manifest MAC and the epoch against the device state, and every row against the manifest unless
    /// the files are exactly as this device last checked or closed them (``FileFingerprint``).
    func verifyManifest() throws(KeychainError) {
        let header = self.header.withLock { $0 }
        // The state first: it is written only after a commit, so any snapshot taken after reading it is at
        // least as new. (Read the other way round, another process's commit in between looks like a rollback.)
        let storedState = try DeviceState.loadIfPresent(path: statePath, key: deviceKeys.stateKey, dbUUID: header.dbUUID)
        let state = storedState ?? DeviceState()
        let before = FileFingerprint.of(url)
        let unchanged = before != nil && before == state.verifiedFiles
        let (manifest, mac, rows) = try read { db in
            let m = try Manifest.load(db)
            guard let row = try Row.fetchOne(db, sql: "SELECT manifest_mac FROM kc_meta") else {
                throw KeychainError(.invalidKeychain)
            }
            let mac: Data = try row.required("manifest_mac")
            return (m, mac, unchanged ? nil : try scanRows(db))
        }
        guard manifest.verify(mac, key: deviceKeys.manifestKey, header: header) else {
            throw KeychainError(.decode, "the keychain's manifest does not verify")
        }
        if let rows {
            guard rows.digest == manifest.digest, rows.count == manifest.count else {
                throw KeychainError(.decode, "the keychain's items do not match its manifest")
            }
        }
        // The state is written when the keychain is made; without it, a file that has been written to is either
        // a copy from elsewhere or one whose state was removed (which would reset the back-off and the epoch).
        if storedState == nil && manifest.epoch > 1 {
            throw KeychainError(.decode, "the keychain's device state is missing (removed, or the file was copied here)")
        }
        guard manifest.epoch >= state.epoch else {
            throw KeychainError(.decode, "the keychain file is older than this device has seen (rollback)")
        }
        integrity.withLock { $0.checked = true }
        configuration.logger.debug("keychain.open.verified", metadata: ["rows.scanned": "\(rows != nil)"])
        if rows != nil, let before, FileFingerprint.of(url) == before {
            recordVerified(before)
        }
    }

    /// The XOR of every row's manifest contribution, and how many rows there are.
    func scanRows(_ db: Database) throws -> (digest: Data, count: Int64) {
        try Self.scanRows(db) { Manifest.contribution($0, key: deviceKeys.manifestKey) }
    }

    static func scanRows(_ db: Database, contribution: (RowIdentity) -> [UInt8]) throws -> (digest: Data, count: Int64) {
        var digest = [UInt8](repeating: 0, count: 32)
        var count: Int64 = 0
        let rows = try Row.fetchCursor(db, sql: "SELECT \(RowIdentity.columns) FROM items")
        while let row = try rows.next() {
            let c = contribution(try RowIdentity(row))
            for i in 0..<32 { digest[i] ^= c[i] }
            count += 1
        }
        return (Data(digest), count)
    }

    /// Remembers in the device state that the files, as they are now, were checked.
    func recordVerified(_ fingerprint: String) {
        updateDeviceState { state in
            guard state.verifiedFiles != fingerprint else { return false }
            state.verifiedFiles = fingerprint
            return true
        }
    }
}
