#if canImport(Glibc)
import Glibc
#endif

/// Unix stream sockets for tests that play a client or a listener of their own (close-on-exec, as every socket a
/// test makes: a process another test starts meanwhile must not keep a copy).
public enum UnixSockets {
    /// A socket listening at `path` (whatever was there is unlinked first), or -1 with errno set.
    public static func listen(at path: String, backlog: Int32 = 8, nonBlocking: Bool = false) -> Int32 {
        unlink(path)
        let flags = Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | flags, 0)
        guard fd >= 0 else { return -1 }
        guard withAddress(path, { bind(fd, $0, $1) }) == 0, Glibc.listen(fd, backlog) == 0 else {
            let saved = errno
            close(fd)
            errno = saved
            return -1
        }
        return fd
    }

    /// A socket connected to `path`, or -1.
    public static func connect(to path: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return -1 }
        guard withAddress(path, { Glibc.connect(fd, $0, $1) }) == 0 else {
            close(fd)
            return -1
        }
        return fd
    }

    private static func withAddress(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}
