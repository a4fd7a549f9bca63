import Crypto
import Foundation
import GRDB
import KeychainCore
import Logging
import Synchronization

extension KeychainFile {
    /// Changes, sets or removes the keychain's password (nil or empty = none), in one transaction.
    ///
    /// The password classes get new class keys (CRYPTO-DESIGN §5, rotation): every item of those classes has its
    /// item key re-wrapped and its metadata and secret sealed again under the new keys, so a copy of the old file
    /// and the old password open nothing written after the change. O(items) small AEAD operations; no KDF per item.
    /// Removing the password deletes the WhenPasscodeSet items, as Apple does when a device loses its passcode.
    ///
    /// - Returns: how many WhenPasscodeSet items were deleted.
    /// - Throws: `errSecAuthFailed` when `old` is wrong (it counts toward the back-off) or when another process
    ///   changed the password meanwhile.
    @discardableResult
    public func changePassword(old: SecretBytes?, new: SecretBytes?) throws(KeychainError) -> Int {
        let oldHeader = try refreshHeader(db: nil)
        let now = configuration.clock()
        // The old class keys, held here: a lock landing during the change cannot take them away.
        let oldKeys: [Accessibility: SymmetricKey]
        if oldHeader.hasPassword {
            guard let checked = try checkedClassKeys(old, header: oldHeader, now: now, db: nil) else {
                throw KeychainError(.authFailed)
            }
            oldKeys = checked
        } else {
            if let old, !old.isEmpty { throw KeychainError(.authFailed) }
            try unlock(password: nil)
            oldKeys = keys.withLock { $0.classKeys.all }
        }
        var newHeader = oldHeader
        newHeader.hasPassword = !(new?.isEmpty ?? true)
        newHeader.passwordSalt = Data(SymmetricKey.random().bytes)
        newHeader.kdf = configuration.kdf
        newHeader.keybagGeneration += 1
        let newKEK = try KeyHierarchy.passwordKEK(
            password: newHeader.hasPassword ? new : nil, header: newHeader, deviceKey: deviceKey)
        let classes = KeyHierarchy.classes(hasPassword: newHeader.hasPassword)
        var newKeys: [Accessibility: SymmetricKey] = [:]
        for cls in classes {
            if KeyHierarchy.isDeviceClass(cls) {
                guard let kept = oldKeys[cls] else { throw KeychainError.decode("keybag") }
                newKeys[cls] = kept  // the Always classes never depended on the password
            } else {
                newKeys[cls] = SymmetricKey.random()
            }
        }
        let removedPasscodeClass = oldHeader.hasPassword && !newHeader.hasPassword
        let deleted = try write(newHeader: newHeader) { db, changes -> Int in
            // Another process may have changed the password between our check and this transaction.
            guard try Int64.fetchOne(db, sql: "SELECT keybag_gen FROM kc_meta") == oldHeader.keybagGeneration else {
                throw KeychainError(.authFailed, "the password was changed by another process")
            }
            try db.execute(
                sql: "UPDATE kc_meta SET pw_salt = ?, has_password = ?, kdf_id = ?, kdf_n = ?, kdf_r = ?, kdf_p = ?, keybag_gen = ?",
                arguments: [newHeader.passwordSalt, newHeader.hasPassword, newHeader.kdf.id, newHeader.kdf.n,
                            newHeader.kdf.r, newHeader.kdf.p, newHeader.keybagGeneration])
            try db.execute(sql: "DELETE FROM keybag")
            for cls in classes {
                let kek = KeyHierarchy.isDeviceClass(cls) ? deviceKeys.deviceKEK : newKEK
                let blob = try newKeys[cls]!.withUnsafeBytes { raw in
                    try Sealing.seal(raw, key: kek, aad: KeyHierarchy.classKeyAAD(cls, keyGeneration: 1, header: newHeader))
                }
                try db.execute(
                    sql: "INSERT INTO keybag (class, key_gen, wrap, blob) VALUES (?, 1, ?, ?)",
                    arguments: [cls.rawValue, KeyHierarchy.isDeviceClass(cls) ? "dev" : "pw", blob])
            }
            var deleted = 0
            let rows = try RawRows.allItemRows(db.makeStatement(sql: "SELECT \(ItemRow.columns) FROM items"), [], db: db)
            for row in rows {
                guard let cls = Accessibility(rawValue: row.accessibility) else { throw KeychainError.decode("row") }
                if cls == .whenPasscodeSetThisDeviceOnly && removedPasscodeClass {
                    changes.removed.append(Manifest.contribution(row.identity, key: deviceKeys.manifestKey))
                    try db.execute(sql: "DELETE FROM items WHERE rowid = ?", arguments: [row.rowID])
                    deleted += 1
                    continue
                }
                guard !KeyHierarchy.isDeviceClass(cls) else { continue }
                guard let oldKey = oldKeys[cls], let newKey = newKeys[cls] else { throw KeychainError.decode("keybag") }
                try rewrap(row, from: oldKey, to: newKey, header: oldHeader, db: db)
            }
            return deleted
        }
        header.withLock { $0 = newHeader }
        let changed = configuration.clock()  // after two KDFs: the idle interval counts from here
        keys.withLock { keys in
            for cls in Accessibility.allCases {
                if let key = newKeys[cls] {
                    keys.classKeys[cls] = key
                    keys.metadataKeys[cls] = KeyHierarchy.metadataKey(classKey: key, header: newHeader)
                } else {
                    keys.classKeys[cls] = nil
                    keys.metadataKeys[cls] = nil
                }
            }
            keys.lastActivity = max(now, changed)
        }
        configuration.idleDeadlineMayBeSooner?()
        if deleted > 0 {
            configuration.logger.notice("keychain.password.removed", metadata: ["akpu.deleted": "\(deleted)"])
        }
        return deleted
    }
}

extension KeychainFile {
    /// A digest of the class key `cls` holds now (nil while locked), for tests that check a password change
    /// replaced it. Never the key itself.
    @_spi(Testing) public func classKeyDigest(_ cls: Accessibility) -> Data? {
        classKey(cls).map { Data(SHA256.hash(data: $0.0.withUnsafeBytes { Data($0) })) }
    }
}
