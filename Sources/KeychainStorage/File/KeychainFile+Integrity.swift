import Crypto
import Foundation
import GRDB
import KeychainCore
import Logging
import Synchronization

/// Integrity: the epoch kept in the device state (against rollback) and the manifest checked at open.
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

    /// Checks the manifest MAC and the epoch against the device state, and every row against the manifest.
    ///
    /// Every open reads every row (a few microseconds each): deleted, swapped, rolled-back rows and edited index
    /// values are caught before the first answer. An earlier version skipped the scan when the files' stat
    /// fingerprint (ctime) matched the one recorded at this device's last close, but an edit of the same size
    /// within one clock tick of that close kept the fingerprint, and hashing the contents instead needs a
    /// descriptor of our own whose close drops SQLite's POSIX locks. Under keychaind the scan runs once, when the
    /// daemon first opens the file, and the daemon then keeps it open.
    func verifyManifest() throws(KeychainError) {
        let header = self.header.withLock { $0 }
        // The state first: it is written only after a commit, so any snapshot taken after reading it is at
        // least as new. (Read the other way round, another process's commit in between looks like a rollback.)
        let storedState = try DeviceState.loadIfPresent(path: statePath, key: deviceKeys.stateKey, dbUUID: header.dbUUID)
        let state = storedState ?? DeviceState()
        let (manifest, mac, rows) = try read { db in
            let m = try Manifest.load(db)
            guard let row = try Row.fetchOne(db, sql: "SELECT manifest_mac FROM kc_meta") else {
                throw KeychainError(.invalidKeychain)
            }
            let mac: Data = try row.required("manifest_mac")
            return (m, mac, try scanRows(db))
        }
        guard manifest.verify(mac, key: deviceKeys.manifestKey, header: header) else {
            throw KeychainError(.decode, "the keychain's manifest does not verify")
        }
        guard rows.digest == manifest.digest, rows.count == manifest.count else {
            throw KeychainError(.decode, "the keychain's items do not match its manifest")
        }
        // The state is written when the keychain is made; without it, a file that has been written to is either
        // a copy from elsewhere or one whose state was removed (which would reset the back-off and the epoch).
        if storedState == nil && manifest.epoch > 1 {
            throw KeychainError(.decode, "the keychain's device state is missing (removed, or the file was copied here)")
        }
        guard manifest.epoch >= state.epoch else {
            throw KeychainError(.decode, "the keychain file is older than this device has seen (rollback)")
        }
        configuration.logger.debug("keychain.open.verified", metadata: ["rows": "\(rows.count)"])
    }

    /// The XOR of every row's manifest contribution, and how many rows there are.
    func scanRows(_ db: Database) throws -> (digest: Data, count: Int64) {
        try Self.scanRows(db, contribution: Manifest.contributions(key: deviceKeys.manifestKey))
    }
}
