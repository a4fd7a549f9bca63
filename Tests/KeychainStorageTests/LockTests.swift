import Foundation
import KeychainCore
import KeychainStorage
import Testing

@Suite("Lock states and passwords (CRYPTO-DESIGN §5 LOCK, UNLOCK)")
struct LockTests {
    @Test("after lock: WhenUnlocked and WhenPasscodeSet give errSecInteractionNotAllowed; others stay readable")
    func lockSemantics() throws {
        let t = try TestFile(password: "pw")
        for a in Accessibility.allCases {
            try t.add(["class": "genp", "acct": .string(a.rawValue), "pdmn": .string(a.rawValue), "v_Data": .data(Data(a.rawValue.utf8))])
        }
        t.file.lock()
        #expect(t.file.isLocked)
        for a in Accessibility.allCases {
            let s = status { _ = try t.secret(a.rawValue) }
            if a.protection == .untilLocked {
                #expect(s == -25308, "\(a)")
                // Even an attribute-only search of a locked class fails (Apple's secd-35).
                #expect(status { _ = try t.search(["class": "genp", "acct": .string(a.rawValue)]) } == -25308)
            } else {
                #expect(s == 0, "\(a)")
                #expect(try t.secret(a.rawValue) == a.rawValue)
            }
        }
        #expect(status { try t.add(["class": "genp", "acct": "new"]) } == -25308)
        try t.file.unlock(password: SecretBytes(utf8: "pw"))
        #expect(try t.secret("ak") == "ak")
    }

    @Test("after a restart without unlock only the Always classes are readable")
    func restart() throws {
        let t = try TestFile(password: "pw")
        for a in [Accessibility.whenUnlocked, .afterFirstUnlock, .always, .alwaysThisDeviceOnly] {
            try t.add(["class": "genp", "acct": .string(a.rawValue), "pdmn": .string(a.rawValue), "v_Data": .data(Data("x".utf8))])
        }
        try t.reopen()
        #expect(status { _ = try t.secret("ak") } == -25308)
        #expect(status { _ = try t.secret("ck") } == -25308)
        #expect(try t.secret("dk") == "x")
        #expect(try t.secret("dku") == "x")
    }

    @Test("a keychain without a password refuses WhenPasscodeSet items with errSecAuthFailed")
    func noPassword() throws {
        let t = try TestFile(password: nil)
        #expect(!t.file.isLocked)
        #expect(status { try t.add(["class": "genp", "acct": "p", "pdmn": "akpu"]) } == -25293)
        try t.add(["class": "genp", "acct": "a", "v_Data": .data(Data("v".utf8))])
        try t.reopen()
        #expect(try t.secret("a") == "v")
        #expect(status { try t.file.unlock(password: SecretBytes(utf8: "guess")) } == -25293)
    }

    @Test("asking whether the keychain is locked does not keep it unlocked (polling is not use)")
    func pollingIsNotUse() throws {
        let clock = ManualClock()
        let t = try TestFile(password: "pw", clock: clock.read)
        try t.file.setSettings(KeychainSettings(lockInterval: 60, lockOnSleep: false))
        try t.file.unlock(password: SecretBytes(utf8: "pw"))
        try t.add(["class": "genp", "acct": "a"])  // a use, at the start
        for _ in 0..<6 {
            clock.now += 10
            #expect(!t.file.isLocked)
        }
        clock.now += 1
        #expect(t.file.isLocked)  // 61 s after the last use, however often it was asked
    }

    @Test("wrong passwords: errSecAuthFailed, then a back-off that survives reopening, reset by success")
    func backOff() throws {
        let clock = ManualClock()
        let t = try TestFile(password: "right", clock: clock.read)
        t.file.lock()
        for _ in 0..<5 { #expect(status { try t.file.unlock(password: SecretBytes(utf8: "wrong")) } == -25293) }
        // The sixth try, even with the right password, must wait a minute; so must a new process.
        #expect(status { try t.file.unlock(password: SecretBytes(utf8: "right")) } == -25293)
        try t.reopen()
        #expect(status { try t.file.unlock(password: SecretBytes(utf8: "right")) } == -25293)
        clock.now += 61
        try t.file.unlock(password: SecretBytes(utf8: "right"))
        t.file.lock()
        #expect(status { try t.file.unlock(password: SecretBytes(utf8: "wrong")) } == -25293)
        try t.file.unlock(password: SecretBytes(utf8: "right"))  // counter was reset: no wait
    }

    @Test("a forged device state is refused", arguments: [
        ("failed 0", "failed 3"), ("epoch ", "epoch 1"), ("next ", "next 1"), ("\nmac ", "\nverified 1:2:3:4.5|\nmac "),
        ("mac ", "mac A"),
    ])
    func forgedState(edit: (String, String)) throws {
        let t = try TestFile(password: "pw")
        try t.add(["class": "genp", "acct": "a"])
        t.file.close()  // writes the epoch
        let stateDir = t.configuration.stateDirectory
        let stateFile = try #require(try FileManager.default.contentsOfDirectory(atPath: stateDir.path).first { $0.hasSuffix(".state") })
        let path = stateDir.appendingPathComponent(stateFile)
        let original = try String(contentsOf: path, encoding: .utf8)
        let forged = original.replacingOccurrences(of: edit.0, with: edit.1)
        #expect(forged != original)
        try forged.write(to: path, atomically: true, encoding: .utf8)
        #expect(status { try t.reopen() } == -26275)
    }

    @Test("auto-lock after the idle interval")
    func autoLock() throws {
        let clock = ManualClock()
        let t = try TestFile(password: "pw", clock: clock.read)
        try t.file.setSettings(.init(lockInterval: 60, lockOnSleep: false))
        try t.add(["class": "genp", "acct": "a"])
        clock.now += 30
        #expect(!t.file.isLocked)
        clock.now += 61
        #expect(t.file.isLocked)
        #expect(try t.file.settings() == .init(lockInterval: 60, lockOnSleep: false))
    }

    @Test("after sleep: a keychain set to lock on sleep locks; one that is not, or has no password, stays open")
    func lockForSleep() throws {
        let onSleep = try TestFile(password: "pw")
        try onSleep.file.setSettings(.init(lockInterval: nil, lockOnSleep: true))
        try onSleep.add(["class": "genp", "acct": "a"])
        #expect(!onSleep.file.isLocked)
        #expect(onSleep.file.lockForSleep())
        #expect(onSleep.file.isLocked)
        #expect(!onSleep.file.lockForSleep())  // already locked: nothing to announce
        #expect(status { _ = try onSleep.search(["class": "genp", "acct": "a", "r_Data": true]) } == -25308)

        let notOnSleep = try TestFile(password: "pw")
        try notOnSleep.file.setSettings(.init(lockInterval: nil, lockOnSleep: false))
        #expect(!notOnSleep.file.lockForSleep())
        #expect(!notOnSleep.file.isLocked)

        let noPassword = try TestFile()
        try noPassword.file.setSettings(.init(lockInterval: nil, lockOnSleep: true))
        #expect(!noPassword.file.lockForSleep())
        #expect(!noPassword.file.isLocked)
    }

    @Test("a second create at the same path is errSecDuplicateKeychain; opening nothing is errSecNoSuchKeychain")
    func createOpen() throws {
        let t = try TestFile()
        #expect(status { _ = try KeychainFile.create(at: t.url, password: nil, configuration: t.configuration) } == -25296)
        let missing = t.root.appendingPathComponent("nope.keychain-db")
        #expect(status { _ = try KeychainFile.open(at: missing, configuration: t.configuration) } == -25294)
        let junk = t.root.appendingPathComponent("junk.keychain-db")
        try Data("not a database at all, just text".utf8).write(to: junk)
        #expect(status { _ = try KeychainFile.open(at: junk, configuration: t.configuration) } == -25295)
        try KeychainFile.delete(at: t.url)
        #expect(!FileManager.default.fileExists(atPath: t.url.path))
    }
}
