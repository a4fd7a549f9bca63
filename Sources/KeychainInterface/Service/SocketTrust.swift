import CKeychainLinux
import KeychainCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// What a client checks before it sends keychaind anything (a password, a request): the socket's directory is this
/// user's private one, and the process listening is of this user. Otherwise another local user who made the
/// directory first (or who can listen there) would receive every password and request.
enum SocketTrust {
    /// True when `directory` is this user's own directory with mode 0700 (no group or other bits), not a symlink;
    /// false when it does not exist (nobody serves there yet). Anything else is refused with the reason.
    static func isPrivateDirectory(_ directory: URL) throws(KeychainError) -> Bool {
        var info = stat()
        guard lstat(directory.path, &info) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return false }
            throw KeychainError(.internalComponent, "cannot check \(directory.path) (errno \(errno)); nothing was sent")
        }
        let isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
        guard isDirectory, info.st_uid == geteuid(), info.st_mode & 0o077 == 0 else {
            let what = (info.st_mode & S_IFMT) == S_IFLNK ? "a symbolic link" : isDirectory
                ? "owned by uid \(info.st_uid) with mode \(String(info.st_mode & 0o7777, radix: 8))" : "not a directory"
            throw KeychainError(.internalComponent, "keychaind's directory \(directory.path) is \(what), not this user's "
                                + "private directory: it is not used, and nothing was sent (remove it, or set XDG_RUNTIME_DIR)")
        }
        return true
    }

    /// Refuses a connection whose peer is not of this user (SO_PEERCRED, recorded by the kernel at connect time).
    static func checkPeer(_ fd: Int32, socket: URL) throws(KeychainError) {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        guard ckeychain_peer_credentials(fd, &pid, &uid, &gid) == 0 else {
            throw KeychainError(.internalComponent, "cannot tell who serves \(socket.path); nothing was sent")
        }
        guard uid == geteuid() else {
            throw KeychainError(.internalComponent, "\(socket.path) is served by another user (uid \(uid)), not this "
                                + "user's keychaind: nothing was sent")
        }
    }
}
