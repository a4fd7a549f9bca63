#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

#if canImport(Glibc)
import Glibc
#endif

/// Asks through the user's pinentry program, speaking the Assuan protocol: GETPIN for passwords, CONFIRM with three
/// buttons (Allow, Always Allow, Deny) for decisions. Cancel gives `.cancelled`; a pinentry that cannot start or
/// show anything gives `.unavailable`, never a hang.
public struct PinentryPrompter: Prompter {
    public let program: String
    public let arguments: [String]
    public let environment: [String: String]?

    public init(program: String = "pinentry", arguments: [String] = [], environment: [String: String]? = nil) {
        self.program = program
        self.arguments = arguments
        self.environment = environment
    }

    /// libgpg-error codes as pinentry reports them (source pinentry, 5 << 24).
    static let canceled = 83_886_179
    static let notConfirmed = 83_886_194

    public func requestPassword(_ request: PasswordRequest) -> PromptResponse {
        guard let session = Session(program: program, arguments: arguments, environment: environment) else {
            return .unavailable
        }
        defer { session.close() }
        var commands = ["SETTITLE Keychain", "SETDESC \(Self.escape(request.description))",
                        "SETPROMPT \(Self.escape(request.prompt))"]
        if let error = request.error { commands.append("SETERROR \(Self.escape(error))") }
        for command in commands { guard case .ok = session.send(command) else { return .unavailable } }
        switch session.send("GETPIN") {
        case .ok(var data): return .entered(SecretBytes(consuming: &data))
        case .error(let code): return code == Self.canceled ? .cancelled : .unavailable
        case .broken: return .unavailable
        }
    }

    public func requestConfirmation(_ request: ConfirmationRequest) -> ConfirmationResponse {
        guard let session = Session(program: program, arguments: arguments, environment: environment) else {
            return .unavailable
        }
        defer { session.close() }
        for command in ["SETTITLE Keychain", "SETDESC \(Self.escape(request.description))", "SETOK Allow",
                        "SETNOTOK Always Allow", "SETCANCEL Deny"] {
            guard case .ok = session.send(command) else { return .unavailable }
        }
        switch session.send("CONFIRM") {
        case .ok: return .allow
        case .error(let code) where code == Self.notConfirmed: return .alwaysAllow
        case .error(let code) where code == Self.canceled: return .deny
        default: return .unavailable
        }
    }

    /// `environment` with a character locale that can show our questions: they are UTF-8 (the quotes around an
    /// item's name, any label), and a pinentry started without a UTF-8 locale (keychaind started with no LANG, as
    /// systemd and D-Bus activation may start it) fails every question. An existing UTF-8 locale is kept.
    package static func withUTF8Locale(_ environment: [String: String]) -> [String: String] {
        func isUTF8(_ value: String?) -> Bool {
            guard let value = value?.lowercased() else { return false }
            return value.hasSuffix(".utf-8") || value.hasSuffix(".utf8") || value.contains(".utf-8@") || value.contains(".utf8@")
        }
        // The first of LC_ALL, LC_CTYPE, LANG that is set decides the character locale (POSIX).
        let effective = [environment["LC_ALL"], environment["LC_CTYPE"], environment["LANG"]]
            .compactMap { $0 }.first { !$0.isEmpty }
        if isUTF8(effective) { return environment }
        var out = environment
        out.removeValue(forKey: "LC_ALL")
        out["LC_CTYPE"] = "C.UTF-8"
        return out
    }

    /// Assuan escaping: `%`, CR, LF and other control bytes as `%XX`; everything else (UTF-8 included) as it is.
    static func escape(_ text: String) -> String {
        var out: [UInt8] = []
        for byte in text.utf8 {
            if byte == 0x25 || byte < 0x20 { out += Array(("%" + Hex.byte(byte, uppercase: true)).utf8) } else { out.append(byte) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func unescape(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if bytes[i] == 0x25, i + 2 < bytes.endIndex,
                let v = UInt8(String(decoding: bytes[(i + 1)...(i + 2)], as: UTF8.self), radix: 16)
            {
                out.append(v)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return out
    }

    enum Reply {
        case ok([UInt8])
        case error(Int)
        case broken
    }

    /// One pinentry process, spoken to over one socket pair that is its standard input and output.
    final class Session {
        let child: ChildProcess
        /// Our end of the socket pair (the child's end is its fd 0 and 1).
        var channel: ChildPipe
        var buffer: [UInt8] = []

        init?(program: String, arguments: [String], environment: [String: String]?) {
            guard let executable = program.hasPrefix("/") ? program : Self.lookup(program),
                var channel = try? ChildPipe(),
                let child = try? ChildProcess.spawn(
                    executable, arguments: arguments,
                    environment: PinentryPrompter.withUTF8Locale(environment ?? ProcessEnvironment.current()),
                    stdin: channel.childEnd, stdout: channel.childEnd)
            else { return nil }
            channel.closeChildEnd()
            self.channel = channel
            self.child = child
            // The child stays in our process group, so a text pinentry reads the terminal as we would.
            guard case .ok = readReply() else {  // the greeting
                close()
                return nil
            }
        }

        static func lookup(_ name: String) -> String? {
            let path = ProcessEnvironment.current()["PATH"] ?? "/usr/bin:/bin"
            for dir in path.split(separator: ":") {
                let candidate = "\(dir)/\(name)"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            }
            return nil
        }

        func send(_ command: String) -> Reply {
            guard channel.send((command + "\n").utf8) else { return .broken }
            return readReply()
        }

        func readReply() -> Reply {
            var data: [UInt8] = []
            while let line = readLine() {
                if line.starts(with: Array("D ".utf8)) {
                    data += PinentryPrompter.unescape(line.dropFirst(2))
                } else if line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8)) {
                    return .ok(data)
                } else if line.starts(with: Array("ERR ".utf8)) {
                    let code = line.dropFirst(4).prefix { $0 != 0x20 }
                    return .error(Int(String(decoding: code, as: UTF8.self)) ?? -1)
                }
                // Status (S) and comment (#) lines are skipped.
            }
            return .broken
        }

        private func readLine() -> [UInt8]? {
            while true {
                if let newline = buffer.firstIndex(of: 0x0a) {
                    let line = Array(buffer[..<newline])
                    buffer.removeSubrange(...newline)
                    return line
                }
                var chunk = [UInt8](repeating: 0, count: 4096)
                let n = chunk.withUnsafeMutableBytes { read(channel.ourEnd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return nil }
                buffer += chunk[..<n]
                chunk.withUnsafeMutableBytes { wipe($0.baseAddress!, $0.count) }
            }
        }

        func close() {
            _ = channel.send("BYE\n".utf8)
            channel.closeOurEnd()
            _ = child.wait()
            buffer.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } }
        }
    }
}

/// The prompter to use when nothing was configured: `KEYCHAIN_PROMPTER` (`terminal`, `pinentry`, `none`),
/// else the terminal when there is one, else pinentry on a graphical session, else none.
public enum DefaultPrompter {
    public static func make(environment: [String: String] = ProcessEnvironment.current()) -> (any Prompter)? {
        switch environment["KEYCHAIN_PROMPTER"] {
        case "none": return nil
        case "terminal": return TerminalPrompter()
        case "pinentry":
            return PinentryPrompter(program: environment["PINENTRY_PROGRAM"] ?? "pinentry", arguments: ttyArguments(environment))
        default: break
        }
        if TerminalPrompter.isAvailable { return TerminalPrompter() }
        if environment["DISPLAY"] != nil || environment["WAYLAND_DISPLAY"] != nil,
            PinentryPrompter.Session.lookup(environment["PINENTRY_PROGRAM"] ?? "pinentry") != nil
        {
            return PinentryPrompter(program: environment["PINENTRY_PROGRAM"] ?? "pinentry", arguments: ttyArguments(environment))
        }
        return nil
    }

    /// pinentry talks Assuan on its standard input and output, so a text pinentry must be told which terminal to
    /// draw on: `GPG_TTY`, else this process's terminal.
    static func ttyArguments(_ environment: [String: String]) -> [String] {
        if let tty = environment["GPG_TTY"], !tty.isEmpty { return ["--ttyname", tty] }
        for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] {
            if let name = ttyname(fd) { return ["--ttyname", String(cString: name)] }
        }
        return []
    }
}
