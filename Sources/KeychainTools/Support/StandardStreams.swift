#if canImport(Glibc)
import Glibc
#endif

/// Standard input and output as bytes, without Foundation's FileHandle (the tools link only FoundationEssentials, so
/// that they start fast).
enum StandardStreams {
    /// Everything on standard input up to its end, read in large blocks.
    static func readAll() -> [UInt8] {
        var bytes: [UInt8] = []
        var block = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = block.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes.append(contentsOf: block[..<count])
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        block.withUnsafeMutableBytes { if let base = $0.baseAddress { memset(base, 0, $0.count) } }  // held a secret
        return bytes
    }

    /// All of `bytes` to descriptor `fd` (retrying short and interrupted writes); a closed pipe ends it quietly.
    static func write(_ bytes: [UInt8], to fd: Int32) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written > 0 { offset += written } else if written < 0 && errno == EINTR { continue } else { return }
            }
        }
    }
}
