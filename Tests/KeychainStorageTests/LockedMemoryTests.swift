import Crypto
import Foundation
import KeychainCore
import KeychainStorage
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Key material in locked memory")
struct LockedMemoryTests {
    @Test("an unlocked keychain's class keys live in pages that are mlock'd and left out of core files")
    func lockedPages() throws {
        let file = try TestFile.twoItems()
        #expect(try file.secret("a") == "secret-a")
        let status = LockedMemory.status
        #expect(status.pages >= 1)
        // Root (CI) may always lock; others as far as RLIMIT_MEMLOCK allows (a page is 4 KiB).
        if geteuid() == 0 { #expect(status.locked == status.pages) }
        // The kernel's view: a mapping flagged both "lo" (VM_LOCKED) and "dd" (VM_DONTDUMP).
        // Read to its end (a /proc file has no size to go by).
        let smaps = String(decoding: FileHandle(forReadingAtPath: "/proc/self/smaps")?.readDataToEndOfFile() ?? Data(),
                           as: UTF8.self)
        let flags = smaps.split(separator: "\n").filter { $0.hasPrefix("VmFlags:") }
            .map { Set($0.split(separator: " ").dropFirst().map(String.init)) }
        #expect(flags.contains { $0.contains("dd") })
        if status.locked > 0 { #expect(flags.contains { $0.contains("dd") && $0.contains("lo") }) }
    }

    @Test("a key's bytes leave its slot when the key is dropped; a copy for use is the same key")
    func slotWiped() {
        let bytes = [UInt8](repeating: 0xA5, count: 32)
        var storage: UnsafeRawPointer?
        do {
            let locked = LockedKey(SymmetricKey(data: bytes))
            storage = locked.storage
            #expect(locked.key == SymmetricKey(data: bytes))
            #expect(Array(UnsafeRawBufferPointer(start: locked.storage, count: 32)) == bytes)
        }
        // Released: zeroed (or, if another test took the slot at once, holding its own key: never ours).
        #expect(Array(UnsafeRawBufferPointer(start: storage, count: 32)) != bytes)
    }

    @Test("locking drops the class keys: reads fail until the next unlock, which brings them back")
    func lockDropsKeys() throws {
        let file = try TestFile.twoItems()
        file.file.lock()
        #expect(throws: KeychainError.self) { try file.secret("a") }
        try file.file.unlock(password: SecretBytes(utf8: "pw"))
        #expect(try file.secret("b") == "secret-b")
    }
}
