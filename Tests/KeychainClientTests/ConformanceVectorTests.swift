import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage
import Testing

/// The conformance vectors of semantics §10, in order, on one store (caller groups G1, G2).
@Suite("Semantics §10 conformance vectors")
struct ConformanceVectorTests {
    @Test("vectors 1–27")
    func vectors() throws {
        let clock = ManualClock()
        let kc = try TestKeychain(clock: clock.read)
        let c = kc.client

        // 1
        let added = try c.add(["class": "genp", "acct": "a", "svce": "s", "v_Data": .data(Data("p"))])
        #expect(added.item.attributes["agrp"] == .string("G1"))
        #expect(added.item.attributes["pdmn"] == .string("ak"))
        #expect(added.item.attributes["sync"] == .number(0))
        // 2
        #expect(status { try c.add(["class": "genp", "acct": "a", "svce": "s", "v_Data": .data(Data("p"))]) } == -25299)
        // 3
        #expect(status { try c.add(["class": "genp", "acct": "a", "svce": "s", "pdmn": "ck"]) } == -25299)
        // 4
        #expect(status { try c.add(["class": "genp", "acct": "a", "svce": "s", "sync": true]) } == 0)
        // 5: no return keys: success, nothing returned
        let plain = try c.search(["class": "genp", "acct": "a"])
        #expect(plain.count == 1)
        // 6
        let six = try c.search(["class": "genp", "acct": "a", "r_Data": true, "m_Limit": "m_LimitAll"])
        #expect(six.count == 1)
        #expect(six[0].secret == SecretBytes(utf8: "p"))
        // 7
        let seven = try c.search(["class": "genp", "acct": "a", "sync": "syna", "r_Attributes": true, "m_Limit": "m_LimitAll"])
        #expect(seven.count == 2)
        // 8
        #expect(status { _ = try c.search(["class": "genp", "acct": "A"]) } == -25300)
        #expect(status { _ = try c.search(["class": "genp", "acct": "A", "m_CaseInsensitive": true]) } == -25300)
        // 9
        #expect(status { try c.add(["class": "genp"]) } == 0)
        #expect(status { try c.add(["class": "genp", "acct": ""]) } == -25299)
        // 10
        #expect(status { try c.add(["class": "genp", "acct": "a", "svce": .data(Data("s"))]) } == -25299)
        // 11
        #expect(status { _ = try c.search(["class": "genp", "srvr": "x"]) } == -25303)
        // 12
        #expect(status { _ = try c.search(["acct": "a"]) } == -50)
        #expect(status { _ = try c.search(["class": "bogus"]) } == -25306)
        // 13, 14: iOS answers -50; macOS (whose branches Linux code takes) strips return and match keys and updates
        // every match, as its SecItemDelete does (vector 19; COMPATIBILITY.md). A second non-synchronizable item of
        // account "a" shows that a limit of One still updates both; it goes again before vector 16.
        try c.add(["class": "genp", "acct": "a", "svce": "s2", "v_Data": .data(Data("p"))])
        #expect(try c.update(["class": "genp", "acct": "a", "r_Data": true], with: ["v_Data": .data(Data("r"))]) == 2)
        #expect(try c.update(["class": "genp", "acct": "a", "m_Limit": "m_LimitOne"], with: ["v_Data": .data(Data("p"))]) == 2)
        #expect(try c.delete(["class": "genp", "acct": "a", "svce": "s2"]) == 1)
        // 15
        #expect(status { try c.update(["class": "genp", "acct": "a"], with: ["class": "genp"]) } == -25303)
        // 16
        let before = try #require(try c.search(["class": "genp", "acct": "a", "r_Attributes": true]).first?.item)
        clock.advance(by: 1)
        #expect(try c.update(["class": "genp", "acct": "a"], with: ["v_Data": .data(Data("q"))]) == 1)
        let after = try #require(try c.search(["class": "genp", "acct": "a", "r_Attributes": true, "r_Data": true]).first)
        #expect(after.secret == SecretBytes(utf8: "q"))
        #expect(after.item.attributes["cdat"] == before.attributes["cdat"])
        #expect(after.item.attributes["mdat"] != before.attributes["mdat"])
        // 17
        try c.add(["class": "genp", "acct": "b", "svce": "s"])
        #expect(status { try c.update(["class": "genp", "acct": "b"], with: ["acct": "a"]) } == -25299)
        #expect(try c.search(["class": "genp", "acct": "b", "svce": "s"]).count == 1)
        // 18
        #expect(status { try c.update(["class": "genp", "acct": "zzz"], with: ["v_Data": .data(Data("q"))]) } == -25300)
        // 19: iOS answers -50; macOS (whose branches Linux code takes) deletes every match (COMPATIBILITY.md)
        #expect(try c.delete(["class": "genp", "svce": "s", "m_Limit": "m_LimitAll"]) == 2)
        // 20: every non-sync match went; the sync item from #4 remains
        #expect(status { try c.delete(["class": "genp", "svce": "s"]) } == -25300)
        #expect(try c.search(["class": "genp", "acct": "a", "sync": true]).count == 1)
        // 21
        #expect(status { try c.add(["class": "genp", "acct": "c", "agrp": "G9"]) } == -34018)
        // 22, 23
        let ac = try AccessControl(protection: .whenUnlocked, flags: [])
        #expect(status { try c.add(["class": "genp", "acct": "c", "pdmn": "ak", "accc": .accessControl(ac)]) } == -50)
        #expect(status { try c.add(["class": "genp", "acct": "c", "accc": .accessControl(ac), "sync": true]) } == -50)
        // 24
        #expect(status { _ = try AccessControl(protection: .whenUnlocked, flags: [.userPresence, .or]) } == -50)
        // 25
        let ref = try #require(try c.search(["class": "genp", "acct": "a", "sync": true]).first?.item.persistentReference)
        #expect(status { _ = try c.search(["class": "genp", "v_PersistentRef": .data(ref.data), "acct": "a"]) } == -50)
        #expect(try c.search(["v_PersistentRef": .data(ref.data)]).first?.item.attributes["acct"] == .string("a"))
        // 26
        for n in 0..<3 { try c.add(["class": "genp", "acct": .string("n\(n)"), "svce": "limit"]) }
        #expect(try c.search(["class": "genp", "svce": "limit", "m_Limit": 2, "r_Attributes": true]).count == 2)
        // 27
        for op in [0, 1, 2] {
            let s = status {
                switch op {
                case 0: try c.add(["class": "genp", "acct": "x", "u_AuthUI": "u_AuthUIS"])
                case 1: try c.update(["class": "genp", "u_AuthUI": "u_AuthUIS"], with: ["labl": "l"])
                default: try c.delete(["class": "genp", "u_AuthUI": "u_AuthUIS"])
                }
            }
            #expect(s == -50)
        }
    }
}
