import CKeychainLinux
import Glibc

/// What the command-line front ends do first, while they may still hold a typed secret: no core file
/// (RLIMIT_CORE 0) and not dumpable (PR_SET_DUMPABLE 0), so neither a crash nor another program of the same user
/// with `gcore` or ptrace can read a password from their memory. Libraries embedded in apps leave the app alone.
package enum ProcessHardening {
    package static func disableCoreDumps() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
        _ = ckeychain_set_non_dumpable()
    }

    /// Whether the kernel would let a same-user debugger attach (PR_GET_DUMPABLE); nil where unknown.
    package static var isDumpable: Bool? {
        let value = ckeychain_get_dumpable()
        return value < 0 ? nil : value != 0
    }
}
