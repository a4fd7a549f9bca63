import Crypto
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What a keychain's files hold: device, inode and size of the database and of its WAL, and a SHA-256 of their
/// contents.
///
/// Opening a keychain reads every row once to check it against the MACed manifest (against deleted, swapped and
/// rolled-back rows). Doing that in every process makes each `security` command O(items) in SQL, decryption-free
/// but still row by row. When the files hold exactly the bytes this device recorded after its own last full check or
/// its own last clean close, nobody has written them since, and the scan can be skipped. The contents are hashed,
/// not trusted by their change time: ctime moves in clock ticks, so an edit of the same size within one tick would
/// keep it. Hashing the file is a sequential read (milliseconds for thousands of items), far cheaper than the scan.
/// A whole-file rollback is still caught at every open by the epoch.
enum FileFingerprint {
    static func of(_ url: URL) -> String? {
        guard let database = describe(url.path) else { return nil }
        // A WAL without frames (absent, or at most its 32-byte header, which SQLite writes when it opens the file)
        // holds nothing: only a WAL with frames counts.
        let wal = status(url.path + "-wal").flatMap { $0.st_size > 32 ? describe(url.path + "-wal") : nil }
        return database + "|" + (wal ?? "no frames")
    }

    private static func status(_ path: String) -> stat? {
        var info = stat()
        return fstatat(AT_FDCWD, path, &info, 0) == 0 ? info : nil
    }

    /// Identity and size from the open descriptor, and the hash of what it reads.
    private static func describe(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { break }
            buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        let digest = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        return "\(info.st_dev):\(info.st_ino):\(info.st_size):\(digest)"
    }
}
