import Foundation

/// Whether process `pid` has ended but not been reaped: `kill(pid, 0)` still succeeds for it, so a test that waits
/// for a process it did not start (a keychaind started on demand) must count this as gone too.
public func isZombie(_ pid: Int32) -> Bool {
    let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
    guard let close = stat.lastIndex(of: ")") else { return true }
    return stat[stat.index(close, offsetBy: 2)] == "Z"
}
