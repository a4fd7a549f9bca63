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

    static func loadOrCreate(in directory: URL) throws(KeychainError) -> SymmetricKey {
        try FileSystem.makePrivateDirectory(directory)
        let path = directory.appendingPathComponent(fileName).path
        if let key = try read(path) { return key }
        // Write a temporary file, then link it into place: two processes racing both end with the same key.
        let temp = path + ".\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        let fresh = SymmetricKey.random()
        try FileSystem.writeNewFile(temp, bytes: fresh.bytes)
        defer { unlink(temp) }
        if link(temp, path) != 0 && errno != EEXIST {
            throw KeychainError(.io, "cannot create the device key (errno \(errno))")
        }
        guard let key = try read(path) else { throw KeychainError(.io, "cannot read the device key") }
        return key
    }

    private static func read(_ path: String) throws(KeychainError) -> SymmetricKey? {
        guard let bytes = FileSystem.readFile(path) else { return nil }
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

    static func readFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            out.append(contentsOf: buffer[0..<n])
        }
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
