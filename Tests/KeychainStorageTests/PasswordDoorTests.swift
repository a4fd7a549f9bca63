import Foundation
import KeychainCore
import KeychainStorage
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The security audit's findings on the password and the device state, each kept as a reproduction.
@Suite("One guarded door for the keychain password; device key and state trusted only when private")
struct PasswordDoorTests {
    @Test("owner checks (user presence, LAContext) count toward the back-off and respect the hard lock-out")
    func ownerCheckUsesBackOff() throws {
        let clock = ManualClock()
        let t = try TestFile(password: "right", clock: clock.read)
        t.file.lock()
        for _ in 0..<5 { #expect(status { try t.file.verifyOwnerPassword(SecretBytes(utf8: "wrong")) } == -25293) }
        // The right password is refused, without being tried, until the wait is over; the keychain stays locked.
        #expect(status { try t.file.verifyOwnerPassword(SecretBytes(utf8: "right")) } == -25293)
        #expect(t.file.isLocked)
        // Through every wait to the hard limit: afterwards not even the right password opens it.
        for _ in 5..<100 {
            clock.now += 3601
            #expect(status { try t.file.verifyOwnerPassword(SecretBytes(utf8: "wrong")) } == -25293)
        }
        clock.now += 3601
        #expect(status { try t.file.verifyOwnerPassword(SecretBytes(utf8: "right")) } == -25293)
        #expect(status { try t.file.unlock(password: SecretBytes(utf8: "right")) } == -25293)
        #expect(t.file.isLocked)
    }

    @Test("parallel wrong guesses from separate handles: exactly the free ones run, none is lost")
    func parallelGuesses() throws {
        let t = try TestFile(password: "right")
        let handles = try (0..<30).map { _ in try KeychainFile.open(at: t.url, configuration: t.configuration) }
        let outcomes = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: handles.count) { i in
            do {
                try handles[i].unlock(password: SecretBytes(utf8: "wrong-\(i)"))
                outcomes.withLock { $0.append("unlocked") }
            } catch {
                let text = (error as? KeychainError)?.message ?? ""
                outcomes.withLock { $0.append(text.contains("too many") ? "refused" : "wrong") }
            }
        }
        let all = outcomes.withLock { $0 }
        #expect(all.filter { $0 == "wrong" }.count == 5)
        #expect(all.filter { $0 == "refused" }.count == 25)
        // The count reached the state: the right password must wait too.
        #expect(status { try t.file.unlock(password: SecretBytes(utf8: "right")) } == -25293)
    }

    @Test("a removed device state is refused once the keychain has been written to")
    func missingState() throws {
        let t = try TestFile(password: "pw")
        let stateDir = t.configuration.stateDirectory
        func removeState() throws {
            for name in try FileManager.default.contentsOfDirectory(atPath: stateDir.path) where name.hasSuffix(".state") {
                try FileManager.default.removeItem(at: stateDir.appendingPathComponent(name))
            }
        }
        try t.add(["class": "genp", "acct": "a", "v_Data": .data(Data("x".utf8))])
        t.file.close()
        try removeState()
        #expect(status { try t.reopen() } == -26275)
    }

    @Test("removing the state of a keychain never written to gives no free guesses: the back-off starts engaged")
    func removedStateKeepsBackOff() throws {
        let clock = ManualClock()
        let t = try TestFile(password: "right", clock: clock.read)
        t.file.lock()
        for _ in 0..<5 { #expect(status { try t.file.unlock(password: SecretBytes(utf8: "wrong")) } == -25293) }
        let stateDir = t.configuration.stateDirectory
        for name in try FileManager.default.contentsOfDirectory(atPath: stateDir.path) where name.hasSuffix(".state") {
            try FileManager.default.removeItem(at: stateDir.appendingPathComponent(name))
        }
        // Neither this handle nor a new one lets the right password in at once.
        #expect(status { try t.file.unlock(password: SecretBytes(utf8: "right")) } == -25293)
        try t.reopen()
        #expect(status { try t.file.unlock(password: SecretBytes(utf8: "right")) } == -25293)
        #expect(t.file.isLocked)
        // After the wait, the right password works, and the state is back.
        clock.now += 61
        try t.file.unlock(password: SecretBytes(utf8: "right"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: stateDir.path).contains { $0.hasSuffix(".state") })
    }

    @Test("a new keychain has its device state from the start")
    func stateAtCreation() throws {
        let t = try TestFile(password: "pw")
        let names = try FileManager.default.contentsOfDirectory(atPath: t.configuration.stateDirectory.path)
        #expect(names.contains { $0.hasSuffix(".state") })
    }

    @Test("the device key is refused when it is a symlink, open to others, or in a directory others can write")
    func untrustedDeviceKey() throws {
        let t = try TestFile(password: nil)
        t.file.close()
        let dir = t.configuration.stateDirectory
        let key = dir.appendingPathComponent("device.key")
        let fm = FileManager.default

        try fm.setAttributes([.posixPermissions: 0o644], ofItemAtPath: key.path)
        #expect(status { try t.reopen() } == -36)
        try fm.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key.path)
        try t.reopen()
        t.file.close()

        try fm.setAttributes([.posixPermissions: 0o777], ofItemAtPath: dir.path)
        #expect(status { try t.reopen() } == -36)
        try fm.setAttributes([.posixPermissions: 0o700], ofItemAtPath: dir.path)

        // A key planted elsewhere and linked in.
        let planted = t.root.appendingPathComponent("planted.key")
        try fm.moveItem(at: key, to: planted)
        try fm.createSymbolicLink(at: key, withDestinationURL: planted)
        #expect(status { try t.reopen() } == -36)
        try fm.removeItem(at: key)
        try fm.moveItem(at: planted, to: key)

        if geteuid() == 0 {  // another user's key (only root can make one here)
            #expect(chown(key.path, 65534, 65534) == 0)
            #expect(status { try t.reopen() } == -36)
            #expect(chown(key.path, 0, 0) == 0)
        }
        try t.reopen()
    }

    @Test("a missing device key while the keychain exists is an error, never a silent new key")
    func missingDeviceKey() throws {
        let t = try TestFile(password: nil)
        try t.add(["class": "genp", "acct": "a"])
        t.file.close()
        let key = t.configuration.stateDirectory.appendingPathComponent("device.key")
        try FileManager.default.removeItem(at: key)
        #expect(status { try t.reopen() } == -36)
        #expect(!FileManager.default.fileExists(atPath: key.path))
    }

    @Test("constraints on an Always-class item are refused (its key needs no password)")
    func constraintsOnAlways() throws {
        let t = try TestFile(password: "pw")
        for protection in [Accessibility.always, .alwaysThisDeviceOnly] {
            let ac = try AccessControl(protection: protection, flags: [.userPresence])
            #expect(status { try t.add(["class": "genp", "acct": "a", "accc": .accessControl(ac)]) } == -50)
        }
        try t.add(["class": "genp", "acct": "b"])
        let ac = try AccessControl(protection: .always, flags: [.devicePasscode])
        #expect(status {
            try t.file.update(QueryParser.parse(["class": "genp", "acct": "b"], for: .update),
                              with: QueryParser.parseUpdate(["accc": .accessControl(ac)], itemClass: .genericPassword),
                              caller: t.caller)
        } == -50)
        // The application password is a key of its own: allowed.
        let appPassword = try AccessControl(protection: .alwaysThisDeviceOnly, flags: [.applicationPassword])
        var q = try QueryParser.parse(["class": "genp", "acct": "c", "accc": .accessControl(appPassword)], for: .add)
        let context = AuthenticationContext()
        context.setApplicationPassword(SecretBytes(utf8: "app"))
        q.authenticationContext = context
        _ = try t.file.add(q, caller: t.caller)
    }
}
