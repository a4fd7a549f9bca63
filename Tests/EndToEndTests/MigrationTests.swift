import Foundation
import KeychainClient
import KeychainCore
import Testing

/// `security import-secrets` against stores the real tools made (scripts/migration-sources.sh: gnome-keyring-daemon
/// on a private bus, keepassxc-cli, pass with its own gpg key), read back through `security` and, for the Secret
/// Service's items, through keychaind's Secret Service by the same attributes, as the programs that stored them look.
@Suite("Moving in from other stores, end to end", .serialized,
       .enabled(if: ["/usr/bin/gnome-keyring-daemon", "/usr/bin/keepassxc-cli", "/usr/bin/pass", "/usr/bin/gpg",
                     "/usr/bin/dbus-daemon"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }))
struct MigrationTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/migration-sources.sh")

    /// Runs the fixture script; its JSON manifest.
    static func makeSource(_ arguments: String...) throws -> [String: Any] {
        let output = try ChildProcess.run("/bin/bash", arguments: [script.path] + arguments,
                                          environment: ProcessInfo.processInfo.environment)
        guard output.termination == .exited(0) else {
            throw KeychainError(.io, "migration-sources.sh \(arguments.first ?? ""): \(String(decoding: output.stderr, as: UTF8.self))")
        }
        let manifest = URL(fileURLWithPath: arguments[1]).appendingPathComponent("manifest.json")
        return try JSONSerialization.jsonObject(with: Data(contentsOf: manifest)) as? [String: Any] ?? [:]
    }

    /// The stored items of a gnome-keyring manifest (the session collection's never reach a file or an import).
    static func persistentItems(_ manifest: [String: Any]) -> [[String: Any]] {
        (manifest["items"] as? [[String: Any]] ?? []).filter { ($0["persistent"] as? Bool) ?? true && $0["collection"] as? String != "session" }
    }

    /// Checks through keychaind's Secret Service on `desktop`'s bus that every manifest item is found by exactly its
    /// attributes, with its label and its secret byte for byte (Python's secretstorage, a real client).
    static func checkThroughSecretService(_ desktop: SecretServiceTests.Desktop, items: [[String: Any]]) throws {
        let expected = try JSONSerialization.data(withJSONObject: unique(items).map {
            ["label": $0["label"] ?? "", "attributes": $0["attributes"] ?? [:], "secret_hex": $0["secret_hex"] ?? ""]
        })
        let file = desktop.home.tool.home.appendingPathComponent("expected.json")
        try expected.write(to: file)
        let check = desktop.home.tool.home.appendingPathComponent("check.py")
        try """
            import json, sys, secretstorage
            bus = secretstorage.dbus_init()
            def seen(item, want):
                # gnome-keyring's D-Bus side names a schema-less item org.freedesktop.Secret.Generic (its file does not).
                attributes = dict(item.get_attributes())
                if "xdg:schema" not in want and attributes.get("xdg:schema") == "org.freedesktop.Secret.Generic":
                    del attributes["xdg:schema"]
                return attributes
            for want in json.load(open(sys.argv[1])):
                found = list(secretstorage.search_items(bus, want["attributes"]))
                exact = [i for i in found if seen(i, want["attributes"]) == want["attributes"]
                         and i.get_label() == want["label"] and i.get_secret().hex() == want["secret_hex"]]
                if not exact: print("not found:", want["label"])
            print("checked", len(json.load(open(sys.argv[1]))))

            """.write(to: check, atomically: true, encoding: .utf8)
        let result = try desktop.run("/usr/bin/env", "python3", check.path, file.path)
        #expect(result.stdout == "checked \(unique(items).count)\n", "\(result.stderr)")
    }

    /// Items told apart by what a program sees of them: two with the same attributes, label and secret (in two
    /// collections) are one item here.
    static func unique(_ items: [[String: Any]]) -> [[String: Any]] {
        var seen: Set<String> = []
        return items.filter { item in
            let attributes = (item["attributes"] as? [String: String] ?? [:]).sorted { $0.key < $1.key }
            let key = "\(attributes)|\(item["label"] ?? "")|\(item["secret_hex"] ?? "")"
            return seen.insert(key).inserted
        }
    }

    @Test("gnome-keyring files, read offline with their passwords: every item found by its attributes through keychaind's Secret Service; twice adds nothing; a wrong password 51")
    func gnomeKeyringFiles() throws {
        let source = FileManager.default.temporaryDirectory.appendingPathComponent("gk-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: source) }
        let manifest = try Self.makeSource("gnome-keyring-file", source.path, "login pw", "work pw")
        // The keyrings with files: login and work (binary, encrypted) and one made with an empty password
        // (gnome-keyring's textual format, in the clear).
        let items = Self.persistentItems(manifest).filter {
            ["login", "work", "unencrypted"].contains($0["collection"] as? String)
        }
        #expect(items.count >= 5)
        let keyrings = source.appendingPathComponent("home/.local/share/keyrings")
        let desktop = try SecretServiceTests.Desktop()
        let login = keyrings.appendingPathComponent("login.keyring").path
        let loginCount = items.filter { $0["collection"] as? String == "login" }.count

        let wrong = try desktop.run("security", "import-secrets", "--from", "gnome-keyring", "-P", "-", login, stdin: "nope\n")
        #expect(wrong.status == 51)
        let dry = try desktop.run("security", "import-secrets", "--from", "gnome-keyring", "--dry-run", "-P", "-", login,
                                  stdin: "login pw\n")
        #expect(dry.stdout == "Would import \(loginCount) items from gnome-keyring (\(loginCount) generic passwords).\n")
        #expect(try desktop.run("security", "dump-keychain").stdout.isEmpty)
        let first = try desktop.run("security", "import-secrets", "--from", "gnome-keyring", "-P", "-", login, stdin: "login pw\n")
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout == "Imported \(loginCount) items from gnome-keyring (\(loginCount) generic passwords).\n")
        let work = try desktop.run("security", "import-secrets", "--from", "gnome-keyring", "-P", "-",
                                   keyrings.appendingPathComponent("work.keyring").path, stdin: "work pw\n")
        #expect(work.status == 0, "\(work.stderr)")
        let plain = try desktop.run("security", "import-secrets", "--from", "gnome-keyring",
                                    keyrings.appendingPathComponent("unencrypted.keyring").path)
        #expect(plain.status == 0, "\(plain.stderr)")
        let plainCount = items.filter { $0["collection"] as? String == "unencrypted" }.count
        #expect(plain.stdout.hasPrefix("Imported \(plainCount - 1) items from gnome-keyring"))  // one equals a login item
        let again = try desktop.run("security", "import-secrets", "--from", "gnome-keyring", "-P", "-", login, stdin: "login pw\n")
        #expect(again.stdout == "Imported 0 items from gnome-keyring; \(loginCount) already there.\n")

        desktop.home.stopDaemon()
        #expect(try desktop.startDaemon() == "ready")
        try Self.checkThroughSecretService(desktop, items: items)
        // Chromium's own lookup: its schema's attribute alone.
        let chrome = items.first { $0["label"] as? String == "Chrome Safe Storage" }
        let found = try desktop.run("/usr/bin/secret-tool", "lookup", "application", "chrome")
        #expect(Data(found.stdout.utf8).map { String(format: "%02x", $0) }.joined() == chrome?["secret_hex"] as? String)
        // git's own helper (built by the fixture script from git's sources) finds the login it stored.
        let helper = source.appendingPathComponent("bin/git-credential-libsecret").path
        if FileManager.default.isExecutableFile(atPath: helper),
            let git = items.first(where: { $0["label"] as? String == "Git: https://example.com/" }),
            let hex = git["secret_hex"] as? String
        {
            let password = String(decoding: stride(from: 0, to: hex.count, by: 2).compactMap {
                UInt8(hex[hex.index(hex.startIndex, offsetBy: $0)..<hex.index(hex.startIndex, offsetBy: $0 + 2)], radix: 16)
            }, as: UTF8.self)
            let get = try desktop.run(helper, "get", stdin: "protocol=https\nhost=example.com\n\n")
            #expect(get.stdout.contains("password=\(password)\n"), "\(get.stderr)")
        }
    }

    @Test("a running gnome-keyring read over D-Bus: after the switch every item is found by its attributes through keychaind")
    func runningSecretService() throws {
        let source = FileManager.default.temporaryDirectory.appendingPathComponent("ss-\(UUID().uuidString)")
        defer {
            _ = try? ChildProcess.run("/bin/bash", arguments: [Self.script.path, "stop", source.path])
            try? FileManager.default.removeItem(at: source)
        }
        let manifest = try Self.makeSource("secret-service", source.path, "login pw")
        let items = Self.persistentItems(manifest)
        let environment = try String(contentsOf: source.appendingPathComponent("pids.env"), encoding: .utf8)
        let address = environment.split(separator: "\n").compactMap { line -> String? in
            guard let range = line.range(of: "DBUS_SESSION_BUS_ADDRESS=") else { return nil }
            return String(line[range.upperBound...]).trimmingCharacters(in: CharacterSet(charactersIn: "'\""))
        }.first
        let home = try DaemonTests.DaemonHome()
        defer { home.cleanUp() }
        let imported = try home.run("security", ["import-secrets", "--from", "secret-service"],
                                    environment: ["DBUS_SESSION_BUS_ADDRESS": address])
        #expect(imported.status == 0, "\(imported.stderr)")
        // Every item is imported or found already there (two equal items in two collections are one here; whether
        // gnome-keyring shows them equal varies: it sometimes names one org.freedesktop.Secret.Generic on the bus).
        let counts = imported.stdout.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        #expect(imported.stdout.hasPrefix("Imported "))
        #expect(counts.count >= 2 && counts[0] + (counts.count > 2 ? counts[2] : 0) == items.count, "\(imported.stdout)")
        #expect(counts.count >= 2 && counts[0] >= Self.unique(items).count)
        _ = try ChildProcess.run("/bin/bash", arguments: [Self.script.path, "stop", source.path])

        // The same home, now with keychaind as the Secret Service on a bus of its own.
        let desktop = try SecretServiceTests.Desktop(home: home)
        home.stopDaemon()
        #expect(try desktop.startDaemon() == "ready")
        try Self.checkThroughSecretService(desktop, items: items)
        // Reading keychaind's own Secret Service is refused: it would only find its own items.
        let own = try desktop.run("security", "import-secrets", "--from", "secret-service")
        #expect(own.status == 206)
    }

    @Test("keepassxc-cli's XML and CSV exports: URLs become internet passwords, the rest generic; notes, groups and custom fields kept")
    func keepassxcExports() throws {
        let source = FileManager.default.temporaryDirectory.appendingPathComponent("kp-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: source) }
        _ = try Self.makeSource("keepassxc", source.path, "db pw")
        for format in ["xml", "csv"] {
            let tool = Tool()
            defer { try? FileManager.default.removeItem(at: tool.home) }
            let file = source.appendingPathComponent("export.\(format)").path
            let first = try tool.run("import-secrets", "--from", "keepassxc-\(format)", file)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.hasPrefix("Imported "))
            #expect(try tool.run("import-secrets", "--from", "keepassxc-\(format)", file).stdout.hasPrefix("Imported 0 items"))
            // The entry with a URL: an internet password with its server, port, path and protocol.
            let web = try tool.run("find-internet-password", "-s", "login.example.com", "-w")
            #expect(web.stdout == "alice-new-pass\n", "\(format): \(web.stderr)")
            let webAttributes = try tool.run("find-internet-password", "-s", "login.example.com")
            #expect(webAttributes.stdout.contains("\"port\"<uint32>=0x000020FB"))
            #expect(webAttributes.stdout.contains("\"path\"<blob>=\"/path\""))
            #expect(webAttributes.stdout.contains("\"ptcl\"<uint32>=\"htps\""))
            #expect(webAttributes.stdout.contains("\"acct\"<blob>=\"alice\""))
            // Without a URL: a generic password named by its title, its group as the description.
            let pin = try tool.run("find-generic-password", "-s", "Bank PIN")
            #expect(pin.stdout.contains("\"desc\"<blob>=\"Finance/Cards\""))
            #expect(pin.stdout.contains("\"acct\"<blob>=\"bob\""))
            // The recycle bin's entry does not come, in either export.
            #expect(try tool.run("find-generic-password", "-s", "Old entry").status == 44)
        }
    }

    @Test("moved in from keepassxc-cli's export and a pass store, then read through Security by another program via keychaind: found by class and attributes as Apple code asks, each secret once the user allows it (Always Allow: asked once)")
    func readBackThroughSecurity() throws {
        let source = FileManager.default.temporaryDirectory.appendingPathComponent("rb-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: source) }
        _ = try Self.makeSource("keepassxc", source.appendingPathComponent("kp").path, "db pw")
        let pass = try Self.makeSource("pass", source.appendingPathComponent("pass").path)
        let home = try DaemonTests.DaemonHome()
        defer { home.cleanUp() }
        let pinentry = try DaemonTests.ScriptedPinentry(in: home.tool.home)
        let environment = home.environment(asking: pinentry)
        func run(_ program: String, _ arguments: [String], _ changes: [String: String] = [:]) throws -> Tool.Result {
            let output = try ChildProcess.run(program, arguments: arguments, environment: environment.merging(changes) { $1 })
            let status: Int32 = if case .exited(let code) = output.termination { code } else { -1 }
            return Tool.Result(status: status, stdout: String(decoding: output.stdout, as: UTF8.self),
                               stderr: String(decoding: output.stderr, as: UTF8.self))
        }
        let security = Tool.binary.path
        let fromKeePassXC = try run(security, ["import-secrets", "--from", "keepassxc-xml",
                                               source.appendingPathComponent("kp/export.xml").path])
        #expect(fromKeePassXC.status == 0, "\(fromKeePassXC.stderr)")
        let fromPass = try run(security, ["import-secrets", "--from", "pass", source.appendingPathComponent("pass/store").path],
                               ["GNUPGHOME": source.appendingPathComponent("pass/gnupg").path])
        #expect(fromPass.status == 0, "\(fromPass.stderr)")

        func hex(_ text: String) -> String { Data(text.utf8).map { String(format: "%02x", $0) }.joined() }
        var expected: [[String: Any]] = [
            ["match": ["class": "inet", "srvr": "login.example.com"],
             "attributes": ["acct": "alice", "port": 8443, "path": "/path", "ptcl": "htps"], "secret_hex": hex("alice-new-pass")],
            ["match": ["class": "inet", "srvr": "login.example.com", "ptcl": "htps", "acct": "alice"],
             "attributes": [:] as [String: Any], "secret_hex": hex("alice-new-pass")],
            ["match": ["class": "genp", "svce": "Bank PIN"],
             "attributes": ["acct": "bob", "desc": "Finance/Cards"], "secret_hex": hex("0000")],
            ["match": ["class": "genp", "acct": "guest"], "attributes": ["svce": "Café ☕ Wi-Fi"], "secret_hex": hex("wifi-pass")],
        ]
        for entry in pass["entries"] as? [[String: Any]] ?? [] {
            let name = entry["name"] as? String ?? ""
            expected.append(["match": ["class": "genp", "svce": name, "acct": String(name.split(separator: "/").last ?? "")],
                             "attributes": [:] as [String: Any], "secret_hex": hex(entry["password"] as? String ?? "")])
        }
        let file = source.appendingPathComponent("expected.json")
        try JSONSerialization.data(withJSONObject: expected).write(to: file)
        // This test binary, run again as a program of its own: SecurityCompatSuite.ImportedItemsProbe.
        let probe = [CommandLine.arguments[0], "--testing-library", "swift-testing", "--filter", "ImportedItemsProbe"]
        let probeEnvironment = ["KEYCHAIN_IMPORT_PROBE": file.path, "KEYCHAIN_BACKEND": "daemon"]
        // Six items: each is asked about once (Always Allow), the login item's second query not again.
        try pinentry.answer("always", "always", "always", "always", "always", "always")
        let first = try run(probe[0], Array(probe.dropFirst()), probeEnvironment)
        #expect(first.status == 0, "\(first.stdout.suffix(3000))")
        #expect(pinentry.confirmations == 6)
        #expect(pinentry.descriptions.contains("swift-keychainPackageTests.xctest"))
        // Kept: the same program reads them all again with nobody asked.
        let again = try run(probe[0], Array(probe.dropFirst()), probeEnvironment)
        #expect(again.status == 0, "\(again.stdout.suffix(3000))")
        #expect(pinentry.confirmations == 6)
    }

    @Test("a pass store decrypted by the user's own gpg: first line the secret, the rest the comment, the path service and account")
    func passStore() throws {
        let source = FileManager.default.temporaryDirectory.appendingPathComponent("ps-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: source) }
        let manifest = try Self.makeSource("pass", source.path)
        let entries = manifest["entries"] as? [[String: Any]] ?? []
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        var environment = tool.environment
        environment["GNUPGHOME"] = source.appendingPathComponent("gnupg").path
        let store = source.appendingPathComponent("store").path
        func run(_ arguments: String...) throws -> Tool.Result {
            let output = try ChildProcess.run(Tool.binary.path, arguments: arguments, environment: environment)
            let status: Int32 = if case .exited(let code) = output.termination { code } else { -1 }
            return Tool.Result(status: status, stdout: String(decoding: output.stdout, as: UTF8.self),
                               stderr: String(decoding: output.stderr, as: UTF8.self))
        }
        let imported = try run("import-secrets", "--from", "pass", store)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout == "Imported \(entries.count) items from pass (\(entries.count) generic passwords).\n")
        for entry in entries {
            let name = entry["name"] as? String ?? ""
            let found = try run("find-generic-password", "-s", name, "-a", String(name.split(separator: "/").last ?? ""), "-w")
            // `-w` prints a password that is not plain ASCII in hex, as macOS does.
            let password = entry["password"] as? String ?? ""
            let printed = password.allSatisfy { $0.isASCII && !$0.isNewline }
                ? password : Data(password.utf8).map { String(format: "%02x", $0) }.joined()
            #expect(found.stdout == printed + "\n", "\(name)")
        }
        let alice = try run("find-generic-password", "-s", "email/alice@example.com")
        #expect(alice.stdout.contains("login: alice\\012url: https://mail.example.com"))
        #expect(try run("import-secrets", "--from", "pass", store).stdout
                == "Imported 0 items from pass; \(entries.count) already there.\n")
        // Without the key, every entry is named and nothing is stored; the exit status says so.
        environment["GNUPGHOME"] = source.appendingPathComponent("no-such-gnupg").path
        let other = Tool()
        defer { try? FileManager.default.removeItem(at: other.home) }
        environment["XDG_DATA_HOME"] = other.home.appendingPathComponent("data").path
        environment["XDG_STATE_HOME"] = other.home.appendingPathComponent("state").path
        let failed = try run("import-secrets", "--from", "pass", store)
        #expect(failed.status == 1)
        #expect(failed.stderr.contains("security: import-secrets: email/alice@example.com: "))
        #expect(failed.stderr.contains("gpg could not decrypt it"))
        #expect(failed.stdout == "Imported 0 items from pass; \(entries.count) could not come.\n")
    }
}
