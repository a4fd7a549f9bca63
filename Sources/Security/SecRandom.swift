import Foundation

public typealias SecRandomRef = OpaquePointer
public nonisolated(unsafe) let kSecRandomDefault: SecRandomRef? = nil

/// Fills `bytes` with `count` cryptographically random bytes (the kernel's getrandom).
public func SecRandomCopyBytes(_ rnd: SecRandomRef?, _ count: Int, _ bytes: UnsafeMutableRawPointer) -> Int32 {
    var generator = SystemRandomNumberGenerator()  // getrandom(2) on Linux
    var offset = 0
    while offset < count {
        var word = generator.next()
        let n = min(8, count - offset)
        withUnsafeBytes(of: &word) { (bytes + offset).copyMemory(from: $0.baseAddress!, byteCount: n) }
        offset += n
    }
    return errSecSuccess
}
