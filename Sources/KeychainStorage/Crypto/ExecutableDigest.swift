import Crypto
import Foundation
import KeychainCore
import KeychainThreads
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The SHA-256 of a program's executable, which names it in trusted-application lists.
///
/// Hashing a large executable takes tens of milliseconds, so digests are kept per file version (device, inode,
/// size, modification and change time): a rebuilt or replaced binary is hashed again, an unchanged one once.
public enum ExecutableDigest {
    private struct Version: Hashable {
        var device: UInt64, inode: UInt64, size: Int64, modified: Int64, modifiedNanos: Int, changed: Int64, changedNanos: Int
    }
    private static let cache = Mutex<[Version: Data]>([:])

    /// A hash under way: callers that need the same file meanwhile wait for it rather than read it again (a new
    /// build of a large program that opens many connections at once would otherwise be read once per connection).
    private final class Flight: @unchecked Sendable {
        // SAFETY: `digest` and `finished` are read and written only with `done` locked.
        let done = Condition()
        var digest: Data?
        var finished = false
    }
    private static let flights = Mutex<[Version: Flight]>([:])

    /// The digest of the file at `path` (`/proc/PID/exe` works: it opens the process's own executable even when
    /// the path was since replaced), or nil when it cannot be read as a regular file. `beforeHashing` runs when the
    /// file must be read (not known from an earlier call): the caller's cue that this may take a while.
    public static func of(path: String, beforeHashing: () -> Void = {}) -> Data? {
        // Non-blocking: a FIFO named as a program (any client can name a path) must not hold the caller; it is
        // then refused as not a regular file.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        let version = Version(device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
                              modified: Int64(info.st_mtim.tv_sec), modifiedNanos: info.st_mtim.tv_nsec,
                              changed: Int64(info.st_ctim.tv_sec), changedNanos: info.st_ctim.tv_nsec)
        if let known = cache.withLock({ $0[version] }) { return known }
        beforeHashing()
        let (flight, joined) = flights.withLock { flights -> (Flight, Bool) in
            if let under = flights[version] { return (under, true) }
            let flight = Flight()
            flights[version] = flight
            return (flight, false)
        }
        if joined {
            flight.done.lock()
            defer { flight.done.unlock() }
            while !flight.finished { flight.done.wait() }
            return flight.digest
        }
        let digest = hash(fd)
        if let digest {
            cache.withLock { cache in
                if cache.count >= 1024 { cache.removeAll() }  // bounded, whatever paths clients name
                cache[version] = digest
            }
        }
        flight.done.lock()
        flight.digest = digest
        flight.finished = true
        flight.done.broadcast()
        flight.done.unlock()
        flights.withLock { $0[version] = nil }
        return digest
    }

    private static func hash(_ fd: Int32) -> Data? {
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        return Data(hasher.finalize())
    }

    /// The program at `path` as a trusted-application entry: canonical path (symbolic links resolved) and digest.
    public static func application(at path: String) -> TrustedApplication? {
        guard let canonical = realpath(path, nil) else { return nil }
        defer { free(canonical) }
        let resolved = String(cString: canonical)
        guard let digest = of(path: resolved) else { return nil }
        return TrustedApplication(path: resolved, digest: digest)
    }
}
