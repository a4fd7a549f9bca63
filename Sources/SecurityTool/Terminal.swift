import Foundation
import KeychainCore

#if canImport(Glibc)
import Glibc
#endif

/// Reading secrets from the user: the terminal with echo off, or standard input when there is no terminal.
enum Terminal {
    static func writeError(_ text: String) { FileHandle.standardError.write(Data(text.utf8)) }
    static func writeOut(_ text: String) { FileHandle.standardOutput.write(Data(text.utf8)) }

    /// Prompts on /dev/tty with echo off; nil when there is no terminal.
    static func readSecret(prompt: String) -> SecretBytes? {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var old = termios()
        guard tcgetattr(fd, &old) == 0 else { return nil }
        var silent = old
        silent.c_lflag &= ~tcflag_t(ECHO)
        _ = prompt.withCString { write(fd, $0, strlen($0)) }
        tcsetattr(fd, TCSAFLUSH, &silent)
        defer {
            tcsetattr(fd, TCSAFLUSH, &old)
            _ = write(fd, "\n", 1)
        }
        return readLine(fd: fd)
    }

    /// One line from standard input (without its newline), or nil at end of input.
    static func readSecretFromStandardInput() -> SecretBytes? { readLine(fd: STDIN_FILENO) }

    private static func readLine(fd: Int32) -> SecretBytes? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        var sawAny = false
        while read(fd, &byte, 1) == 1 {
            sawAny = true
            if byte == 0x0a { break }
            bytes.append(byte)
        }
        if !sawAny { return nil }
        if bytes.last == 0x0d { bytes.removeLast() }
        return SecretBytes(consuming: &bytes)
    }

    static var standardInputIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }
    static var hasTerminal: Bool {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY)
        if fd >= 0 { close(fd) }
        return fd >= 0
    }

    /// A new password typed twice (three tries), or read once from standard input without a terminal.
    static func newPassword(prompt: String, retype: String) -> SecretBytes? {
        // Piped input wins: `echo pw | security add-generic-password … -w` reads standard input.
        if !standardInputIsTerminal || !hasTerminal { return readSecretFromStandardInput() }
        for _ in 0..<3 {
            guard let first = readSecret(prompt: prompt), let second = readSecret(prompt: retype) else { return nil }
            if first == second { return first }
            writeError("passwords don't match\n")
        }
        return nil
    }
}
