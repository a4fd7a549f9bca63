import Foundation
import KeychainCore
import Testing

/// The decisions one call made, as the access log gets them (issue: who read what).
@Suite("Access trail")
struct AccessTrailTests {
    static func item(_ n: UInt8) -> Item {
        Item(itemClass: .genericPassword, attributes: ["labl": .string("item \(n)")],
             uuid: UUID(uuid: (n, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)))
    }

    @Test("the same decision about the same item is noted once, before and after there are many; others all are", arguments: [3, 40])
    func sameDecisionOnce(count: Int) {
        let trail = AccessTrail()
        let keychain = "/home/u/login.keychain-db"
        AccessTrail.$current.withValue(trail) {
            for n in 1...count {
                AccessTrail.note(.readSecret, Self.item(UInt8(n)), keychain: keychain, decision: .allow)
            }
            // A call that read its rows again decides again: the same decisions, not noted twice.
            for n in 1...count {
                AccessTrail.note(.readSecret, Self.item(UInt8(n)), keychain: keychain, decision: .allow)
            }
            // What differs is noted: another outcome, another action, another keychain, an act on no item (twice).
            AccessTrail.note(.readSecret, Self.item(1), keychain: keychain, decision: .leaveOut)
            AccessTrail.note(.readAttributes, Self.item(1), keychain: keychain, decision: .allow)
            AccessTrail.note(.readSecret, Self.item(1), keychain: "/tmp/other.keychain-db", decision: .allow)
            AccessTrail.noteKeychainAct(.backUp, keychain: keychain)
            AccessTrail.noteKeychainAct(.backUp, keychain: keychain)
        }
        let records = trail.take()
        #expect(records.count == count + 5)
        #expect(records.prefix(count).map(\.item) == (1...count).map { Self.item(UInt8($0)).uuid })
        #expect(records.suffix(5).map(\.outcome) == [.leftOut, .allowed, .allowed, .allowed, .allowed])
        #expect(records.suffix(5).map(\.action) == [.readSecret, .readAttributes, .readSecret, .backUp, .backUp])
        #expect(trail.take().isEmpty)
        // No trail bound: nothing is noted, nothing fails.
        AccessTrail.note(.readSecret, Self.item(1), keychain: keychain, decision: .allow)
        #expect(trail.isEmpty)
    }
}
