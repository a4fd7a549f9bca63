#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

#if canImport(Glibc)
import Glibc
#endif

/// Asks on the controlling terminal (`/dev/tty`) with echo off. Without a terminal it answers `.unavailable`.
public struct TerminalPrompter: Prompter {
    public init() {}

    public static var isAvailable: Bool {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY)
        if fd >= 0 { close(fd) }
        return fd >= 0
    }

    public func requestPassword(_ request: PasswordRequest) -> PromptResponse {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY)
        guard fd >= 0 else { return .unavailable }
        defer { close(fd) }
        var text = request.description + "\n"
        if let error = request.error { text += error + "\n" }
        text += request.prompt + " "
        writeAll(fd, text)
        var old = termios()
        guard tcgetattr(fd, &old) == 0 else { return .unavailable }
        var silent = old
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(fd, TCSAFLUSH, &silent)
        defer {
            tcsetattr(fd, TCSAFLUSH, &old)
            writeAll(fd, "\n")
        }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = read(fd, &byte, 1)
            if n <= 0 { return bytes.isEmpty ? .cancelled : .entered(SecretBytes(consuming: &bytes)) }
            if byte == 0x0a || byte == 0x0d { break }
            if byte == 0x03 || byte == 0x04 { return .cancelled }  // ^C, ^D
            bytes.append(byte)
        }
        return .entered(SecretBytes(consuming: &bytes))
    }

    public func requestConfirmation(_ request: ConfirmationRequest) -> ConfirmationResponse {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY)
        guard fd >= 0 else { return .unavailable }
        defer { close(fd) }
        writeAll(fd, request.description + "\n[d]eny, [a]llow, al[w]ays allow? ")
        var byte: UInt8 = 0
        var answer: [UInt8] = []
        while read(fd, &byte, 1) == 1 && byte != 0x0a { answer.append(byte) }
        switch String(decoding: answer, as: UTF8.self).lowercased() {
        case "a", "allow": return .allow
        case "w", "always", "always allow": return .alwaysAllow
        default: return .deny
        }
    }

    private func writeAll(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
