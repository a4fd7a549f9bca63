import Foundation
import KeychainCore
import KeychainStorage
import Testing

@Suite("Changing the keychain password")
struct PasswordChangeTests {
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
