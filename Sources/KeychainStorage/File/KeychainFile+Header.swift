import Crypto
import Foundation
import GRDB
import KeychainCore
import Logging
import Synchronization

extension FileHeader {
    /// The header fields of a `kc_meta` row.
    init(_ row: Row) throws {
        self.init(
            dbUUID: try uuid(try row.required("db_uuid")), dbSalt: try row.required("db_salt"),
            passwordSalt: try row.required("pw_salt"), hasPassword: try row.required("has_password"),
            kdf: KDFParameters(id: try row.required("kdf_id"), n: try row.required("kdf_n"),
                               r: try row.required("kdf_r"), p: try row.required("kdf_p")),
            keybagGeneration: try row.required("keybag_gen"))
    }
}

extension KeychainFile {
    /// Notices, inside a transaction, that another process changed the password since this handle read the header
    /// (the keybag generation moved): the header is read again and the password classes' keys, which were replaced,
    /// are dropped, so this process sees the keychain locked (unlock with the new password) instead of failing
    /// with errSecDecode. One cached statement per transaction.
    func noticeKeybagChange(_ db: Database) throws {
        // Read at every transaction: straight from SQLite (``RawRows``), not through GRDB's generic fetch.
        let stored = try RawRows.integer(db.cachedStatement(sql: "SELECT keybag_gen FROM kc_meta"), db: db)
        guard let stored, stored != header.withLock({ $0.keybagGeneration }) else { return }
        try adoptHeader(db)
    }

    /// The header as the file has it now (read through `db` inside a transaction, or in a read of its own).
    @discardableResult
    func refreshHeader(db: Database?) throws(KeychainError) -> FileHeader {
        if let db {
            do { try noticeKeybagChange(db) } catch { throw StorageErrors.map(error) }
        } else {
            try read { _ in }  // read() notices a change itself
        }
        return header.withLock { $0 }
    }

    private func adoptHeader(_ db: Database) throws {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM kc_meta") else { throw KeychainError(.invalidKeychain) }
        let fresh = try FileHeader(row)
        guard fresh.dbUUID == header.withLock({ $0.dbUUID }) else {
            throw KeychainError(.invalidKeychain, "the keychain file was replaced")
        }
        header.withLock { $0 = fresh }
        keys.withLock { keys in
            for cls in Accessibility.allCases where !KeyHierarchy.isDeviceClass(cls) {
                keys.classKeys[cls] = nil
                keys.metadataKeys[cls] = nil
            }
        }
        cachedSettings.withLock { $0 = nil }
        configuration.logger.notice("keychain.password.changed.elsewhere")
    }
}

extension KeychainFile {
    /// Writes a device state that has seen nothing (epoch 0) for the keychain at `url`, as if this device had just
    /// created it. For harnesses that open arbitrary files (the fuzzer): a real device always has the state of its
    /// keychains, and a missing one is refused as tampering.
    @_spi(Testing) public static func writeFreshDeviceState(for url: URL, configuration: Configuration)
        throws(KeychainError)
    {
        let deviceKey = try DeviceKey.load(in: configuration.stateDirectory, create: false)
        let header: FileHeader
        do {
            var readOnly = GRDB.Configuration()
            readOnly.readonly = true
            let database = try DatabaseQueue(path: url.path, configuration: readOnly)
            defer { try? database.close() }
            header = try database.read { db -> FileHeader in
                guard let row = try Row.fetchOne(db, sql: "SELECT * FROM kc_meta") else {
                    throw KeychainError(.invalidKeychain)
                }
                return try FileHeader(row)
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw StorageErrors.map(error)
        }
        let keys = DeviceKeys(deviceKey: deviceKey, header: header)
        try DeviceState().save(
            path: configuration.stateDirectory.appendingPathComponent("\(header.dbUUID.uuidString).state").path,
            key: keys.stateKey, dbUUID: header.dbUUID, sync: false)
    }
}
