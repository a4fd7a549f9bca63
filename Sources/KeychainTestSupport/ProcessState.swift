import Foundation

/// Whether process `pid` has ended but not been reaped: `kill(pid, 0)` still succeeds for it, so a test that waits
/// for a process it did not start (a keychaind started on demand) must count this as gone too.
///
/// Ended means every thread: a killed multi-threaded process's first thread can show `Z` while its other threads
/// are still on their way out, holding its descriptors (a client's request then still goes out to its socket).
public func isZombie(_ pid: Int32) -> Bool {
    let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
    guard let close = stat.lastIndex(of: ")") else { return true }
    guard stat[stat.index(close, offsetBy: 2)] == "Z" else { return false }
    let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    return threads.count <= 1
}
