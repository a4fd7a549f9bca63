#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Small files read often (keychaind reads the search list, the default keychain and the access-group bindings for
/// every client) and changed seldom: what a file gave is kept, and the file read and parsed again only when one
/// `stat` shows it changed. Writers of these files replace them whole (an atomic rename: a new inode).
package final class ChangedFileCache<Value: Sendable>: Sendable {
    /// What changes when a file is replaced or written: device, inode, size, modification and status-change times.
    struct Stamp: Equatable {
        let device: UInt64, inode: UInt64, size: Int64
        let modified: Int64, modifiedNanos: Int, changed: Int64, changedNanos: Int
        init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            modified = Int64(info.st_mtim.tv_sec)
            modifiedNanos = Int(info.st_mtim.tv_nsec)
            changed = Int64(info.st_ctim.tv_sec)
            changedNanos = Int(info.st_ctim.tv_nsec)
        }
    }

    private let kept = Mutex<[String: (stamp: Stamp, value: Value)]>([:])
    private let capacity: Int
    /// As git's "racy" index entries: a file changed within this many seconds may change again within the file
    /// system's timestamp granularity (and keep its size), unseen by its stamp; it is not kept until then.
    private let unsettledSeconds: Int64

    package init(capacity: Int = 64, unsettledSeconds: Int64 = 2) {
        self.capacity = capacity
        self.unsettledSeconds = unsettledSeconds
    }

    /// What `parse` makes of the text of the file at `path`, as the file is now; nil when there is no such file or
    /// it cannot be read as text (`parse` may also say nil).
    package func value(at path: String, parse: (String) -> Value?) -> Value? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            _ = kept.withLock { $0.removeValue(forKey: path) }
            return nil
        }
        let stamp = Stamp(info)
        if let known = kept.withLock({ $0[path] }), known.stamp == stamp { return known.value }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8), let value = parse(text) else { return nil }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        kept.withLock { kept in
            if kept.count > capacity { kept.removeAll() }
            if Int64(now.tv_sec) - stamp.changed >= unsettledSeconds {
                kept[path] = (stamp, value)
            } else {
                kept.removeValue(forKey: path)
            }
        }
        return value
    }
}
