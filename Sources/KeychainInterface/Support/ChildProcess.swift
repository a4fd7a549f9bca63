#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

import Glibc

/// A child process started with `posix_spawn` and reaped with a blocking `waitpid` on its own pid.
///
/// Foundation's `Process` learns of a child's exit from SIGCHLD; a child that exits at the wrong instant can be missed,
/// and `waitUntilExit()` then spins forever beside a zombie (seen with pinentry and tmux clients on Linux). Waiting
/// on the pid itself cannot miss. The child stays in our process group, so a text pinentry can use our terminal.
package struct ChildProcess: Sendable {
    package enum Termination: Equatable, Sendable {
        case exited(Int32)
        case signalled(Int32)
    }

    package let pid: pid_t

    /// Starts `executable` with `arguments`. `stdin`, `stdout` and `stderr` are descriptors to give the child
    /// (nil: /dev/null). Every other descriptor of ours is closed in the child.
    package static func spawn(
        _ executable: String, arguments: [String], environment: [String: String]? = nil,
        stdin: Int32? = nil, stdout: Int32? = nil, stderr: Int32? = nil
    ) throws(SpawnError) -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (source, target) in [(stdin, STDIN_FILENO), (stdout, STDOUT_FILENO), (stderr, STDERR_FILENO)] {
            if let source {
                posix_spawn_file_actions_adddup2(&actions, source, target)
            } else {
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0)
            }
        }
        _ = closeFrom3?(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Start with default signal handling and an empty mask, whatever this process has set up for itself.
        var all = sigset_t(), none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let environ = (environment ?? ProcessEnvironment.current()).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            environ.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard result == 0 else { throw SpawnError(executable: executable, code: result) }
        return ChildProcess(pid: pid)
    }

    /// Blocks until the child ends; returns how it ended.
    package func wait() -> Termination {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            if errno != EINTR { return .exited(-1) }
        }
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal)
    }

    package func send(_ signal: Int32) { kill(pid, signal) }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which the Glibc module does not export: closes
    /// every descriptor from 3 up in the child, including ones some other code opened without O_CLOEXEC.
    private static let closeFrom3: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()
}

package struct SpawnError: Error, CustomStringConvertible {
    package let executable: String
    package let code: Int32
    package var description: String { "cannot start \(executable): \(String(cString: strerror(code)))" }
}

/// A channel to a child: a connected socket pair, made close-on-exec atomically (Glibc does not export pipe2), so
/// that only the end handed to a child by dup2 reaches it and no other child started meanwhile holds it open.
/// Writing after the child has gone fails with EPIPE instead of raising SIGPIPE (``send(_:)`` uses MSG_NOSIGNAL).
/// `childEnd` is the one to give the child; `ourEnd` is read and written here.
package struct ChildPipe: ~Copyable {
    package private(set) var childEnd: Int32
    package private(set) var ourEnd: Int32

    package init() throws(SpawnError) {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw SpawnError(executable: "socketpair", code: errno)
        }
        childEnd = fds[0]
        ourEnd = fds[1]
    }

    /// Writes all of `bytes` to our end; false if the child has gone.
    package func send(_ bytes: some Collection<UInt8>) -> Bool {
        var rest = Array(bytes)[...]
        defer { rest.withUnsafeMutableBytes { if let base = $0.baseAddress { memset(base, 0, $0.count) } } }
        while !rest.isEmpty {
            let n = rest.withUnsafeBytes { Glibc.send(ourEnd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            rest = rest.dropFirst(n)
        }
        return true
    }

    /// Closes the child's end here, once the child has its copy.
    package mutating func closeChildEnd() {
        if childEnd >= 0 { close(childEnd) }
        childEnd = -1
    }

    /// Closes our end: the child reads end of file.
    package mutating func closeOurEnd() {
        if ourEnd >= 0 { close(ourEnd) }
        ourEnd = -1
    }

    deinit {
        if childEnd >= 0 { close(childEnd) }
        if ourEnd >= 0 { close(ourEnd) }
    }
}

extension ChildProcess {
    package struct Output: Sendable {
        package var termination: Termination
        package var stdout: Data
        package var stderr: Data
    }

    /// Runs `executable` to the end with `input` on its standard input, collecting both outputs (read together, so
    /// that neither pipe can fill and stall the child).
    package static func run(
        _ executable: String, arguments: [String], environment: [String: String]? = nil, input: Data = Data()
    ) throws(SpawnError) -> Output {
        var stdinPipe = try ChildPipe(), stdoutPipe = try ChildPipe(), stderrPipe = try ChildPipe()
        let child = try spawn(executable, arguments: arguments, environment: environment,
                              stdin: stdinPipe.childEnd, stdout: stdoutPipe.childEnd, stderr: stderrPipe.childEnd)
        stdinPipe.closeChildEnd()
        stdoutPipe.closeChildEnd()
        stderrPipe.closeChildEnd()

        var pending = [UInt8](input)
        var written = 0
        if pending.isEmpty { stdinPipe.closeOurEnd() }
        var collected: [Int32: [UInt8]] = [stdoutPipe.ourEnd: [], stderrPipe.ourEnd: []]
        var open = [stdoutPipe.ourEnd, stderrPipe.ourEnd]
        var chunk = [UInt8](repeating: 0, count: 65536)
        while !open.isEmpty || stdinPipe.ourEnd >= 0 {
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if stdinPipe.ourEnd >= 0 { fds.append(pollfd(fd: stdinPipe.ourEnd, events: Int16(POLLOUT), revents: 0)) }
            if poll(&fds, nfds_t(fds.count), -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            for entry in fds where entry.revents != 0 {
                if entry.fd == stdinPipe.ourEnd {
                    let n = pending[written...].withUnsafeBytes {
                        Glibc.send(entry.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                    }
                    if n > 0 { written += n }
                    if n < 0 && errno != EAGAIN && errno != EINTR || written == pending.count { stdinPipe.closeOurEnd() }
                } else {
                    let n = chunk.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                    if n > 0 {
                        collected[entry.fd]! += chunk[..<n]
                    } else if n == 0 || errno != EINTR && errno != EAGAIN {
                        open.removeAll { $0 == entry.fd }
                    }
                }
            }
        }
        pending.withUnsafeMutableBytes { if let base = $0.baseAddress { memset(base, 0, $0.count) } }
        let termination = child.wait()
        return Output(termination: termination, stdout: Data(collected[stdoutPipe.ourEnd]!),
                      stderr: Data(collected[stderrPipe.ourEnd]!))
    }
}
