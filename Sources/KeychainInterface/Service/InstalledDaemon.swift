import CKeychainLinux

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// An installed keychaind: root's file, in a place only root can change, set-group-ID to a group of its own
/// (`keychaind`, made by the installer). Only a process started from that file, untraced and allowed new privileges,
/// holds that group: the kernel gives it to nothing else of the user. keychaind keeps it as its saved group alone
/// and names it in the credentials of its greeting (SCM_CREDENTIALS, which the kernel checks per message), so a
/// client knows the installed keychaind answers on this connection, not a program of the user that got to the
/// socket first (or relays to the real one) and would read every password sent to it.
public struct InstalledDaemon: Equatable, Sendable {
    public var path: String
    public var group: gid_t

    /// The installed keychaind beside this program (as `security`, the git and docker helpers and keychaind itself
    /// are installed), if any. Computed once: a program's own directory does not move under it.
    public static let besideThisProgram: InstalledDaemon? = {
        guard let executable = ownExecutable, let slash = executable.lastIndex(of: "/") else { return nil }
        return at(String(executable[..<slash]) + "/keychaind")
    }()

    /// The installed keychaind this program's connections must reach, or nil when it checks none:
    /// - beside this program, else in the places the installers put it (/usr/bin, /usr/local/bin);
    /// - only for a program that is itself installed (only root can change it): one the user can change could be
    ///   replaced by whoever would fake keychaind for it, so the check would protect nothing (and a build of one's
    ///   own talks to a keychaind of one's own);
    /// - not for root, from whom nothing of a user's is hidden.
    public static let expected: InstalledDaemon? = {
        guard geteuid() != 0, let executable = ownExecutable, ProtectedPath.isProtected(executable) else { return nil }
        return besideThisProgram ?? at("/usr/bin/keychaind") ?? at("/usr/local/bin/keychaind")
    }()

    /// `path` as an installed keychaind, or nil when it is not one: missing, not set-group-ID, changeable by someone
    /// other than root (a build of one's own proves nothing, and nothing is asked of it), on a file system mounted
    /// nosuid (the kernel would not give it the group: it could never prove itself), or of a group that has members
    /// (any of them could name the group too).
    public static func at(_ path: String) -> InstalledDaemon? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_mode & S_ISGID != 0,
              info.st_mode & 0o010 != 0, info.st_gid != 0, ProtectedPath.isProtected(path) else { return nil }
        var fileSystem = statvfs()
        guard statvfs(path, &fileSystem) == 0, fileSystem.f_flag & UInt(ST_NOSUID) == 0 else { return nil }
        guard groupHasNoMembers(info.st_gid) else { return nil }
        return InstalledDaemon(path: path, group: info.st_gid)
    }

    /// Whether the group's entry lists no member (a user whose primary group it is would not be listed; the
    /// installers make it a system group that no user has).
    static func groupHasNoMembers(_ group: gid_t) -> Bool {
        var entry = Glibc.group()
        var result: UnsafeMutablePointer<Glibc.group>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getgrgid_r(group, &entry, &buffer, buffer.count, &result) == 0, let found = result?.pointee else {
            return false  // no such group, or none readable: nothing the installers made
        }
        return found.gr_mem == nil || found.gr_mem[0] == nil
    }

    /// Whether this process is an installed keychaind running with its group kept (as the saved group alone): its
    /// environment then came from whoever started it, maybe a program of the user, and is trusted less.
    public static var thisProcessKeepsItsGroup: Bool { ckeychain_keeps_saved_group() == 1 }

    private static let ownExecutable: String? = {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }()
}
