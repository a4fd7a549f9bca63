import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// File paths as the keychain service compares them, worked out once per path: keychaind answers every call from
/// the search list and the keychains' paths, and Foundation's URL standardization cost more than the call's own work.
enum StandardPath {
    private static let known = Mutex<[String: String]>([:])

    /// `URL(fileURLWithPath:).standardizedFileURL.path` ("." and ".." segments and doubled slashes removed; links kept).
    static func of(_ path: String) -> String {
        // Only absolute paths are remembered: a relative one depends on the working directory.
        guard path.hasPrefix("/") else { return URL(fileURLWithPath: path).standardizedFileURL.path }
        if let standard = known.withLock({ $0[path] }) { return standard }
        let standard = URL(fileURLWithPath: path).standardizedFileURL.path
        known.withLock { known in
            if known.count > 256 { known.removeAll() }
            known[path] = standard
        }
        return standard
    }

    /// Whether something exists at `path` (links followed), as `FileManager.fileExists` says, in one system call.
    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}
