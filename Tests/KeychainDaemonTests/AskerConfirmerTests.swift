import KeychainClient
import KeychainCore
import Synchronization
import Testing

/// keychaind works out where a session's decisions are asked only when the first one is (the place is read
/// from files); every copy of the asker then uses the one it found.
@Suite("Asker: a confirmer found at its first use")
struct AskerConfirmerTests {
    @Test("not looked for until a decision is asked; looked for once, shared by copies; none found: unavailable")
    func foundOnce() {
        let looked = Mutex(0)
        let confirmer = AllowingPrompter()
        let asker = Asker(prompter: nil, confirmerAtFirstUse: {
            looked.withLock { $0 += 1 }
            return confirmer
        })
        let copy = asker
        #expect(looked.withLock { $0 } == 0)
        #expect(asker.confirm("first") == .allow)
        #expect(copy.confirm("second") == .allow)
        #expect(looked.withLock { $0 } == 1)
        #expect(confirmer.asked.withLock { $0 } == 2)

        let nowhere = Mutex(0)
        let nobody = Asker(prompter: nil, confirmerAtFirstUse: {
            nowhere.withLock { $0 += 1 }
            return nil
        })
        #expect(nobody.confirm("anyone?") == .unavailable)
        #expect(nobody.confirmer == nil)
        #expect(nowhere.withLock { $0 } == 1)
        // Given, not found: as before.
        #expect(Asker(prompter: nil, confirmer: confirmer).confirm("given") == .allow)
        #expect(Asker(prompter: nil).confirmer == nil)
    }
}
