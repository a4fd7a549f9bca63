import Crypto
import KeychainCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Pages for the keys that live as long as a keychain is unlocked (class and metadata keys): locked in RAM with
/// mlock (never written to swap, where they would outlive the lock and the process) and marked MADV_DONTDUMP (left
/// out of core files). A key is copied out into a `SymmetricKey` only for the moment it is used; its slot is zeroed
/// when the keychain locks.
///
/// mlock counts against RLIMIT_MEMLOCK (64 KiB to 8 MiB for ordinary users): a page holds 64 keys, so a daemon with a
/// few dozen unlocked keychains fits. When the limit refuses a page, the page is still used (DONTDUMP, zeroed) and
/// ``status`` says it is not locked.
package enum LockedMemory {
    static let slotSize = 64
    private static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    private struct Pool {
        var freeSlots: [UInt] = []
        var pages = 0
        var lockedPages = 0
    }
    private static let pool = Mutex(Pool())

    /// How many pages the pool has, and how many of them mlock holds in RAM.
    package static var status: (pages: Int, locked: Int) { pool.withLock { ($0.pages, $0.lockedPages) } }

    /// A zeroed slot of ``slotSize`` bytes.
    static func allocate() -> UnsafeMutableRawPointer {
        let address = pool.withLock { pool -> UInt in
            if pool.freeSlots.isEmpty {
                let page = mmap(nil, pageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                guard let page, page != MAP_FAILED else { fatalError("cannot map a page for key material") }
                _ = madvise(page, pageSize, MADV_DONTDUMP)
                pool.pages += 1
                if mlock(page, pageSize) == 0 { pool.lockedPages += 1 }
                let base = UInt(bitPattern: page)
                for slot in stride(from: pageSize - slotSize, through: 0, by: -slotSize) {
                    pool.freeSlots.append(base + UInt(slot))
                }
            }
            return pool.freeSlots.removeLast()
        }
        return UnsafeMutableRawPointer(bitPattern: address)!
    }

    /// Zeroes a slot and returns it to the pool.
    static func release(_ slot: UnsafeMutableRawPointer) {
        wipeBytes(slot, slotSize)
        pool.withLock { $0.freeSlots.append(UInt(bitPattern: slot)) }
    }

    /// Zeroing the compiler cannot leave out.
    static func wipeBytes(_ pointer: UnsafeMutableRawPointer, _ count: Int) {
        explicit_bzero(pointer, count)
    }
}

/// One key in a ``LockedMemory`` slot; zeroed when the last reference goes (the keychain locked, or a class key
/// replaced).
package final class LockedKey: Sendable {
    // SAFETY: written once in init, read-only after, zeroed in deinit.
    private nonisolated(unsafe) let slot: UnsafeMutableRawPointer
    private let count: Int

    package init(_ key: SymmetricKey) {
        let slot = LockedMemory.allocate()
        count = key.withUnsafeBytes { bytes in
            precondition(bytes.count <= LockedMemory.slotSize, "a key larger than a locked slot")
            slot.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
            return bytes.count
        }
        self.slot = slot
    }

    /// A copy for one use (swift-crypto zeroes it when it is released).
    package var key: SymmetricKey { SymmetricKey(data: UnsafeRawBufferPointer(start: slot, count: count)) }

    /// Where the key's bytes are (the page stays mapped after the slot is released: tests read it back).
    package var storage: UnsafeRawPointer { UnsafeRawPointer(slot) }

    deinit { LockedMemory.release(slot) }
}

/// The keys of the classes that are unlocked, each in locked memory; reads as a dictionary of `SymmetricKey`.
struct LockedKeyRing: Sendable {
    private var slots: [Accessibility: LockedKey] = [:]

    subscript(accessibility: Accessibility) -> SymmetricKey? {
        get { slots[accessibility]?.key }
        set { slots[accessibility] = newValue.map(LockedKey.init) }
    }

    /// Copies of every key (for a password change, which holds them only while it runs).
    var all: [Accessibility: SymmetricKey] { slots.mapValues(\.key) }
}
