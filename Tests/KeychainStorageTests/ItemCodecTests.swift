import Foundation
import KeychainCore
import Testing

@testable import KeychainStorage

/// The metadata's strings are read straight from the decrypted buffer: they must come back as written, and bytes
/// that are not UTF-8 (a file written by something else) must be errSecDecode, never a repaired string.
@Suite("Item metadata encoding")
struct ItemCodecTests {
    static let awkward = "caf\u{E9} \u{1F642} \u{FFFD} \u{0} \u{10FFFF} \u{7FF}\u{800}\u{FFFF}"

    func item(service: String) -> Item {
        Item(itemClass: .genericPassword, attributes: ["svce": .string(service), "acct": .string(""), "labl": .string("l")],
             uuid: UUID())
    }

    @Test("every kind of UTF-8 sequence, the replacement character itself and an empty string come back as written")
    func roundTrip() throws {
        let original = item(service: Self.awkward)
        let decoded = try ItemCodec.decode(Data(ItemCodec.encode(original)), itemClass: .genericPassword, uuid: original.uuid)
        #expect(decoded.attributes["svce"] == .string(Self.awkward))
        #expect(decoded.attributes["acct"] == .string(""))
        #expect(decoded.attributes["labl"] == .string("l"))
    }

    /// Each replaces the four bytes of the emoji in the encoded service: the same length, so only the check of the
    /// bytes themselves can notice.
    @Test("bytes that are not UTF-8 in a string are errSecDecode", arguments: [
        [0xF0, 0x9F, 0x99, 0x41],  // a sequence cut short, then ASCII
        [0xF0, 0x9F, 0x99, 0xFF],  // a byte that is never UTF-8
        [0xC0, 0x80, 0x41, 0x41],  // an overlong NUL
        [0xED, 0xA0, 0x80, 0x41],  // a surrogate
        [0xF4, 0x90, 0x80, 0x80],  // past U+10FFFF
        [0x80, 0x41, 0x41, 0x41],  // a lone continuation byte
        [0xEF, 0xBF, 0xBD, 0x41],  // the replacement character, written as such: valid (the control case)
    ] as [[UInt8]])
    func invalidUTF8(bytes: [UInt8]) throws {
        let original = item(service: Self.awkward)
        var encoded = ItemCodec.encode(original)
        let emoji = Array("\u{1F642}".utf8)
        let at = try #require(encoded.indices.first { encoded[$0...].starts(with: emoji) })
        encoded.replaceSubrange(at..<at + 4, with: bytes)
        let result = Result { try ItemCodec.decode(Data(encoded), itemClass: .genericPassword, uuid: original.uuid) }
        if bytes == [0xEF, 0xBF, 0xBD, 0x41] {
            let expected = Self.awkward.replacingOccurrences(of: "\u{1F642}", with: "\u{FFFD}A")
            #expect(try result.get().attributes["svce"] == .string(expected))
        } else {
            #expect(throws: KeychainError.self) { try result.get() }
            #expect((try? result.get()) == nil)
        }
    }
}
