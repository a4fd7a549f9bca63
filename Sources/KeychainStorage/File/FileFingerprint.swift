import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What a keychain's files look like on disk: device, inode, size and change time of the database and of its WAL.
///
/// Opening a keychain reads every row once to check it against the MACed manifest (against deleted, swapped and
/// rolled-back rows). Doing that in every process makes each `security` command O(items). The change time (ctime)
/// cannot be set back by anyone but root, so when the files still carry the fingerprint this device recorded after
/// its own last full check or its own last clean close, nobody has written them since, and the scan can be skipped.
/// A whole-file rollback is still caught at every open by the epoch; only a row edited while one of our processes
/// had the file open (by a program that can write the file then, i.e. running as the user) could go unnoticed.
///
/// Known hole: ctime moves in clock ticks, so an edit of the same size within one tick of our close keeps the
/// fingerprint. Hashing the contents would close it, but reading the database through a descriptor of our own is
/// not an option: closing any descriptor of a file drops every POSIX lock this process holds on it, SQLite's
/// included, and with them another process's view of who still has the file open (it then folds and deletes the
/// WAL under us: lost commits, "rollback" errors). Tried, caught by the four-process reliability test, reverted.
enum FileFingerprint {
    static func of(_ url: URL) -> String? {
        guard let database = status(url.path) else { return nil }
        // A WAL without frames (absent, or at most its 32-byte header, which SQLite writes when it opens the file)
        // holds nothing: only a WAL with frames counts.
        let wal = status(url.path + "-wal").flatMap { $0.st_size > 32 ? describe($0) : nil }
        return describe(database) + "|" + (wal ?? "no frames")
    }

    private static func status(_ path: String) -> stat? {
        var info = stat()
        return fstatat(AT_FDCWD, path, &info, 0) == 0 ? info : nil
    }

    private static func describe(_ info: stat) -> String {
        "\(info.st_dev):\(info.st_ino):\(info.st_size):\(info.st_ctim.tv_sec).\(info.st_ctim.tv_nsec)"
    }
}
