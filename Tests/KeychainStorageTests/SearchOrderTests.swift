import Foundation
import KeychainCore
import KeychainStorage
import Testing

/// A search opens its candidates as it reads them and stops at its limit (KeychainFile.search): across many
/// candidates, matching or not, the matches come in insertion order, up to the limit.
@Suite("Search order and limits across many candidates")
struct SearchOrderTests {
    /// 21 items of one service, every third labelled "pick".
    func filled() throws -> TestFile {
        let t = try TestFile()
        for i in 0..<21 {
            try t.add(["class": "genp", "svce": "many", "acct": .string("a\(i)"), "labl": .string(i % 3 == 0 ? "pick" : "other"),
                       "v_Data": .data(Data("s\(i)".utf8))])
        }
        return t
    }

    func accounts(_ found: [FoundItem]) -> [String] { found.compactMap { $0.item.attributes["acct"]?.stringValue } }

    @Test("every candidate matches: limit all, a few, one", arguments: [nil, 1, 5, 8, 9, 20, 21, 30] as [Int?])
    func everyCandidate(limit: Int?) throws {
        let t = try filled()
        var query: [String: QueryValue] = ["class": "genp", "svce": "many", "r_Attributes": true, "r_Data": true]
        query["m_Limit"] = limit.map { .int(Int64($0)) } ?? .string("m_LimitAll")
        let found = try t.search(query)
        let expected = (0..<min(limit ?? 21, 21)).map { "a\($0)" }
        #expect(accounts(found) == expected)
        #expect(found.map { $0.secret?.unprotectedString() } == expected.map { "s" + $0.dropFirst() })
    }

    @Test("candidates that do not match (the label is no blind index): the matches in order, up to the limit",
          arguments: [nil, 1, 2, 3, 4, 7] as [Int?])
    func someCandidates(limit: Int?) throws {
        let t = try filled()
        var query: [String: QueryValue] = ["class": "genp", "svce": "many", "labl": "pick", "r_Attributes": true]
        query["m_Limit"] = limit.map { .int(Int64($0)) } ?? .string("m_LimitAll")
        let picked = stride(from: 0, to: 21, by: 3).map { "a\($0)" }
        #expect(try accounts(t.search(query)) == Array(picked.prefix(limit ?? picked.count)))
        // None among many candidates: not found.
        #expect(status { _ = try t.search(["class": "genp", "svce": "many", "labl": "none"]) } == -25300)
    }
}
