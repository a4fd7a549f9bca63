import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The terminal of one of the user's login sessions, as the system's login programs recorded it: where a question
/// may go to a person without the asking program controlling the answer (a terminal a client merely names could
/// be a pseudo-terminal it made itself, whose other end it reads and writes).
///
/// A client's controlling terminal (as the kernel reports it, /proc/PID/stat) counts only when utmp holds a login
/// of this user on it whose process is root's: sshd's and login's entries, not those a program of the user makes
/// for a pseudo-terminal of its own through the utempter helper.
enum LoginTerminal {
    /// `/dev/pts/N` or `/dev/ttyN` when `pid`'s controlling terminal is a login terminal of `user`; else nil.
    static func of(pid: pid_t, user: uid_t, utmpPath: String = "/var/run/utmp") -> String? {
        guard let device = terminalDevice(of: pid) else { return nil }
        return of(device: device, user: user, utmpPath: utmpPath)
    }

    /// The same for a controlling terminal's device number (field 7 of /proc/PID/stat) that keychaind read when it
    /// identified the process (``PeerIdentity/terminalDevice``): the question then goes to the terminal of the
    /// process that was identified, even if its pid has been reused since.
    static func of(device: Int, user: uid_t, utmpPath: String = "/var/run/utmp") -> String? {
        guard let line = line(ofDevice: device), let name = userName(user) else { return nil }
        guard let data = FileManager.default.contents(atPath: utmpPath) else { return nil }
        let size = MemoryLayout<utmpx>.size
        var offset = 0
        while offset + size <= data.count {
            let entry = data.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: utmpx.self) }
            offset += size
            guard entry.ut_type == Int16(USER_PROCESS), text(entry.ut_line) == line, text(entry.ut_user) == name,
                  ownerOfProcess(entry.ut_pid) == 0
            else { continue }
            return "/dev/" + line
        }
        return nil
    }

    /// Whether the kernel refuses TIOCSTI (typing into a terminal) to unprivileged programs: Linux 6.2's
    /// `dev.tty.legacy_tiocsti = 0`. Older kernels, or the legacy setting, let any program on a terminal type into it.
    static func injectionRefused(_ path: String = "/proc/sys/dev/tty/legacy_tiocsti") -> Bool {
        PeerIdentity.readProcFile(path)?.trimmingCharacters(in: .whitespacesAndNewlines) == "0"
    }

    /// `pts/N` or `ttyN` from field 7 of /proc/PID/stat (the controlling terminal's device number).
    static func controllingTerminal(of pid: pid_t) -> String? {
        terminalDevice(of: pid).flatMap(line(ofDevice:))
    }

    /// Field 7 of /proc/PID/stat; nil when it cannot be read.
    static func terminalDevice(of pid: pid_t) -> Int? { PeerIdentity.statFields(of: pid)?.terminal }

    /// `pts/N` or `ttyN` for a terminal's device number; nil for none (0) or any other device.
    static func line(ofDevice device: Int) -> String? {
        guard device != 0 else { return nil }
        let major = (device >> 8) & 0xfff
        let minor = (device & 0xff) | ((device >> 12) & 0xfff00)
        switch major {
        case 136...143: return "pts/\((major - 136) * 256 + minor)"
        case 4 where minor < 64: return "tty\(minor)"
        default: return nil
        }
    }

    static func userName(_ uid: uid_t) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else {
            return nil
        }
        return String(cString: name)
    }

    static func ownerOfProcess(_ pid: pid_t) -> uid_t? {
        guard pid > 0 else { return nil }
        var info = stat()
        guard stat("/proc/\(pid)", &info) == 0 else { return nil }
        return info.st_uid
    }

    /// A fixed-size C character field as text (up to its first NUL).
    private static func text<T>(_ field: T) -> String {
        withUnsafeBytes(of: field) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}
