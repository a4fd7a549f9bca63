#if canImport(Glibc)
import Glibc
#endif

/// A pipe whose ends are close-on-exec, so that a process another test starts meanwhile does not keep a copy of
/// an end (a test waiting for end-of-file would then wait for that process).
public func closeOnExecPipe() -> (read: Int32, write: Int32)? {
    var ends: [Int32] = [0, 0]
    guard pipe(&ends) == 0 else { return nil }
    for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    return (ends[0], ends[1])
}
