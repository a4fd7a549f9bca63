import Foundation
import KeychainCore
import Testing

/// A search compares each candidate's attributes with the query's through ``AttributeValue/hasSameMatchKey(as:for:)``,
/// which must agree with comparing ``AttributeValue/matchKey(for:)`` in every case (semantics §1.2: a blob's "abc"
/// and <616263> are equal, a string attribute's are not).
@Suite("Attribute match keys")
struct MatchKeyTests {
    static let kinds: [AttributeKind] = [.blob, .data, .string, .number, .date, .access, .accessControl, .sync, .uuid, .sha1]
    static let values: [AttributeValue] = [
        .string(""), .data(Data()), .string("abc"), .data(Data("abc".utf8)), .string("abd"), .data(Data("abd".utf8)),
        .string("ab"), .data(Data("abcd".utf8)),
        // The same text composed and decomposed: equal Swift strings, different bytes.
        .string("\u{E9}"), .string("e\u{301}"), .data(Data("\u{E9}".utf8)), .data(Data("e\u{301}".utf8)),
        .string("7"), .number(7), .number(8), .number(0), .data(Data([7, 0, 0, 0])),
        .date(0), .date(1.5), .string("\u{0}"), .data(Data([0])),
    ]

    @Test("the same answer as comparing the two keys, for every pair of values and every kind")
    func agreesWithMatchKey() {
        for kind in Self.kinds {
            for a in Self.values {
                for b in Self.values {
                    #expect(a.hasSameMatchKey(as: b, for: kind) == (a.matchKey(for: kind) == b.matchKey(for: kind)),
                            "\(a) against \(b) as \(kind)")
                }
            }
        }
    }

    @Test("bytes decide, not Unicode equivalence: composed and decomposed é differ")
    func bytesDecide() {
        #expect(String("\u{E9}") == String("e\u{301}"))  // what Swift's == says
        #expect(!AttributeValue.string("\u{E9}").hasSameMatchKey(as: .string("e\u{301}"), for: .string))
        #expect(AttributeValue.string("abc").hasSameMatchKey(as: .data(Data("abc".utf8)), for: .blob))
        #expect(!AttributeValue.string("abc").hasSameMatchKey(as: .data(Data("abc".utf8)), for: .string))
    }
}
