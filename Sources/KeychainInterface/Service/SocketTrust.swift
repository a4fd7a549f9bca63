import CKeychainLinux
import KeychainCore
import KeychainWire

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

    /// keychaind's greeting and who sent it, as the kernel reports it (SCM_CREDENTIALS, when asked for with
    /// SO_PASSCRED; a sender may name only its own pid and one of its own groups). `pid` is 0 when the bytes came
    /// without credentials or from more than one sender.
    struct Greeting {
        var bytes: [UInt8]
        var pid: pid_t
        var uid: uid_t
        var gid: gid_t
    }

    /// Reads the greeting's frame (at most 16 KiB) and nothing after it; nil when the peer ended first.
    static func receiveGreeting(on fd: Int32) throws(WireError) -> Greeting? {
        var sender: (pid: pid_t, uid: uid_t, gid: gid_t)?
        var mixed = false
        func read(_ count: Int, allowEnd: Bool) throws(WireError) -> [UInt8]? {
            try Framing.readExactly(count, allowEnd: allowEnd) { buffer in
                var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
                let n = ckeychain_recv_with_credentials(fd, buffer.baseAddress, buffer.count, &pid, &uid, &gid)
                // Every piece must come from the same sender with the same credentials.
                if n > 0 {
                    if let known = sender { mixed = mixed || known != (pid, uid, gid) } else { sender = (pid, uid, gid) }
                }
                return n
            }
        }
        guard let header = try read(4, allowEnd: true) else { return nil }
        let length = header.reduce(0) { Int($0) << 8 | Int($1) }
        guard length <= 16_384 else { throw .tooLarge(length) }  // three paths of up to 4,096 bytes each
        let bytes = length == 0 ? [] : try read(length, allowEnd: false) ?? []
        guard let sender, !mixed else { return Greeting(bytes: bytes, pid: 0, uid: uid_t.max, gid: gid_t.max) }
        return Greeting(bytes: bytes, pid: sender.pid, uid: sender.uid, gid: sender.gid)
    }

    /// Refuses a greeting that the installed keychaind did not send: its credentials must name keychaind's group,
    /// which the kernel lets no other process of the user name (not a program that listens first, not one that
    /// relays the real keychaind's greeting, not a copy of keychaind, not keychaind started under a tracer).
    static func checkSender(of greeting: Greeting, installed: InstalledDaemon, socket: URL) throws(KeychainError) {
        guard greeting.pid > 0, greeting.uid == getuid(), greeting.gid == installed.group else {
            // A keychaind still running from before an upgrade (an older protocol) had no group to show.
            if greeting.pid > 0, greeting.bytes.count >= 4, Array(greeting.bytes.prefix(3)) == Array("KCW".utf8),
               Int(greeting.bytes[3]) != keychainProtocolVersion
            {
                throw KeychainError(.internalComponent, "\(socket.path) is served by process \(greeting.pid), which speaks "
                                    + "keychaind's protocol \(greeting.bytes[3]), not \(keychainProtocolVersion): a keychaind "
                                    + "from before an upgrade, or not the installed one (\(installed.path)). Nothing was "
                                    + "sent; end it (kill \(greeting.pid)) and try again")
            }
            let who = greeting.pid > 0 ? "process \(greeting.pid)" : "a process that sent no credentials"
            let advice = greeting.pid > 0 ? "end it (kill \(greeting.pid)) and try again" : "end whatever listens there and try again"
            throw KeychainError(.internalComponent, "\(socket.path) is served by a program that is not the installed "
                                + "keychaind (\(installed.path)): \(who) answered without keychaind's group. Nothing was "
                                + "sent; \(advice)")
        }
    }
}
