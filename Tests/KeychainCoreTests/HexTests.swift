import KeychainCore
import Testing

/// Hex digits as keychaind writes them (a program's digest in trust records and the access log) and reads them back.
@Suite("Hex")
struct HexTests {
    @Test("every byte is two digits, high nibble first, in the case asked for; bytes() reads them back")
    func roundTrip() {
        let all = (0...255).map { UInt8($0) }
        let lower = Hex.string(all)
        #expect(lower.count == 512)
        #expect(lower.hasPrefix("000102030405060708090a0b0c0d0e0f10"))
        #expect(lower.hasSuffix("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"))
        #expect(Hex.string(all, uppercase: true) == lower.uppercased())
        #expect(Hex.bytes(lower) == all)
        // Each byte as Hex.byte writes it, and a sequence that is not an array.
        #expect(lower == all.map { Hex.byte($0) }.joined())
        #expect(Hex.string([UInt8]().lazy.map { $0 }) == "")
        #expect(Hex.string(stride(from: UInt8(0xa0), through: 0xa2, by: 1)) == "a0a1a2")
    }
}
