#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Reading secrets from the user: the terminal with echo off, or standard input when there is no terminal.
enum Terminal {
    /// A failed command of our own (beyond macOS): Apple's status line, then why on a second line (the reason is
    /// what the user needs to act on). Returns the exit status.
    static func reportFailure(of api: String, _ error: KeychainError) -> Int32 {
        writeError("security: \(api): \(error.status.message)\n")
        let prefix = error.status.message + " ("
        if error.message.hasPrefix(prefix), error.message.hasSuffix(")") {
            writeError("  \(error.message.dropFirst(prefix.count).dropLast())\n")
        }
        return error.status.exitCode
    }

    static func writeError(_ text: String) { StandardStreams.write(Array(text.utf8), to: 2) }
    static func writeOut(_ text: String) { StandardStreams.write(Array(text.utf8), to: 1) }

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
    /// A line longer than a secret may be ends the command with errSecDataTooLarge.
    static func readSecretFromStandardInput() -> SecretBytes? {
        let (line, tooLong) = standardInput.withLock { reader in (reader.nextLine(), reader.lastLineTooLong) }
        if tooLong {
            let status = KeychainStatus.dataTooLarge
            writeError("security: the password is longer than \(ItemRules.maximumSecretSize >> 20) MiB: "
                + "\(status.message) (\(status.rawValue))\n")
            exit(status.rawValue & 0xff)
        }
        return line
    }

    /// Standard input, read in large chunks; a chunk's bytes past the line wait for the next call (change-password
    /// reads the old password, then the new one, from the same input).
    private static let standardInput = Mutex(LineReader(fd: STDIN_FILENO))

    /// One line from the terminal: a terminal hands over a line per read, so nothing is read past it.
    private static func readLine(fd: Int32) -> SecretBytes? {
        var reader = LineReader(fd: fd)
        return reader.nextLine()
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

/// Reads lines of secret bytes from a descriptor, 64 KiB per system call, into buffers that are wiped whenever they
/// are grown or released. A line longer than ``ItemRules/maximumSecretSize`` is refused (nil), and the rest of that
/// line is discarded.
struct LineReader: ~Copyable {
    private let fd: Int32
    private var buffer: UnsafeMutableRawBufferPointer
    private var start = 0
    private var end = 0
    private var atEnd = false
    private(set) var lastLineTooLong = false

    init(fd: Int32) {
        self.fd = fd
        buffer = .allocate(byteCount: 64 << 10, alignment: 16)
    }

    deinit {
        wipe(buffer.baseAddress!, buffer.count)
        buffer.deallocate()
    }

    mutating func nextLine() -> SecretBytes? {
        lastLineTooLong = false
        var scanned = start
        while true {
            if let newline = (scanned..<end).first(where: { buffer[$0] == 0x0a }) {
                return takeLine(upTo: newline, consuming: newline + 1)
            }
            scanned = end
            if atEnd {
                guard end > start else { return nil }
                return takeLine(upTo: end, consuming: end)
            }
            if end - start > ItemRules.maximumSecretSize {
                lastLineTooLong = true
                discardRestOfLine()
                return nil
            }
            fill()
        }
    }

    private mutating func takeLine(upTo lineEnd: Int, consuming next: Int) -> SecretBytes? {
        var length = lineEnd - start
        if length > 0 && buffer[start + length - 1] == 0x0d { length -= 1 }
        if length > ItemRules.maximumSecretSize {
            lastLineTooLong = true
            start = next
            return nil
        }
        let line = SecretBytes(copying: UnsafeRawBufferPointer(rebasing: buffer[start..<(start + length)]))
        wipe(buffer.baseAddress! + start, next - start)
        start = next
        return line
    }

    /// Reads more input, first moving what is pending to the front or into a larger buffer (the old one wiped).
    private mutating func fill() {
        if start > 0 {
            let pending = end - start
            if pending > 0 { buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: pending) }
            wipe(buffer.baseAddress! + pending, end - pending)
            end = pending
            start = 0
        }
        if end == buffer.count {
            let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: buffer.count * 2, alignment: 16)
            larger.baseAddress!.copyMemory(from: buffer.baseAddress!, byteCount: end)
            wipe(buffer.baseAddress!, buffer.count)
            buffer.deallocate()
            buffer = larger
        }
        while true {
            let n = read(fd, buffer.baseAddress! + end, buffer.count - end)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { atEnd = true } else { end += n }
            return
        }
    }

    private mutating func discardRestOfLine() {
        while true {
            if let newline = (start..<end).first(where: { buffer[$0] == 0x0a }) {
                wipe(buffer.baseAddress! + start, newline + 1 - start)
                start = newline + 1
                return
            }
            wipe(buffer.baseAddress! + start, end - start)
            start = 0
            end = 0
            if atEnd { return }
            fill()
        }
    }
}

/// The bytes the command line really carried. Swift decodes arguments as UTF-8 with replacement characters, so a
/// password given with `-w`/`-p` that is not UTF-8 would be altered (and two different ones could become equal).
enum RawArguments {
    /// The secret for an option value the parser decoded to `value`: its own bytes from `argv` when decoding lost
    /// any (the value stands alone or right after its flag, `-wVALUE`).
    static func secret(_ value: String) -> SecretBytes {
        guard value.unicodeScalars.contains("\u{FFFD}") else { return SecretBytes(utf8: value) }
        for index in stride(from: Int(CommandLine.argc) - 1, through: 1, by: -1) {
            guard let argument = CommandLine.unsafeArgv[index] else { continue }
            let raw = UnsafeRawBufferPointer(start: argument, count: strlen(argument))
            for candidate in [raw[...], raw.dropFirst(2)] where String(decoding: candidate, as: UTF8.self) == value {
                return SecretBytes(copying: UnsafeRawBufferPointer(rebasing: candidate))
            }
        }
        return SecretBytes(utf8: value)
    }
}
