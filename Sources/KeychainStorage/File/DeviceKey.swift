import Crypto
import Foundation
import KeychainCore

#if canImport(Glibc)
import Glibc
#endif

/// The 256-bit device key: our stand-in for Apple's hardware UID key. It lives outside the keychain file
/// (`$XDG_STATE_HOME/keychain/device.key`), never in backups, so a copied keychain file alone is useless.
enum DeviceKey {
    static let fileName = "device.key"

    /// The device key in `directory`, created (with the directory) only when `create` is true: a key that went
    /// missing while keychains exist is an error, never silently a new key that would open nothing.
    ///
    /// The directory and the key must be this user's and private: a key planted by someone else (a shared or
    /// world-writable XDG_STATE_HOME, a symlink) would let them read everything sealed under it.
    static func load(in directory: URL, create: Bool) throws(KeychainError) -> SymmetricKey {
        if create { try FileSystem.makePrivateDirectory(directory) }
        let path = directory.appendingPathComponent(fileName).path
        if FileManager.default.fileExists(atPath: directory.path) { try FileSystem.checkPrivateDirectory(directory) }
        if let key = try read(path) { return key }
        guard create else {
            throw KeychainError(
                .io, "the device key \(path) is missing: keychains made on this device cannot be opened without it")
        }
        // Write a temporary file, then link it into place: two processes racing both end with the same key.
        let temp = path + ".\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        var fresh = SymmetricKey.random().bytes
        defer { fresh.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        try FileSystem.writeNewFile(temp, bytes: fresh)
        defer { unlink(temp) }
        if link(temp, path) != 0 && errno != EEXIST {
            throw KeychainError(.io, "cannot create the device key (errno \(errno))")
        }
        guard let key = try read(path) else { throw KeychainError(.io, "cannot read the device key") }
        return key
    }

    /// Reads the key without following a symlink, and only if it is a regular file of this user that nobody else
    /// may read or write (mode 0600).
    private static func read(_ path: String) throws(KeychainError) -> SymmetricKey? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            if errno == ELOOP { throw KeychainError(.io, "the device key \(path) is a symbolic link; refusing it") }
            throw KeychainError(.io, "cannot open the device key \(path) (errno \(errno))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw KeychainError(.io, "cannot stat the device key (errno \(errno))") }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw KeychainError(.io, "the device key \(path) is not a regular file; refusing it")
        }
        guard info.st_uid == geteuid() else {
            throw KeychainError(.io, "the device key \(path) belongs to another user; refusing it")
        }
        guard info.st_mode & 0o077 == 0 else {
            let mode = String(info.st_mode & 0o777, radix: 8)
            throw KeychainError(.io, "the device key \(path) is open to other users (mode \(mode)); it must be 0600")
        }
        var bytes = FileSystem.readAll(fd)
        defer { bytes.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        guard bytes.count == 32 else { throw KeychainError(.decode, "the device key file is damaged") }
        return SymmetricKey(data: bytes)
    }
}

/// Small POSIX file helpers with the permissions a keychain needs (0700 directories, 0600 files).
enum FileSystem {
    static func makePrivateDirectory(_ url: URL) throws(KeychainError) {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDir), isDir.boolValue { return }
        do {
            try FileManager.default.createDirectory(
                at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw KeychainError(.io, "cannot create \(url.lastPathComponent)")
        }
    }

    /// Refuses a directory that is a symlink, belongs to another user, or that others may write to.
    static func checkPrivateDirectory(_ url: URL) throws(KeychainError) {
        var info = stat()
        guard lstat(url.path, &info) == 0 else { throw KeychainError(.io, "cannot stat \(url.path) (errno \(errno))") }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw KeychainError(.io, "\(url.path) is not a directory (a symbolic link?); refusing it")
        }
        guard info.st_uid == geteuid() else { throw KeychainError(.io, "\(url.path) belongs to another user; refusing it") }
        guard info.st_mode & 0o022 == 0 else {
            let mode = String(info.st_mode & 0o777, radix: 8)
            throw KeychainError(.io, "\(url.path) is writable by other users (mode \(mode)); it must be 0700")
        }
    }

    static func readFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return readAll(fd)
    }

    /// The first `count` bytes (fewer if it is shorter) of whatever is at `path`; nil when nothing is there. Never
    /// waits (a FIFO gives what it has).
    static func readPrefix(_ path: String, count: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)
        guard fd >= 0 else { return errno == ENOENT ? nil : [] }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: count)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, count) }
        return n > 0 ? Array(buffer[0..<n]) : []
    }

    static func readAll(_ fd: Int32) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            out.append(contentsOf: buffer[0..<n])
        }
        buffer.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } }
        return out
    }

    /// Creates `path` (must not exist) with mode 0600, writes `bytes` and syncs it.
    static func writeNewFile(_ path: String, bytes: [UInt8], sync: Bool = true) throws(KeychainError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeychainError(.io, "cannot create a file (errno \(errno))") }
        defer { close(fd) }
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw KeychainError(.io, "cannot write a file (errno \(errno))") }
            written += n
        }
        if sync { fsync(fd) }
    }

    /// Replaces `path` atomically (write a temporary file, rename it over).
    static func replaceFile(_ path: String, bytes: [UInt8], sync: Bool) throws(KeychainError) {
        let temp = path + ".\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        try writeNewFile(temp, bytes: bytes, sync: sync)
        guard rename(temp, path) == 0 else {
            unlink(temp)
            throw KeychainError(.io, "cannot replace a file (errno \(errno))")
        }
    }
}
