#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Whether only root can change what a path names: the file and every directory above it are root's and writable by
/// nobody else. A sticky directory (such as /tmp) may be writable by all, since nobody else can then rename or
/// remove an entry of root's in it.
public enum ProtectedPath {
    public static func isProtected(_ path: String) -> Bool {
        guard path.hasPrefix("/") else { return false }
        var current = path
        var child: stat?
        while true {
            var info = stat()
            guard lstat(current, &info) == 0, info.st_uid == 0 else { return false }
            let writableByOthers = info.st_mode & 0o022 != 0
            let sticky = info.st_mode & S_ISVTX != 0 && (info.st_mode & S_IFMT) == S_IFDIR
            // A symbolic link's own mode means nothing; what it names was checked as `child`'s parent chain.
            if (info.st_mode & S_IFMT) != S_IFLNK, writableByOthers, !(sticky && child?.st_uid == 0) { return false }
            if current == "/" { return true }
            child = info
            let trimmed = current.hasSuffix("/") ? String(current.dropLast()) : current
            guard let slash = trimmed.lastIndex(of: "/") else { return false }
            current = slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
        }
    }

    /// The environment variables the dynamic loader and glibc act on before a program's own code runs (glibc's
    /// list for secure execution, and every LD_ variable): a program started with them runs code it did not choose.
    public static let loaderVariables: Set<String> = [
        "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "MALLOC_ARENA_MAX",
        "MALLOC_ARENA_TEST", "MALLOC_CHECK_", "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_PERTURB_",
        "MALLOC_TOP_PAD_", "MALLOC_TRACE", "MALLOC_TRIM_THRESHOLD_", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF",
        "RES_OPTIONS", "TMPDIR", "TZDIR",
    ]

    public static func isLoaderVariable(_ name: String) -> Bool {
        name.hasPrefix("LD_") || loaderVariables.contains(name)
    }
}
