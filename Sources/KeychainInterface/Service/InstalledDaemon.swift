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
/// runs with that group as its effective group: the kernel gives it to nothing else of the user. keychaind listens
/// with it (then gives it up), so the socket's peer credentials tell a client that the installed keychaind listens
/// there, not a program of the user that got there first and would read every password sent to it.
public struct InstalledDaemon: Equatable, Sendable {
    public var path: String
    public var group: gid_t

    /// The installed keychaind beside this program (as `security`, the git and docker helpers and keychaind itself
    /// are installed), if any. Computed once: a program's own directory does not move under it.
    public static let besideThisProgram: InstalledDaemon? = {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        let executable = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = executable.lastIndex(of: "/") else { return nil }
        return at(String(executable[..<slash]) + "/keychaind")
    }()

    /// `path` as an installed keychaind, or nil when it is not one (missing, not set-group-ID, or changeable by
    /// someone other than root: a build of one's own proves nothing, and nothing is asked of it).
    public static func at(_ path: String) -> InstalledDaemon? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_mode & S_ISGID != 0,
              info.st_mode & 0o010 != 0, ProtectedPath.isProtected(path) else { return nil }
        return InstalledDaemon(path: path, group: info.st_gid)
    }
}
