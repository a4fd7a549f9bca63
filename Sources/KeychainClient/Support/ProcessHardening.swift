import Glibc

/// What the command-line front ends do first: a process that holds secrets writes no core file, so a crash never
/// leaves a password on disk. (PR_SET_DUMPABLE would also keep ptrace out, but prctl is variadic and cannot be called
/// from Swift; the daemon will set it from C.) Libraries embedded in apps leave the app's limits alone.
package enum ProcessHardening {
    package static func disableCoreDumps() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
    }
}
