import Foundation
import GRDB
import KeychainCore
import Synchronization
import Testing
@testable import KeychainStorage

/// Backup and restore with Apple's rules (issue: backup and moving in): what a backup holds, where its items
/// restore, how restores merge, and that a wrong password or a damaged file changes nothing.
@Suite("Backup and restore")
struct BackupTests {
    static let password = SecretBytes(utf8: "backup password")

    /// A keychain holding one generic password per protection class, and one behind an application password.
    static func source() throws -> TestFile {
        let t = try TestFile(password: "pw")
        for cls in ["ak", "ck", "dk", "aku", "cku", "dku", "akpu"] {
            try t.add(["class": "genp", "acct": .string(cls), "svce": "backup", "labl": .string("label \(cls)"),
                       "pdmn": .string(cls), "v_Data": .data(Data("secret of \(cls)".utf8))])
        }
        try t.add(["class": "inet", "acct": "alice", "srvr": "example.com", "ptcl": "htps", "port": 443,
                   "v_Data": .data(Data("hunter2".utf8))])
        var q = try QueryParser.parse([
            "class": "genp", "acct": "app", "svce": "backup", "v_Data": .data(Data("behind".utf8)),
            "accc": .accessControl(try AccessControl(protection: .whenUnlocked, flags: [.applicationPassword])),
        ], for: .add)
        let context = AuthenticationContext()
        context.setApplicationPassword(SecretBytes(utf8: "app-pw"))
        q.authenticationContext = context
        _ = try t.file.add(q, caller: t.caller)
        return t
    }

    func backupPath(_ t: TestFile) -> String { t.root.appendingPathComponent("keychain.backup").path }

    func accounts(_ t: TestFile) throws -> [String: String] {
        var out: [String: String] = [:]
        for cls in ["genp", "inet"] {
            let query = try QueryParser.parse(
                ["class": .string(cls), "r_Data": true, "r_Attributes": true, "m_Limit": "m_LimitAll"], for: .search)
            let found = (try? t.file.search(query, caller: t.caller)) ?? []
            for item in found { out[item.item.attributes["acct"]?.stringValue ?? ""] = item.secret?.unprotectedString() }
        }
        return out
    }

    func itemCount(_ t: TestFile) throws -> Int {
        try t.file.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM items") ?? -1 }
    }

    @Test("a backup restored on another device brings every portable item, skips ThisDeviceOnly, never has WhenPasscodeSet")
    func otherDevice() throws {
        let source = try Self.source()
        let written = try source.file.writeBackup(to: backupPath(source), password: Self.password)
        #expect(written == BackupReport(items: 7, thisDeviceOnly: 3, leftOutPasscode: 1, leftOutApplicationPassword: 1))

        let target = try TestFile(password: "other")  // its own state directory: another device key
        let restored = try target.file.restoreBackup(from: backupPath(source), password: Self.password)
        #expect(restored == BackupReport(items: 4, thisDeviceOnly: 3, skippedOtherDevice: 3, leftOutPasscode: 1,
                                         leftOutApplicationPassword: 1))
        #expect(try accounts(target) == ["ak": "secret of ak", "ck": "secret of ck", "dk": "secret of dk",
                                         "alice": "hunter2"])
        // Attributes come as they were, dates included.
        let before = try source.search(["class": "genp", "acct": "ak", "r_Attributes": true]).first?.item
        let after = try target.search(["class": "genp", "acct": "ak", "r_Attributes": true]).first?.item
        #expect(before?.attributes == after?.attributes)
        #expect(before?.uuid == after?.uuid)
        // Nothing of the secrets or the attributes is in the file in the clear.
        let bytes = fileBytes(backupPath(source))
        for clear in ["secret of", "hunter2", "example.com", "label ak", "backup"] { #expect(!contains(bytes, clear)) }
    }

    /// What `security`'s progress line (and keychaind's progress frames) are made of: a backup counts items, a
    /// restore the bytes of the file read; both end at their total.
    @Test("a backup and a restore report how far they got, ending at the whole")
    func progress() throws {
        let source = try Self.source()
        let updates = Mutex<[(Int64, Int64)]>([])
        let progress = OperationProgress { done, total in updates.withLock { $0.append((done, total)) } }
        _ = try OperationProgress.$current.withValue(progress) {
            try source.file.writeBackup(to: backupPath(source), password: Self.password)
        }
        let backedUp = updates.withLock { $0 }
        #expect(backedUp.last.map { $0 == (9, 9) } == true, "\(backedUp)")  // every row, the app password one too
        updates.withLock { $0 = [] }
        let target = try TestFile(password: "other")
        _ = try OperationProgress.$current.withValue(progress) {
            try target.file.restoreBackup(from: backupPath(source), password: Self.password)
        }
        let restored = updates.withLock { $0 }
        let size = Int64(fileBytes(backupPath(source)).count)
        #expect(restored.last.map { $0.0 == size && $0.1 == size } == true, "\(restored) of \(size)")
        #expect(restored.allSatisfy { $0.0 <= $0.1 })
    }

    @Test("a Secret portal secret comes back where it is missing and is never replaced by a backup's, however new")
    func portalSecretNeverReplaced() throws {
        let later = TestFile.fixedClock(Date(timeIntervalSinceReferenceDate: 900_000_000))
        let earlier = TestFile.fixedClock(Date(timeIntervalSinceReferenceDate: 800_000_000))
        let source = try TestFile(password: "pw", clock: later)
        let theirs = try source.file.keychaindSecret(.portalSecret(appID: "org.example.Mail")) { SecretBytes(utf8: "theirs") }
        #expect(theirs.made)
        _ = try source.file.writeBackup(to: backupPath(source), password: Self.password)

        // Missing here: it comes back, the same secret.
        let empty = try TestFile(password: "other")
        _ = try empty.file.restoreBackup(from: backupPath(source), password: Self.password)
        let restored = try empty.file.keychaindSecret(.portalSecret(appID: "org.example.Mail")) { SecretBytes(utf8: "new") }
        #expect(!restored.made && restored.secret == SecretBytes(utf8: "theirs"))

        // Here already, older than the backup's: the one here stays.
        let target = try TestFile(password: "other", clock: earlier)
        _ = try target.file.keychaindSecret(.portalSecret(appID: "org.example.Mail")) { SecretBytes(utf8: "mine") }
        let report = try target.file.restoreBackup(from: backupPath(source), password: Self.password)
        #expect(report.kept == 1)
        let kept = try target.file.keychaindSecret(.portalSecret(appID: "org.example.Mail")) { SecretBytes(utf8: "new") }
        #expect(kept.secret == SecretBytes(utf8: "mine"))
    }

    @Test("on the device that made it, ThisDeviceOnly items restore too (into another keychain of the device)")
    func sameDevice() throws {
        let source = try Self.source()
        _ = try source.file.writeBackup(to: backupPath(source), password: Self.password)
        let other = try KeychainFile.create(at: source.root.appendingPathComponent("keychains/other.keychain-db"),
                                            password: SecretBytes(utf8: "pw2"), settings: .never,
                                            configuration: source.configuration)
        let restored = try other.restoreBackup(from: backupPath(source), password: Self.password)
        #expect(restored.items == 7)
        #expect(restored.skippedOtherDevice == 0)
        let found = try other.search(QueryParser.parse(["class": "genp", "acct": "dku", "r_Data": true], for: .search),
                                     caller: source.caller)
        #expect(found.first?.secret?.unprotectedString() == "secret of dku")
    }

    @Test("restoring twice is restoring once; the newer modification date wins, a tie keeps the keychain's copy")
    func merge() throws {
        let clock = ManualClock()
        let source = try TestFile(password: "pw", clock: clock.read)
        try source.add(["class": "genp", "acct": "old-here", "svce": "m", "v_Data": .data(Data("from backup".utf8))])
        try source.add(["class": "genp", "acct": "new-here", "svce": "m", "v_Data": .data(Data("from backup".utf8))])
        try source.add(["class": "genp", "acct": "same", "svce": "m", "v_Data": .data(Data("from backup".utf8))])
        _ = try source.file.writeBackup(to: backupPath(source), password: Self.password)

        // The target has "same" at the same date, an older "old-here", and a newer "new-here".
        let target = try TestFile(password: "pw", clock: clock.read)
        try target.add(["class": "genp", "acct": "same", "svce": "m", "v_Data": .data(Data("kept".utf8))])
        clock.now -= 3600
        try target.add(["class": "genp", "acct": "old-here", "svce": "m", "v_Data": .data(Data("older".utf8))])
        clock.now += 7200
        try target.add(["class": "genp", "acct": "new-here", "svce": "m", "v_Data": .data(Data("newer".utf8))])

        let first = try target.file.restoreBackup(from: backupPath(source), password: Self.password)
        #expect(first.items == 1)
        #expect(first.kept == 2)
        #expect(try accounts(target) == ["old-here": "from backup", "new-here": "newer", "same": "kept"])
        let second = try target.file.restoreBackup(from: backupPath(source), password: Self.password)
        #expect(second.items == 0)
        #expect(second.kept == 3)
        #expect(try itemCount(target) == 3)
        // The replaced item is one item, readable and still unique by its primary key.
        #expect(try target.search(["class": "genp", "acct": "old-here", "m_Limit": "m_LimitAll"]).count == 1)
    }

    @Test("a wrong backup password is errSecAuthFailed and changes nothing")
    func wrongPassword() throws {
        let source = try Self.source()
        _ = try source.file.writeBackup(to: backupPath(source), password: Self.password)
        let target = try TestFile(password: "pw")
        #expect {
            try target.file.restoreBackup(from: backupPath(source), password: SecretBytes(utf8: "not it"))
        } throws: { error in (error as? KeychainError)?.status == .authFailed }
        #expect(try itemCount(target) == 0)
    }

    @Test("every altered byte, every cut and any added byte is errSecDecode, and the keychain stays as it was")
    func damagedFiles() throws {
        let source = try TestFile(password: "pw")
        try source.add(["class": "genp", "acct": "one", "svce": "d", "v_Data": .data(Data("1".utf8))])
        try source.add(["class": "genp", "acct": "two", "svce": "d", "pdmn": "aku", "v_Data": .data(Data("2".utf8))])
        _ = try source.file.writeBackup(to: backupPath(source), password: Self.password)
        let original = fileBytes(backupPath(source))
        // Restored on the same device, so the ThisDeviceOnly record is opened (and checked) too.
        let target = try KeychainFile.create(at: source.root.appendingPathComponent("keychains/t.keychain-db"),
                                             password: nil, settings: .never, configuration: source.configuration)
        let keys = try BackupArchive.Keys(password: Self.password, header: BackupArchive.Reader(bytes: original).header)
        func restore(_ bytes: [UInt8]) -> KeychainStatus? {
            do {
                let reader = try BackupArchive.Reader(bytes: bytes)
                try reader.unlock(keys: keys, deviceKey: target.deviceKey)
                _ = try target.restore(from: reader)
                return nil
            } catch {
                return error.status
            }
        }
        var variants: [[UInt8]] = []
        for i in original.indices {
            var flipped = original
            flipped[i] ^= 0x01
            variants.append(flipped)
            if i < original.count - 1 { variants.append(Array(original[0...i])) }
        }
        variants.append(original + [0])
        variants.append([])
        var outcomes: [KeychainStatus?: Int] = [:]
        for bytes in variants { outcomes[restore(bytes), default: 0] += 1 }
        #expect(outcomes == [.decode: variants.count])
        #expect(try target.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM items") } == 0)
        #expect(restore(original) == nil)
    }

    @Test("the format is named: another version is refused with a clear error, not guessed at")
    func otherVersion() throws {
        let source = try TestFile(password: "pw")
        _ = try source.file.writeBackup(to: backupPath(source), password: Self.password)
        var bytes = fileBytes(backupPath(source))
        bytes[8] = 2
        #expect {
            _ = try BackupArchive.Reader(bytes: bytes)
        } throws: { error in
            (error as? KeychainError)?.status == .decode && (error as? KeychainError)?.message.contains("format 2") == true
        }
    }

    @Test("a backup needs the keychain unlocked: a locked one is asked for, never backed up in part")
    func lockedKeychain() throws {
        let source = try Self.source()
        source.file.lock()
        #expect { _ = try source.file.writeBackup(to: backupPath(source), password: Self.password) } throws: { error in
            (error as? KeychainError)?.pending?.requirement == .keychainPassword
        }
        #expect(!FileManager.default.fileExists(atPath: backupPath(source)))
    }

    @Test("a portable record relabelled as another device's is errSecDecode, not a silent skip")
    func relabelledRecord() throws {
        let source = try TestFile(password: "pw")
        try source.add(["class": "genp", "acct": "one", "svce": "r", "v_Data": .data(Data("1".utf8))])
        _ = try source.file.writeBackup(to: backupPath(source), password: Self.password)
        var bytes = fileBytes(backupPath(source))
        // The first record's kind byte: after the header (magic, version, fields, check, checksum) and its length.
        let checkLength = bytes[89..<93].reduce(0) { $0 << 8 | Int($1) }
        let kindOffset = 8 + 1 + 4 + BackupArchive.Header.fieldsLength + 4 + checkLength + 16 + 4
        #expect(bytes[kindOffset] == BackupArchive.RecordKind.portable.rawValue)
        bytes[kindOffset] = BackupArchive.RecordKind.thisDevice.rawValue
        let target = try TestFile(password: "pw")  // another device: it cannot open this-device records
        let reader = try BackupArchive.Reader(bytes: bytes)
        try reader.unlock(password: Self.password, deviceKey: target.file.deviceKey)
        #expect { _ = try target.file.restore(from: reader) } throws: { error in
            (error as? KeychainError)?.status == .decode
        }
        #expect(try itemCount(target) == 0)
    }
}
