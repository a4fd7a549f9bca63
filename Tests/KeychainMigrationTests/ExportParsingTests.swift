import Foundation
import KeychainCore
@testable import KeychainMigration
import Testing

/// The readers of other stores' exports, on the corner cases a real export may hold.
@Suite("Moving in: reading exports")
struct ExportParsingTests {
    @Test("CSV: quoted fields hold commas, newlines and doubled quotes; columns are found by the header's names")
    func csvQuoting() throws {
        let rows = try KeePassXCExport.parseCSV("a,\"b, c\",\"line 1\nline \"\"2\"\"\"\r\nx,,\n")
        #expect(rows == [["a", "b, c", "line 1\nline \"2\""], ["x", "", ""]])
        #expect(throws: KeychainError.self) { try KeePassXCExport.parseCSV("\"never closed") }
        let secrets = try KeePassXCExport.csv("""
            "Title","Password","Group","Username","URL","Notes"
            "Mail","pw1","Root/Work","me","imaps://mail.example.com:993",""
            "Bin","pw2","Root/Recycle Bin","x","",""

            """)
        #expect(secrets.count == 1)
        #expect(secrets.first?.attributes["srvr"] == .string("mail.example.com"))
        #expect(secrets.first?.attributes["ptcl"] == .string("imps"))
        #expect(secrets.first?.attributes["port"] == .int(993))
        #expect(secrets.first?.attributes["desc"] == .string("Work"))
        #expect(throws: KeychainError.self) { try KeePassXCExport.csv("\"Name\",\"Secret\"\n\"a\",\"b\"\n") }
    }

    @Test("XML: entities and character references decoded, CDATA kept, a DTD refused, mismatched tags refused")
    func xmlReading() throws {
        let root = try MiniXML.parse("""
            <?xml version="1.0" encoding="utf-8" standalone="yes"?>
            <!-- a comment -->
            <a x="1 &amp; 2"><b>&lt;tag&gt; &#233;&#x2615;</b><c><![CDATA[<raw> & stuff]]></c><d/></a>
            """)
        #expect(root.attributes["x"] == "1 & 2")
        #expect(root.child("b")?.text == "<tag> é☕")
        #expect(root.child("c")?.text == "<raw> & stuff")
        #expect(root.child("d") != nil)
        #expect(throws: KeychainError.self) { try MiniXML.parse("<!DOCTYPE a [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><a>&e;</a>") }
        #expect(throws: KeychainError.self) { try MiniXML.parse("<a><b></a></b>") }
        #expect(throws: KeychainError.self) { try MiniXML.parse("<a>&bogus;</a>") }
        #expect(throws: KeychainError.self) { try MiniXML.parse("<a></a><b></b>") }
        // Nesting no export has is refused before it can exhaust the stack.
        let deep = String(repeating: "<g>", count: 100_000) + String(repeating: "</g>", count: 100_000)
        #expect(throws: KeychainError.self) { try MiniXML.parse(deep) }
    }

    @Test("XML: protected custom fields are items of their own; the recycle bin and history do not come")
    func keepassXML() throws {
        let xml = """
            <KeePassFile><Meta><RecycleBinEnabled>True</RecycleBinEnabled><RecycleBinUUID>BIN</RecycleBinUUID></Meta>
            <Root><Group><UUID>ROOT</UUID><Name>Passwords</Name>
              <Entry><String><Key>Title</Key><Value>Router</Value></String>
                <String><Key>UserName</Key><Value>admin</Value></String>
                <String><Key>Password</Key><Value ProtectInMemory="True">r0uter</Value></String>
                <String><Key>PIN</Key><Value ProtectInMemory="True">1234</Value></String>
                <String><Key>Room</Key><Value>cellar</Value></String>
                <History><Entry><String><Key>Title</Key><Value>Router</Value></String>
                  <String><Key>Password</Key><Value>old</Value></String></Entry></History>
              </Entry>
              <Group><UUID>BIN</UUID><Name>Recycle Bin</Name>
                <Entry><String><Key>Title</Key><Value>Gone</Value></String></Entry></Group>
            </Group></Root></KeePassFile>
            """
        let secrets = try KeePassXCExport.xml(xml)
        #expect(secrets.map(\.name) == ["Router", "Router (PIN)"])
        #expect(secrets[0].attributes["icmt"] == .string("Room: cellar"))
        #expect(secrets[0].secret.unprotectedString() == "r0uter")
        #expect(secrets[1].attributes["svce"] == .string("Router"))
        #expect(secrets[1].attributes["acct"] == .string("PIN"))
        #expect(secrets[1].secret.unprotectedString() == "1234")
    }

    @Test("a pass store's entries: every *.gpg file below it, by path without .gpg, sorted; hidden files and directories (.git), directories named *.gpg and links to directories skipped; the store may be a link; no store, errSecParam")
    func passStoreEntries() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("pass-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let store = base.appendingPathComponent("store")
        for path in ["web/b.gpg", "a.gpg", "nested/deep/c.gpg", ".git/objects/x.gpg", ".hidden.gpg", "web/.old.gpg",
                     "notes.txt", ".gpg-id", "odd.gpg/inner.gpg"] {
            let file = store.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data("x".utf8).write(to: file)
        }
        try FileManager.default.createSymbolicLink(atPath: store.appendingPathComponent("loop").path, withDestinationPath: store.path)
        try FileManager.default.createSymbolicLink(atPath: store.appendingPathComponent("linked.gpg").path,
                                                   withDestinationPath: store.appendingPathComponent("a.gpg").path)
        let expected = ["a", "linked", "nested/deep/c", "odd.gpg/inner", "web/b"]
        #expect(try PassStore(directory: store).entries() == expected)
        let link = base.appendingPathComponent("link-to-store")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: store.path)
        #expect(try PassStore(directory: link).entries() == expected)
        let missing = PassStore(directory: base.appendingPathComponent("none"))
        #expect(throws: KeychainError(.param, "no password store at \(base.appendingPathComponent("none").path)")) {
            try missing.entries()
        }
    }
}
