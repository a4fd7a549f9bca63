import Foundation
import KeychainClient
import KeychainCore
import Testing

/// PinentryPrompter against a scripted Assuan peer: a shell script that answers like pinentry and logs what it was told.
@Suite("Pinentry prompter (Assuan)")
struct PinentryPrompterTests {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pinentry-\(UUID().uuidString)")

    /// The script runs through /bin/sh rather than being executed itself: a file just written can be briefly
    /// unexecutable (ETXTBSY) while other tests fork processes that inherited its write descriptor.
    static func prompter(_ script: String) -> PinentryPrompter { PinentryPrompter(program: "/bin/sh", arguments: [script]) }

    func peer(getpin: String, confirm: String) throws -> (String, URL) {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let log = dir.appendingPathComponent("log")
        let script = dir.appendingPathComponent("fake-pinentry-\(UUID().uuidString)")
        try """
            #!/bin/sh
            echo "OK Pleased to meet you"
            while IFS= read -r line; do
              echo "$line" >> '\(log.path)'
              case "$line" in
                GETPIN) printf '%s\\n' \(getpin) ;;
                CONFIRM) printf '%s\\n' \(confirm) ;;
                BYE) echo "OK closing connection"; exit 0 ;;
                *) echo "OK" ;;
              esac
            done
            """.write(to: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script.path)
        return (script.path, log)
    }

    @Test("GETPIN: the PIN comes back unescaped; the description is escaped and shown")
    func getPin() throws {
        let (program, log) = try peer(getpin: "'S status' 'D s3cr%25et%0Apart' 'OK'", confirm: "OK")
        defer { try? FileManager.default.removeItem(at: dir) }
        let prompter = Self.prompter(program)
        let response = prompter.requestPassword(
            PasswordRequest(kind: .keychainPassword, description: "Unlock 100% of\nit \u{201C}login\u{201D}", prompt: "Password:"))
        guard case .entered(let secret) = response else {
            Issue.record("expected a PIN, got \(response)")
            return
        }
        #expect(secret.unprotectedString() == "s3cr%et\npart")
        let sent = try String(contentsOf: log, encoding: .utf8)
        // UTF-8 passes through as UTF-8 (the quotes were once sent twice encoded, shown as mojibake).
        #expect(sent.contains("SETDESC Unlock 100%25 of%0Ait \u{201C}login\u{201D}\n"))
        #expect(sent.contains("SETPROMPT Password:\n"))
        #expect(sent.contains("GETPIN\n"))
    }

    @Test("cancel is .cancelled; another error is .unavailable; a missing program is .unavailable")
    func errors() throws {
        let (cancel, _) = try peer(getpin: "'ERR 83886179 Operation cancelled <Pinentry>'", confirm: "OK")
        defer { try? FileManager.default.removeItem(at: dir) }
        if case .cancelled = Self.prompter(cancel).requestPassword(
            PasswordRequest(kind: .keychainPassword, description: "d", prompt: "p")) {} else { Issue.record("not cancelled") }
        let missing = PinentryPrompter(program: "/nonexistent/pinentry")
        if case .unavailable = missing.requestPassword(PasswordRequest(kind: .keychainPassword, description: "d", prompt: "p")) {
        } else { Issue.record("not unavailable") }
    }

    @Test("CONFIRM maps Allow, Always Allow and Deny")
    func confirm() throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        let cases: [(String, ConfirmationResponse)] = [
            ("OK", .allow), ("'ERR 83886194 Not confirmed'", .alwaysAllow), ("'ERR 83886179 Operation cancelled'", .deny),
        ]
        for (reply, expected) in cases {
            let (program, log) = try peer(getpin: "OK", confirm: reply)
            #expect(Self.prompter(program).requestConfirmation(ConfirmationRequest(description: "git wants to read")) == expected)
            let sent = try String(contentsOf: log, encoding: .utf8)
            #expect(sent.contains("SETOK Allow\nSETNOTOK Always Allow\nSETCANCEL Deny\nCONFIRM\n"))
            try? FileManager.default.removeItem(at: log)
        }
    }

    @Test("pinentry always gets a UTF-8 character locale: none, C or a Latin-1 locale becomes C.UTF-8; a UTF-8 one stays")
    func utf8Locale() {
        #expect(PinentryPrompter.withUTF8Locale([:])["LC_CTYPE"] == "C.UTF-8")
        #expect(PinentryPrompter.withUTF8Locale(["LANG": "C"])["LC_CTYPE"] == "C.UTF-8")
        let latin = PinentryPrompter.withUTF8Locale(["LC_ALL": "de_DE.ISO-8859-1", "LANG": "de_DE.UTF-8"])
        #expect(latin["LC_ALL"] == nil && latin["LC_CTYPE"] == "C.UTF-8")
        #expect(PinentryPrompter.withUTF8Locale(["LANG": "de_DE.UTF-8"]) == ["LANG": "de_DE.UTF-8"])
        #expect(PinentryPrompter.withUTF8Locale(["LC_CTYPE": "en_US.utf8", "LANG": "C"]) == ["LC_CTYPE": "en_US.utf8", "LANG": "C"])
    }
}
