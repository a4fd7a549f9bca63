import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage
import Testing

@Suite("Item semantics")
struct ItemSemanticsTests {
    @Test("internet passwords are unique on account, server, protocol, port, path, domain and auth type")
    func internetUniqueness() throws {
        let keychain = try TestKeychain()
        defer { withExtendedLifetime(keychain) {} }
        let c = keychain.client
        try c.add(["class": "inet", "acct": "u", "srvr": "example.com", "ptcl": "htps", "port": 443])
        #expect(status { try c.add(["class": "inet", "acct": "u", "srvr": "example.com", "ptcl": "htps", "port": 443, "labl": "other"]) } == -25299)
        try c.add(["class": "inet", "acct": "u", "srvr": "example.com", "ptcl": "htps", "port": 8443])
        try c.add(["class": "inet", "acct": "u", "srvr": "example.com", "ptcl": "htps", "port": 443, "path": "/x"])
        let found = try c.search(["class": "inet", "srvr": "example.com", "m_Limit": "m_LimitAll", "r_Attributes": true])
        #expect(found.count == 3)
        #expect(found[0].item.attributes["ptcl"] == .string("htps"))
        #expect(found[0].item.attributes["port"] == .number(443))
    }

    @Test("a search matches every attribute given, but uniqueness uses only the primary key (gotcha 1)")
    func lookupVersusUniqueness() throws {
        let keychain = try TestKeychain()
        defer { withExtendedLifetime(keychain) {} }
        let c = keychain.client
        try c.add(["class": "genp", "acct": "a", "svce": "s", "pdmn": "ak"])
        #expect(status { _ = try c.search(["class": "genp", "acct": "a", "svce": "s", "pdmn": "cku"]) } == -25300)
        #expect(status { try c.add(["class": "genp", "acct": "a", "svce": "s", "pdmn": "cku"]) } == -25299)
        #expect(status { _ = try c.search(["class": "genp", "acct": "a", "labl": "nope"]) } == -25300)
    }

    @Test("access groups: a caller sees only its groups, adds to its first, and a wildcard sees all")
    func accessGroups() throws {
        let kc = try TestKeychain(groups: ["G1", "G2"])
        try kc.client.add(["class": "genp", "acct": "one"])
        try kc.client.add(["class": "genp", "acct": "two", "agrp": "G2"])
        let other = try kc.client(groups: ["G3"])
        #expect(status { _ = try other.search(["class": "genp", "acct": "one"]) } == -25300)
        #expect(status { _ = try other.search(["class": "genp", "agrp": "G1"]) } == -34018)
        #expect(status { try other.delete(["class": "genp", "agrp": "G1"]) } == -34018)
        #expect(status { try other.delete(["class": "genp", "acct": "one"]) } == -25300)
        #expect(status { try other.update(["class": "genp", "acct": "one"], with: ["labl": "x"]) } == -25300)
        let g2 = try kc.client(groups: ["G2"])
        #expect(try g2.search(["class": "genp", "m_Limit": "m_LimitAll"]).count == 1)
        #expect(status { try g2.update(["class": "genp", "acct": "two"], with: ["agrp": "G1"]) } == -34018)
        let none = try kc.client(groups: [])
        #expect(status { try none.add(["class": "genp", "acct": "x"]) } == -34018)
        let all = try kc.client(groups: ["*"])
        #expect(try all.search(["class": "genp", "m_Limit": "m_LimitAll"]).count == 2)
    }

    @Test("an update that would collide changes nothing, even for the items that would not collide")
    func atomicUpdate() throws {
        let keychain = try TestKeychain()
        defer { withExtendedLifetime(keychain) {} }
        let c = keychain.client
        try c.add(["class": "genp", "acct": "x", "svce": "s1", "v_Data": .data(Data("1"))])
        try c.add(["class": "genp", "acct": "x", "svce": "s2", "v_Data": .data(Data("2"))])
        try c.add(["class": "genp", "acct": "y", "svce": "s2"])
        // Renaming every "x" to "y": s1 would be fine, s2 collides; nothing may change.
        #expect(status { try c.update(["class": "genp", "acct": "x"], with: ["acct": "y"]) } == -25299)
        #expect(try c.search(["class": "genp", "acct": "x", "m_Limit": "m_LimitAll"]).count == 2)
    }

    @Test("an update may move an item between accessibility classes and keep its secret")
    func updateAccessibility() throws {
        let keychain = try TestKeychain()
        defer { withExtendedLifetime(keychain) {} }
        let c = keychain.client
        try c.add(["class": "genp", "acct": "a", "v_Data": .data(Data("secret"))])
        try c.update(["class": "genp", "acct": "a"], with: ["pdmn": "dku"])
        let found = try #require(try c.search(["class": "genp", "acct": "a", "r_Data": true, "r_Attributes": true]).first)
        #expect(found.item.attributes["pdmn"] == .string("dku"))
        #expect(found.secret == SecretBytes(utf8: "secret"))
    }

    @Test("certificates default to Always; keys keep numeric attributes as numbers")
    func otherClasses() throws {
        let keychain = try TestKeychain()
        defer { withExtendedLifetime(keychain) {} }
        let c = keychain.client
        let cert = try c.add(["class": "cert", "issr": .data(Data([1, 2])), "slnr": .data(Data([3])), "v_Data": .data(Data([0x30]))])
        #expect(cert.item.attributes["pdmn"] == .string("dk"))
        #expect(status { try c.add(["class": "cert", "issr": .data(Data([1, 2])), "slnr": .data(Data([3]))]) } == -25299)
        let key = try c.add(["class": "keys", "type": "42", "kcls": "1", "atag": "tag"])
        #expect(key.item.attributes["type"] == .number(42))
        #expect(status { try c.add(["class": "keys", "type": 42, "kcls": 1, "atag": "tag"]) } == -25299)
        #expect(try c.search(["class": "keys", "atag": "tag", "type": "42"]).count == 1)
    }

    @Test("a secret round-trips byte for byte, empty and large")
    func secretRoundTrip() throws {
        let keychain = try TestKeychain()
        defer { withExtendedLifetime(keychain) {} }
        let c = keychain.client
        let big = Data((0..<5000).map { UInt8($0 % 251) })
        try c.add(["class": "genp", "acct": "big", "v_Data": .data(big)])
        try c.add(["class": "genp", "acct": "empty"])
        #expect(try c.search(["class": "genp", "acct": "big", "r_Data": true])[0].secret?.unprotectedData() == big)
        #expect(try c.search(["class": "genp", "acct": "empty", "r_Data": true])[0].secret?.count == 0)
    }

    @Test("the two-line API: set, read, overwrite, remove; nil when absent")
    func nativeAPI() throws {
        let kc = try TestKeychain()
        let keychain = try Keychain(service: "com.example.app", client: kc.client)
        #expect(try keychain.string(for: "alice") == nil)
        try keychain.set("s3cret", for: "alice")
        #expect(try keychain.string(for: "alice") == "s3cret")
        try keychain.set("changed", for: "alice")
        #expect(try keychain.string(for: "alice") == "changed")
        try keychain.accessibility(.afterFirstUnlock).set(Data([0, 1, 2]), for: "bob")
        #expect(try keychain.data(for: "bob") == Data([0, 1, 2]))
        #expect(try keychain.accounts().sorted() == ["alice", "bob"])
        try keychain.remove("alice")
        try keychain.remove("alice")
        #expect(try keychain.string(for: "alice") == nil)
    }
}
