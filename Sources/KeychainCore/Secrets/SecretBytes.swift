#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Secret bytes (a password, a token) in one buffer that is wiped when the last copy goes away.
///
/// Not `Codable`, not `Hashable`; equality is constant-time; `description` redacts. Read the bytes only inside
/// ``withUnsafeBytes(_:)`` and don't let the pointer escape.
public struct SecretBytes: Sendable {
    // SAFETY: the buffer is written once in init and wiped once in deinit; copies share it read-only.
    private final class Storage: @unchecked Sendable {
        let buffer: UnsafeMutableRawBufferPointer
        let count: Int
        init(count: Int) {
            self.count = count
            buffer = .allocate(byteCount: max(count, 1), alignment: 16)
        }
        deinit {
            if let base = buffer.baseAddress { wipe(base, buffer.count) }
            buffer.deallocate()
        }
    }

    private let storage: Storage
    public var count: Int { storage.count }
    public var isEmpty: Bool { storage.count == 0 }

    /// Copies `bytes` in and wipes the caller's array.
    public init(consuming bytes: inout [UInt8]) {
        storage = Storage(count: bytes.count)
        bytes.withUnsafeMutableBytes { src in
            if let base = src.baseAddress, src.count > 0 {
                storage.buffer.baseAddress!.copyMemory(from: base, byteCount: src.count)
                wipe(base, src.count)
            }
        }
    }

    /// Copies bytes from a buffer the caller owns (and wipes, if it can).
    public init(copying bytes: UnsafeRawBufferPointer) {
        storage = Storage(count: bytes.count)
        if let base = bytes.baseAddress, bytes.count > 0 {
            storage.buffer.baseAddress!.copyMemory(from: base, byteCount: bytes.count)
        }
    }

    /// Copies `data`. The caller's `Data` cannot be wiped; this is the narrow boundary where Apple's API hands us one.
    public init(_ data: Data) {
        self = data.withUnsafeBytes { SecretBytes(copying: $0) }
    }

    /// Copies the UTF-8 bytes of `string`.
    public init(utf8 string: String) {
        var bytes = Array(string.utf8)
        self.init(consuming: &bytes)
    }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: storage.buffer.baseAddress, count: storage.count))
    }

    /// A `Data` copy, for APIs that must return one (Apple's `kSecValueData`). The copy is not wiped.
    public func unprotectedData() -> Data { withUnsafeBytes { Data($0) } }

    /// A `String` copy if the bytes are UTF-8. The copy is not wiped.
    public func unprotectedString() -> String? { withUnsafeBytes { String(validating: $0, as: UTF8.self) } }
}

extension SecretBytes: Equatable {
    /// Constant time in the length of the secrets.
    public static func == (a: SecretBytes, b: SecretBytes) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                var diff: UInt8 = 0
                for i in 0..<pa.count { diff |= pa[i] ^ pb[i] }
                return diff == 0
            }
        }
    }
}

extension SecretBytes: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String { "SecretBytes(\(count) bytes, redacted)" }
    public var debugDescription: String { description }
}

/// Overwrites memory in a way the optimiser may not drop.
@inline(never)
public func wipe(_ pointer: UnsafeMutableRawPointer, _ count: Int) {
    #if canImport(Glibc) || canImport(Musl)
    explicit_bzero(pointer, count)
    #else
    memset_s(pointer, count, 0, count)
    #endif
}
