import Foundation
@_spi(Testing) import KeychainStorage
import KeychainCore
import Synchronization
import Testing

@Suite("Password change: rotation, races, other handles")
struct PasswordChangeTests {
    func fill(_ t: TestFile) throws {
        for a in Accessibility.allCases {
            try t.add(["class": "genp", "acct": .string(a.rawValue), "pdmn": .string(a.rawValue),
                       "v_Data": .data(Data("secret-\(a.rawValue)".utf8)), "labl": .string("label-\(a.rawValue)")])
        }
    }

    func checkAll(_ t: TestFile) throws {
        for a in Accessibility.allCases {
            #expect(try t.secret(a.rawValue) == "secret-\(a.rawValue)", "\(a)")
        }
    }

    @Test("the password classes get new keys and every item still reads, also after reopening")
    func rotation() throws {
        let t = try TestFile(password: "old")
        try fill(t)
        let before = Dictionary(uniqueKeysWithValues: Accessibility.allCases.map { ($0, t.file.classKeyDigest($0)) })
        try t.file.changePassword(old: SecretBytes(utf8: "old"), new: SecretBytes(utf8: "new"))
        for a in Accessibility.allCases {
            let after = t.file.classKeyDigest(a)
            if a.protection == .deviceOnly { #expect(after == before[a]!, "\(a) kept") } else {
                #expect(after != nil && after != before[a]!, "\(a) rotated")
            }
        }
        try checkAll(t)
        try t.reopen()
        #expect(status { try t.file.unlock(password: SecretBytes(utf8: "old")) } == -25293)
        try t.file.unlock(password: SecretBytes(utf8: "new"))
        try checkAll(t)
        #expect(try t.search(["class": "genp", "acct": "ak", "r_Attributes": true]).first?.item.attributes["labl"]
                == .string("label-ak"))
    }

    @Test("an item behind an application password survives the change and still needs that password")
    func applicationPasswordItem() throws {
        let t = try TestFile(password: "old")
        let context = AuthenticationContext()
        context.setApplicationPassword(SecretBytes(utf8: "app"))
        var q = try QueryParser.parse([
            "class": "genp", "acct": "p", "v_Data": .data(Data("guarded".utf8)),
            "accc": .accessControl(try AccessControl(protection: .whenUnlocked, flags: [.applicationPassword])),
        ], for: .add)
        q.authenticationContext = context
        _ = try t.file.add(q, caller: t.caller)
        try t.file.changePassword(old: SecretBytes(utf8: "old"), new: SecretBytes(utf8: "new"))
        var read = try QueryParser.parse(["class": "genp", "acct": "p", "r_Data": true], for: .search)
        read.authenticationContext = context
        #expect(try t.file.search(read, caller: t.caller).first?.secret?.unprotectedString() == "guarded")
    }

    @Test("a lock landing during the change loses nothing")
    func lockDuringChange() throws {
        let t = try TestFile(password: "old")
        try fill(t)
        let stop = Atomic<Bool>(false)
        let file = t.file
        let locker = Thread { while !stop.load(ordering: .relaxed) { file.lock() } }
        locker.start()
        try t.file.changePassword(old: SecretBytes(utf8: "old"), new: SecretBytes(utf8: "new"))
        stop.store(true, ordering: .relaxed)
        Thread.sleep(forTimeInterval: 0.05)
        t.file.lock()
        try t.file.unlock(password: SecretBytes(utf8: "new"))
        try checkAll(t)
    }

    @Test("another handle sees the change: locked, not damaged, and the new password is not a wrong guess")
    func otherHandle() throws {
        let t = try TestFile(password: "old")
        try fill(t)
        let other = try KeychainFile.open(at: t.url, configuration: t.configuration)
        try other.unlock(password: SecretBytes(utf8: "old"))
        try t.file.changePassword(old: SecretBytes(utf8: "old"), new: SecretBytes(utf8: "new"))
        let write = try QueryParser.parse(["class": "genp", "acct": "late", "v_Data": .data(Data("x".utf8))], for: .add)
        #expect(status { _ = try other.add(write, caller: t.caller) } == -25308)
        try other.unlock(password: SecretBytes(utf8: "new"))
        _ = try other.add(write, caller: t.caller)
        let find = try QueryParser.parse(["class": "genp", "acct": "ak", "r_Data": true], for: .search)
        #expect(try other.search(find, caller: t.caller).first?.secret?.unprotectedString() == "secret-ak")
    }

    @Test("adding and removing a password rotate too; removing deletes WhenPasscodeSet items")
    func addAndRemove() throws {
        let t = try TestFile(password: nil)
        try t.add(["class": "genp", "acct": "a", "v_Data": .data(Data("x".utf8))])
        try t.file.changePassword(old: nil, new: SecretBytes(utf8: "pw"))
        try t.add(["class": "genp", "acct": "p", "pdmn": "akpu", "v_Data": .data(Data("y".utf8))])
        try t.reopen()
        try t.file.unlock(password: SecretBytes(utf8: "pw"))
        #expect(try t.secret("a") == "x")
        #expect(try t.file.changePassword(old: SecretBytes(utf8: "pw"), new: nil) == 1)
        try t.reopen()
        #expect(try t.secret("a") == "x")
        #expect(status { _ = try t.secret("p") } == -25300)
    }

    @Test("the new password opens every item; the old one no longer does")
    func change() throws {
        let t = try TestFile(password: "old")
        try t.add(["class": "genp", "acct": "a", "v_Data": .data(Data("one".utf8))])
        try t.add(["class": "genp", "acct": "p", "pdmn": "akpu", "v_Data": .data(Data("two".utf8))])
        #expect(status { try t.file.changePassword(old: SecretBytes(utf8: "bad"), new: SecretBytes(utf8: "x")) } == -25293)
        try t.file.changePassword(old: SecretBytes(utf8: "old"), new: SecretBytes(utf8: "new"))
        try t.reopen()
        #expect(status { try t.file.unlock(password: SecretBytes(utf8: "old")) } == -25293)
        try t.file.unlock(password: SecretBytes(utf8: "new"))
        #expect(try t.secret("a") == "one")
        #expect(try t.secret("p") == "two")
    }

    @Test("removing the password deletes WhenPasscodeSet items and leaves the rest readable without one")
    func remove() throws {
        let t = try TestFile(password: "pw")
        try t.add(["class": "genp", "acct": "a", "v_Data": .data(Data("keep".utf8))])
        try t.add(["class": "genp", "acct": "p", "pdmn": "akpu", "v_Data": .data(Data("gone".utf8))])
        #expect(try t.file.changePassword(old: SecretBytes(utf8: "pw"), new: nil) == 1)
        #expect(!t.file.hasPassword)
        try t.reopen()
        #expect(!t.file.isLocked)
        #expect(try t.secret("a") == "keep")
        #expect(status { _ = try t.secret("p") } == -25300)
        #expect(status { try t.add(["class": "genp", "acct": "q", "pdmn": "akpu"]) } == -25293)
        // And setting one again allows them.
        try t.file.changePassword(old: nil, new: SecretBytes(utf8: "again"))
        try t.add(["class": "genp", "acct": "q", "pdmn": "akpu"])
        try t.reopen()
        #expect(t.file.isLocked)
        try t.file.unlock(password: SecretBytes(utf8: "again"))
        #expect(try t.secret("a") == "keep")
    }
}
