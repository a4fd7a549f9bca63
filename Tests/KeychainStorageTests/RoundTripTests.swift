import Foundation
import KeychainCore
import KeychainStorage
import Testing

@Suite("Attribute strings come back byte for byte")
struct RoundTripTests {
    // Foundation's String(bytes:encoding: .utf8) drops a leading byte-order mark; the engine once decoded sealed
    // metadata with it, so an account "\u{FEFF}name" came back as "name" (and an update then collided with "name").
    @Test("a leading byte-order mark, NUL, combining marks, characters outside the BMP", arguments: [
        "\u{FEFF}account", "\u{FEFF}", "a\u{0}b", "e\u{301}", "\u{1F511} key", "\u{FEFF}\u{FEFF}x",
    ])
    func strings(_ value: String) throws {
        let t = try TestFile()
        try t.add(["class": "genp", "svce": "s", "acct": .string(value), "labl": .string(value),
                   "v_Data": .data(Data("secret".utf8))])
        try t.reopen()
        let found = try t.search(["class": "genp", "svce": "s", "acct": .string(value), "r_Attributes": true])
        #expect(found.count == 1)
        #expect(found.first?.item.attributes["acct"]?.stringValue.map { Array($0.utf8) } == Array(value.utf8))
        #expect(found.first?.item.attributes["labl"]?.stringValue.map { Array($0.utf8) } == Array(value.utf8))
    }

    @Test("an account with a byte-order mark and the same account without one stay two items through an update")
    func byteOrderMarkIsPartOfTheKey() throws {
        let t = try TestFile()
        try t.add(["class": "genp", "svce": "s", "acct": "name", "v_Data": .data(Data("plain".utf8))])
        try t.add(["class": "genp", "svce": "s", "acct": "\u{FEFF}name", "v_Data": .data(Data("marked".utf8))])
        let changed = try t.file.update(
            QueryParser.parse(["class": "genp", "svce": "s", "acct": "\u{FEFF}name"], for: .update),
            with: QueryParser.parseUpdate(["labl": "changed"], itemClass: .genericPassword), caller: t.caller)
        #expect(changed == 1)
        #expect(try t.secret("name") == "plain")
        #expect(try t.secret("\u{FEFF}name") == "marked")
        #expect(try t.search(["class": "genp", "m_Limit": "m_LimitAll"]).count == 2)
    }

    @Test("a secret that starts with a byte-order mark reads back as text with it")
    func secretText() throws {
        let t = try TestFile()
        try t.add(["class": "genp", "acct": "a", "v_Data": .data(Data("\u{FEFF}pw".utf8))])
        #expect(try t.secret("a").map { Array($0.utf8) } == Array("\u{FEFF}pw".utf8))
    }
}
