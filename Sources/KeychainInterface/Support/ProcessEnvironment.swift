import CKeychainLinux

#if canImport(Glibc)
import Glibc
#endif

/// This process's environment variables, read straight from `environ`. The client side reads its settings (HOME, the
/// XDG directories, KEYCHAIN_BACKEND, the terminal and display) through this rather than `ProcessInfo`, whose first
/// use costs a command-line tool more start-up time than the rest of its settings together.
public enum ProcessEnvironment {
    public static func current() -> [String: String] {
        var variables: [String: String] = [:]
        guard var entry = ckeychain_environment() else { return variables }
        while let pointer = entry.pointee {
            let bytes = UnsafeRawBufferPointer(start: pointer, count: strlen(pointer))
            // The first "=" ends the name; an entry without one is not a variable (setenv never makes such).
            if let equals = bytes.firstIndex(of: UInt8(ascii: "=")) {
                let name = String(decoding: bytes[..<equals], as: UTF8.self)
                if variables[name] == nil {  // the first of duplicate entries wins, as getenv(3) finds it
                    variables[name] = String(decoding: bytes[(equals + 1)...], as: UTF8.self)
                }
            }
            entry += 1
        }
        return variables
    }
}
