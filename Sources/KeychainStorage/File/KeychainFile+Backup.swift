import Foundation
import GRDB
import KeychainCore
import Logging

extension KeychainFile {
    /// Writes every item of this keychain into a backup file at `path`, sealed under `password` (never the keychain
    /// password, and neither is in the file), with Apple's rules: `…ThisDeviceOnly` items only for this device,
    /// `WhenPasscodeSetThisDeviceOnly` items left out. Items behind an application password are left out too (their
    /// secret cannot be opened without it). Each is counted in the report.
    ///
    /// The caller has decided that the owner asked for it (``AccessEvaluator/mayActOnWholeKeychain(_:)``); the
    /// keychain must be unlocked (else the requirement to unlock it is thrown for the Asker).
    public func writeBackup(to path: String, password: SecretBytes) throws(KeychainError) -> BackupReport {
        applyAutoLock()
        try requireAllClassKeys()
        // scrypt runs before anything is read: nothing is held meanwhile.
        let writer = try BackupArchive.Writer(destination: path, password: password, kdf: configuration.kdf,
                                              deviceKey: deviceKey, now: configuration.clock())
        var report = BackupReport()
        let progress = OperationProgress.current
        try read { db in
            let total = try Int64.fetchOne(db, sql: "SELECT count(*) FROM items") ?? 0
            var done: Int64 = 0
            let all = try db.makeStatement(sql: "SELECT \(ItemRow.columns) FROM items ORDER BY rowid")
            try RawRows.forEachItemRow(all, [], db: db) { row in
                done += 1
                progress?.update(done, of: total)
                let (item, cls) = try openMeta(row)
                // keychaind's sync state belongs to this device's membership of a sync account: a new device joins.
                if Caller.isKeychaindOwn(item.accessGroup) { return true }
                if cls == .whenPasscodeSetThisDeviceOnly {
                    report.leftOutPasscode += 1
                    return true
                }
                if item.accessControl?.needsApplicationPassword == true {
                    report.leftOutApplicationPassword += 1
                    return true
                }
                let secret = try openSecret(row, item: item, query: nil, grants: AccessGrants())
                try writer.add(item, secret: secret)
                report.items += 1
                if cls.isThisDeviceOnly { report.thisDeviceOnly += 1 }
                return true
            }
        }
        try writer.finish(report)
        configuration.logger.debug("backup.written", metadata: ["items": "\(report.items)"])
        return report
    }

    /// Restores a backup into this keychain in one transaction: a kill at any instant leaves the keychain as it was
    /// or fully restored, and a wrong password (errSecAuthFailed) or a damaged, cut or altered file (errSecDecode)
    /// changes nothing. Items merge by primary key: the newer modification date wins, and on a tie the keychain's
    /// own copy stays, so restoring twice is restoring once.
    public func restoreBackup(from path: String, password: SecretBytes) throws(KeychainError) -> BackupReport {
        applyAutoLock()
        try requireAllClassKeys()
        let reader = try BackupArchive.Reader(path: path)
        try reader.unlock(password: password, deviceKey: deviceKey)  // scrypt, with nothing held
        return try restore(from: reader)
    }

    func restore(from reader: BackupArchive.Reader) throws(KeychainError) -> BackupReport {
        let progress = OperationProgress.current
        let report = try write { db, changes -> BackupReport in
            var report = BackupReport()
            var seen = 0
            var thisDevice = 0  // every this-device record, opened here or not: none may pass for another kind
            while let record = try reader.next() {
                if let progress { progress.update(reader.bytesRead, of: reader.size) }
                switch record {
                case .end(let written):
                    guard written.items == seen, written.thisDeviceOnly == thisDevice else {
                        throw KeychainError.decode("the backup's records do not add up")
                    }
                    report.thisDeviceOnly = written.thisDeviceOnly
                    report.leftOutPasscode = written.leftOutPasscode
                    report.leftOutApplicationPassword = written.leftOutApplicationPassword
                case .otherDevice:
                    seen += 1
                    thisDevice += 1
                    report.skippedOtherDevice += 1
                case .item(var item, let secret):
                    seen += 1
                    if Caller.isKeychaindOwn(item.accessGroup) { continue }  // never written; never taken
                    if item.accessibility.isThisDeviceOnly { thisDevice += 1 }
                    guard item.accessibility != .whenPasscodeSetThisDeviceOnly else {  // never written; never taken
                        report.leftOutPasscode += 1
                        continue
                    }
                    let primaryIndex = deviceKeys.primaryIndex(item.primaryKeyBytes)
                    let existing = try RawRows.item(kind: item.itemClass.rawValue, primaryIndex: primaryIndex, db: db)
                    if let existing {
                        let (current, _) = try openMeta(existing)
                        let here = current.attributes["mdat"]?.dateValue ?? .distantPast
                        let there = item.attributes["mdat"]?.dateValue ?? .distantPast
                        // An application's Secret portal secret here is never replaced (a backup could carry one someone
                        // else knows, dated later); one that is missing comes back.
                        guard there > here, current.accessGroup != Caller.portalSecretGroup else {
                            report.kept += 1
                            continue
                        }
                        item.uuid = current.uuid  // persistent references made here keep working
                        let sealed = try seal(item, secret: secret, generation: existing.generation + 1)
                        changes.removed.append(contribution(of: existing))
                        try replace(rowID: existing.rowID, with: sealed, db: db, changes: &changes)
                    } else {
                        let taken = try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM items WHERE uuid = ?"),
                                                      arguments: [uuidData(item.uuid)]) ?? false
                        if taken { item.uuid = UUID() }  // another item here has that identity: this is a new one
                        try insert(seal(item, secret: secret, generation: 1), db: db, changes: &changes)
                    }
                    report.items += 1
                }
            }
            guard reader.ended else { throw KeychainError.decode("the backup is cut short: it has no end") }
            return report
        }
        if report.items > 0 {
            configuration.logger.debug("backup.restored", metadata: ["items": "\(report.items)"])
        }
        return report
    }

    /// A backup reads and writes every class: a locked keychain is unlocked first (by the Asker), never skipped.
    private func requireAllClassKeys() throws(KeychainError) {
        for cls in [Accessibility.whenUnlocked, .afterFirstUnlock, .always] where classKey(cls) == nil {
            throw lockedError(cls)
        }
    }
}
