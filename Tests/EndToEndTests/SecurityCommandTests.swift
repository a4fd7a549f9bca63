import Foundation
import KeychainClient
import Testing

/// Runs the built `security` executable in a temporary XDG home, as a user would.
struct Tool: Sendable {
    let home: URL

    init() {
        home = FileManager.default.temporaryDirectory.appendingPathComponent("e2e-\(UUID().uuidString)")
    }

    static var binary: URL {
        // The test bundle sits beside the package's executables in the build folder.
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        if dir.lastPathComponent.hasSuffix(".xctest") { dir.deleteLastPathComponent() }
        let candidate = dir.appendingPathComponent("security")
        if FileManager.default.fileExists(atPath: candidate.path) { return candidate }
        return Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("security")
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        /// Standard output as bytes, for what need not be UTF-8.
        var stdoutBytes = Data()
    }

    @discardableResult
    func run(_ arguments: String..., stdin: String? = nil) throws -> Result {
        try run(program: Self.binary, arguments, stdin: stdin)
    }

    /// Runs another of the package's executables (the credential helpers) in the same home.
    @discardableResult
    func helper(_ name: String, _ arguments: String..., stdin: String? = nil) throws -> Result {
        try run(program: Self.binary.deletingLastPathComponent().appendingPathComponent(name), arguments, stdin: stdin)
    }

    func run(program: URL, _ arguments: [String], stdin: String?) throws -> Result {
        try run(program: program, arguments, input: Data((stdin ?? "").utf8))
    }

    /// Runs another of the package's executables with raw bytes on standard input.
    @discardableResult
    func helper(_ name: String, _ arguments: String..., input: Data) throws -> Result {
        try run(program: Self.binary.deletingLastPathComponent().appendingPathComponent(name), arguments, input: input)
    }

    func run(program: URL, _ arguments: [String], input: Data) throws -> Result {
        let output = try ChildProcess.run(program.path, arguments: arguments, environment: environment, input: input)
        let status: Int32 = switch output.termination {
        case .exited(let code): code
        case .signalled(let signal): 128 + signal
        }
        return Result(status: status, stdout: String(decoding: output.stdout, as: UTF8.self),
                      stderr: String(decoding: output.stderr, as: UTF8.self), stdoutBytes: Data(output.stdout))
    }

    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_DATA_HOME"] = home.appendingPathComponent("data").path
        environment["XDG_STATE_HOME"] = home.appendingPathComponent("state").path
        environment["XDG_CONFIG_HOME"] = home.appendingPathComponent("config").path
        environment["HOME"] = home.path
        // KEYCHAIN_TEST_BACKEND=daemon runs the same commands through keychaind, started on demand in a runtime
        // directory inside this home: removing the home at the end of a test removes its socket, and the daemon
        // then ends by itself. (.ci/run runs the credential-helper suites this way too.)
        if environment["KEYCHAIN_TEST_BACKEND"] == "daemon" {
            let runtime = home.appendingPathComponent("run")
            try? FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true,
                                                     attributes: [.posixPermissions: 0o700])
            environment["KEYCHAIN_BACKEND"] = "daemon"
            environment["XDG_RUNTIME_DIR"] = runtime.path
        } else {
            // In-process, as before the daemon (the default, auto, would start a keychaind per test home).
            environment["KEYCHAIN_BACKEND"] = "embedded"
        }
        return environment
    }

    var loginPath: String { home.appendingPathComponent("data/keychains/login.keychain-db").path }
}

@Suite("The security command, end to end")
struct SecurityCommandTests {
    @Test("add and find a generic password; exit statuses are the status's low byte")
    func genericPassword() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        let first = try tool.run("add-generic-password", "-a", "alice", "-s", "svc", "-w", "s3cret")
        #expect(first.status == 0)
        #expect(first.stderr.contains("without a password"))
        let dup = try tool.run("add-generic-password", "-a", "alice", "-s", "svc", "-w", "x")
        #expect(dup.status == 45)
        #expect(dup.stderr == "security: SecKeychainItemCreateFromContent (<default>): The specified item already exists in the keychain.\n")
        let w = try tool.run("find-generic-password", "-a", "alice", "-s", "svc", "-w")
        #expect(w.status == 0)
        #expect(w.stdout == "s3cret\n")
        let missing = try tool.run("find-generic-password", "-s", "nope")
        #expect(missing.status == 44)
        #expect(missing.stderr == "security: SecKeychainSearchCopyNext: The specified item could not be found in the keychain.\n")
        let g = try tool.run("find-generic-password", "-s", "svc", "-g")
        #expect(g.stderr == "password: \"s3cret\"\n")
        let lines = g.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[0] == "keychain: \"\(tool.loginPath)\"")
        #expect(lines[1] == "version: 512")
        #expect(lines[2] == "class: \"genp\"")
        #expect(lines[3] == "attributes:")
        #expect(lines[4] == "    0x00000007 <blob>=\"svc\"")
        #expect(lines[5] == "    0x00000008 <blob>=<NULL>")
        #expect(lines[6] == "    \"acct\"<blob>=\"alice\"")
        #expect(lines[7].hasPrefix("    \"cdat\"<timedate>=0x"))
        #expect(lines[7].hasSuffix("Z\\000\""))
        #expect(lines[8] == "    \"crtr\"<uint32>=<NULL>")
        #expect(lines[9] == "    \"cusi\"<sint32>=<NULL>")
        #expect(lines[18] == "    \"svce\"<blob>=\"svc\"")
        #expect(lines[19] == "    \"type\"<uint32>=<NULL>")
        #expect(lines.count == 21)
    }

    @Test("-U updates, -w last reads standard input, -c and -C store four-character codes")
    func updateAndStdin() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        try tool.run("add-generic-password", "-a", "a", "-s", "s", "-w", "one")
        #expect(try tool.run("add-generic-password", "-U", "-a", "a", "-s", "s", "-w", "two").status == 0)
        #expect(try tool.run("find-generic-password", "-a", "a", "-w").stdout == "two\n")
        #expect(try tool.run("add-generic-password", "-a", "b", "-s", "s", "-c", "aapl", "-w", stdin: "piped\n").status == 0)
        #expect(try tool.run("find-generic-password", "-a", "b", "-w").stdout == "piped\n")
        let dump = try tool.run("find-generic-password", "-a", "b")
        #expect(dump.stdout.contains("    \"crtr\"<uint32>=\"aapl\"\n"))
        #expect(try tool.run("add-generic-password", "-a", "c", "-s", "s", "-c", "abc").status == 2)
        #expect(try tool.run("add-generic-password", "-a", "h", "-s", "s", "-X", "00ff41").status == 0)
        #expect(try tool.run("find-generic-password", "-a", "h", "-w").stdout == "00ff41\n")
    }

    @Test("internet passwords: protocol, port, default auth type; delete prints and removes the first match")
    func internetPassword() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        #expect(try tool.run("add-internet-password", "-a", "bob", "-s", "example.com", "-r", "htps", "-P", "443", "-w", "pw").status == 0)
        let found = try tool.run("find-internet-password", "-s", "example.com")
        #expect(found.stdout.contains("    \"port\"<uint32>=0x000001BB \n"))
        #expect(found.stdout.contains("    \"ptcl\"<uint32>=\"htps\"\n"))
        #expect(found.stdout.contains("    \"atyp\"<blob>=\"dflt\"\n"))
        #expect(found.stdout.contains("    \"path\"<blob>=<NULL>\n"))
        #expect(try tool.run("add-internet-password", "-a", "bob", "-s", "x", "-r", "ftp").status == 2)
        let deleted = try tool.run("delete-internet-password", "-s", "example.com")
        #expect(deleted.status == 0)
        #expect(deleted.stderr == "password has been deleted.\n")
        #expect(deleted.stdout.contains("class: \"inet\""))
        #expect(try tool.run("find-internet-password", "-s", "example.com").status == 44)
        #expect(try tool.run("delete-generic-password").status == 2)
    }

    @Test("find walks the search list: a keychain listed but gone is skipped, the next one is searched")
    func searchListWithMissingKeychain() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        // The login keychain, made at first use (no terminal here: without a password).
        #expect(try tool.run("add-generic-password", "-a", "acct", "-s", "svc", "-w", "found-it").status == 0)
        #expect(try tool.run("list-keychains", "-s", "gone", "login").status == 0)
        let found = try tool.run("find-generic-password", "-a", "acct", "-s", "svc", "-w")
        #expect(found.status == 0)
        #expect(found.stdout == "found-it\n")
        #expect(try tool.run("find-generic-password", "-a", "other", "-s", "svc").status == 44)
    }

    @Test("find walks the search list in order: the first keychain with a match answers, a locked one is passed by")
    func searchListOrder() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        #expect(try tool.run("create-keychain", "-p", "", "first").status == 0)
        // Made without a password, filled, then given one: in-process (the default here) every command starts with
        // a keychain that has a password locked, and there is nobody to ask for it.
        #expect(try tool.run("create-keychain", "-p", "", "locked").status == 0)
        for (keychain, secret) in [("first", "in-first"), ("login", "in-login")] {
            let keychainArguments = keychain == "login" ? [] : [keychain]
            #expect(try tool.run(program: Tool.binary, ["add-generic-password", "-s", "svc", "-a", "both", "-w", secret]
                                 + keychainArguments, stdin: nil).status == 0)
        }
        #expect(try tool.run("add-generic-password", "-s", "svc", "-a", "login-only", "-w", "only-login").status == 0)
        #expect(try tool.run("add-generic-password", "-s", "svc", "-a", "locked-only", "-w", "x", "locked").status == 0)
        #expect(try tool.run("set-keychain-password", "-o", "", "-p", "pw", "locked").status == 0)
        #expect(try tool.run("lock-keychain", "locked").status == 0)
        let first = tool.home.appendingPathComponent("data/keychains/first.keychain-db").path
        let login = tool.home.appendingPathComponent("data/keychains/login.keychain-db").path

        #expect(try tool.run("list-keychains", "-s", "first", "login").status == 0)
        #expect(try tool.run("find-generic-password", "-s", "svc", "-a", "both", "-w").stdout == "in-first\n")
        #expect(try tool.run("find-generic-password", "-s", "svc", "-a", "both").stdout.hasPrefix("keychain: \"\(first)\"\n"))
        let onlyInLogin = try tool.run("find-generic-password", "-s", "svc", "-a", "login-only")
        #expect(onlyInLogin.stdout.hasPrefix("keychain: \"\(login)\"\n"))
        #expect(try tool.run("list-keychains", "-s", "login", "first").status == 0)
        #expect(try tool.run("find-generic-password", "-s", "svc", "-a", "both", "-w").stdout == "in-login\n")

        // A locked keychain ahead, and nobody to ask for its password: passed by, the next ones searched; what only
        // it holds is errSecInteractionNotAllowed, not "not found".
        #expect(try tool.run("list-keychains", "-s", "locked", "first", "login").status == 0)
        #expect(try tool.run("find-generic-password", "-s", "svc", "-a", "both", "-w").stdout == "in-first\n")
        #expect(try tool.run("find-generic-password", "-s", "svc", "-a", "login-only", "-w").stdout == "only-login\n")
        #expect(try tool.run("find-generic-password", "-s", "svc", "-a", "locked-only", "-w").status == 36)
        #expect(try tool.run("find-generic-password", "-s", "svc", "-a", "nowhere").status == 44)
        // Named keychains are searched, in the order given, whatever the list says.
        #expect(try tool.run("find-generic-password", "-s", "svc", "-a", "both", "-w", "login", "first").stdout == "in-login\n")
    }

    @Test("keychains: create with a password, list, default, settings, lock and unlock, change password, delete")
    func keychains() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        #expect(try tool.run("create-keychain", "-p", "pw1", "work").status == 0)
        #expect(try tool.run("create-keychain", "-p", "pw1", "work").status == 48)
        let path = tool.home.appendingPathComponent("data/keychains/work.keychain-db").path
        #expect(try tool.run("list-keychains").stdout.contains("    \"\(path)\"\n"))
        // Apple's one line and nothing else: not the engine's own warning as well (it went to standard output once).
        let wrong = try tool.run("unlock-keychain", "-p", "wrong", "work")
        #expect(wrong.status == 51)
        #expect(wrong.stdout == "")
        #expect(wrong.stderr == "security: SecKeychainUnlock work: The user name or passphrase you entered is not correct.\n")
        #expect(try tool.run("unlock-keychain", "-p", "pw1", "work").status == 0)
        #expect(try tool.run("set-keychain-settings", "-l", "-t", "600", "work").status == 0)
        #expect(try tool.run("show-keychain-info", "work").stderr == "Keychain \"work\" lock-on-sleep timeout=600s\n")
        #expect(try tool.run("set-keychain-settings", "work").status == 0)
        #expect(try tool.run("show-keychain-info", "work").stderr == "Keychain \"work\" no-timeout\n")
        #expect(try tool.run("set-keychain-password", "-o", "pw1", "-p", "pw2", "work").status == 0)
        #expect(try tool.run("unlock-keychain", "-p", "pw2", "work").status == 0)
        #expect(try tool.run("lock-keychain", "work").status == 0)
        // An item of the WhenUnlocked class in a locked keychain, with no terminal to ask: errSecInteractionNotAllowed.
        #expect(try tool.run("add-generic-password", "-a", "x", "-s", "y", "work").status == 36)
        #expect(try tool.run("default-keychain", "-s", "work").status == 0)
        #expect(try tool.run("default-keychain").stdout == "    \"\(path)\"\n")
        #expect(try tool.run("delete-keychain", "work").status == 0)
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(try tool.run("delete-keychain", "work").status == 50)
    }

    @Test("help, abbreviations, unknown commands and error codes")
    func dispatch() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        let help = try tool.run("help")
        #expect(help.stdout.contains("    find-generic-password"))
        let unknown = try tool.run("frobnicate")
        #expect(unknown.status == 1)
        #expect(unknown.stderr == "security: unknown command \"frobnicate\"\n")
        let error = try tool.run("error", "-25300")
        #expect(error.status == 1)
        #expect(error.stdout == "Error: 0xFFFF9D2C -25300 The specified item could not be found in the keychain.\n")
        try tool.run("add-generic-password", "-a", "a", "-s", "s", "-w", "p")
        #expect(try tool.run("find-gen", "-a", "a", "-w").stdout == "p\n")
    }

    @Test("the secret never appears in the keychain files")
    func noPlaintext() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        try tool.run("add-generic-password", "-a", "CANARYACCT", "-s", "CANARYSVC", "-w", "CANARYSECRET")
        let dir = tool.home.appendingPathComponent("data/keychains")
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
            let bytes = try Data(contentsOf: dir.appendingPathComponent(name))
            for canary in ["CANARYACCT", "CANARYSVC", "CANARYSECRET"] {
                #expect(bytes.range(of: Data(canary.utf8)) == nil, "\(canary) in \(name)")
            }
        }
    }
}

@Suite("security: JSON, completions and the manual page")
struct SecurityExtrasTests {
    /// The package root, from this file's path.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test("--json prints the item as JSON, with the password only when asked")
    func json() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        try tool.run("add-generic-password", "-a", "alice", "-s", "svc", "-l", "My label", "-w", "s3cret")
        let plain = try tool.run("find-generic-password", "-a", "alice", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(plain.stdout.utf8)) as? [String: Any])
        let attributes = try #require(object["attributes"] as? [String: Any])
        #expect(object["class"] as? String == "genp")
        #expect(attributes["acct"] as? String == "alice")
        #expect(attributes["labl"] as? String == "My label")
        #expect(object["password"] == nil)
        let withPassword = try tool.run("find-generic-password", "-a", "alice", "-g", "--json")
        #expect(withPassword.stdout.contains("\"password\":\"s3cret\""))
        let dump = try tool.run("dump-keychain", "--json")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [[String: Any]])
        #expect(array.count == 1)
        #expect(try tool.run("add-generic-password", "-a", "b", "-s", "s", "--json").status == 2)
    }

    @Test("the committed man page and completions are what the command generates")
    func generatedFilesAreCurrent() throws {
        let tool = Tool()
        for (arguments, path) in [(["--man"], "docs/security.1"), (["--completions", "bash"], "completions/security.bash"),
                                  (["--completions", "zsh"], "completions/_security")] {
            let generated = try tool.run(arguments[0], arguments.count > 1 ? arguments[1] : "")
            let committed = try String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8)
            #expect(generated.stdout == committed, "\(path) is stale: regenerate with security \(arguments.joined(separator: " "))")
        }
    }
}

@Suite("Credential helpers and keychain preferences, end to end")
struct HelperTests {
    @Test("docker: store, get, list, erase, and docker's not-found text on stdout with exit 1")
    func docker() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        let store = try tool.helper("docker-credential-keychain", "store",
                                    stdin: #"{"ServerURL":"https://registry.example.com:5000/v2","Username":"bob","Secret":"tok"}"#)
        #expect(store.status == 0)
        let get = try tool.helper("docker-credential-keychain", "get", stdin: "https://registry.example.com:5000/v2\n")
        #expect(get.status == 0)
        let creds = try #require(try JSONSerialization.jsonObject(with: Data(get.stdout.utf8)) as? [String: String])
        #expect(creds["Username"] == "bob")
        #expect(creds["Secret"] == "tok")
        // No port or path given: matches any.
        #expect(try tool.helper("docker-credential-keychain", "get", stdin: "registry.example.com").status == 0)
        #expect(try tool.helper("docker-credential-keychain", "get", stdin: "https://registry.example.com:6000").status == 1)
        let list = try tool.helper("docker-credential-keychain", "list")
        #expect(list.stdout == #"{"https://registry.example.com:5000/v2":"bob"}"# + "\n")
        #expect(try tool.helper("docker-credential-keychain", "erase", stdin: "https://registry.example.com:5000/v2").status == 0)
        let missing = try tool.helper("docker-credential-keychain", "get", stdin: "https://registry.example.com:5000/v2")
        #expect(missing.status == 1)
        #expect(missing.stdout == "credentials not found in native keychain\n")
    }

    @Test("git: store keeps password_expiry_utc and oauth_refresh_token; erase needs the matching password")
    func git() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        let input = "protocol=https\nhost=git.example.com\nusername=alice\npassword=pw\npassword_expiry_utc=9999999999\noauth_refresh_token=refresh\n\n"
        #expect(try tool.helper("git-credential-keychain", "store", stdin: input).status == 0)
        let got = try tool.helper("git-credential-keychain", "get", stdin: "protocol=https\nhost=git.example.com\n\n")
        #expect(got.stdout == "username=alice\npassword=pw\npassword_expiry_utc=9999999999\noauth_refresh_token=refresh\n")
        try tool.helper("git-credential-keychain", "erase", stdin: "protocol=https\nhost=git.example.com\npassword=other\n\n")
        #expect(try tool.helper("git-credential-keychain", "get", stdin: "protocol=https\nhost=git.example.com\n\n").stdout.contains("password=pw"))
        try tool.helper("git-credential-keychain", "erase", stdin: "protocol=https\nhost=git.example.com\nusername=alice\n\n")
        #expect(try tool.helper("git-credential-keychain", "get", stdin: "protocol=https\nhost=git.example.com\n\n").stdout == "")
    }

    @Test("login-keychain -s and dump-keychain -a")
    func loginAndAccess() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        try tool.run("create-keychain", "-p", "pw", "other")
        let path = tool.home.appendingPathComponent("data/keychains/other.keychain-db").path
        #expect(try tool.run("login-keychain", "-s", "other").status == 0)
        #expect(try tool.run("login-keychain").stdout == "    \"\(path)\"\n")
        try tool.run("login-keychain", "-s")
        #expect(try tool.run("login-keychain").stdout == "    \"\(tool.loginPath)\"\n")
        try tool.run("add-generic-password", "-a", "a", "-s", "s", "-w", "p")
        let dump = try tool.run("dump-keychain", "-a", tool.loginPath)
        #expect(dump.stdout.contains("access:\n    access group: \"security\"\n    accessible: ak\n"))
    }
}

@Suite("security: every item flag")
struct ItemFlagTests {
    @Test("generic: -l -D -j -G -c -C -T are stored and printed, and each one finds the item")
    func genericFlags() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        #expect(try tool.run("add-generic-password", "-a", "acc", "-s", "svc", "-l", "Label", "-D", "kind", "-j", "note",
                             "-G", "gen", "-c", "crea", "-C", "type", "-T", "/usr/bin/git", "-T", Tool.binary.path,
                             "-w", "pw").status == 0)
        let out = try tool.run("find-generic-password", "-l", "Label").stdout
        for line in ["    0x00000007 <blob>=\"Label\"", "    \"desc\"<blob>=\"kind\"", "    \"icmt\"<blob>=\"note\"",
                     "    \"gena\"<blob>=\"gen\"", "    \"crtr\"<uint32>=\"crea\"", "    \"type\"<uint32>=\"type\""] {
            #expect(out.contains(line + "\n"), "\(line)")
        }
        for (flag, value) in [("-D", "kind"), ("-j", "note"), ("-G", "gen"), ("-c", "crea"), ("-C", "type")] {
            #expect(try tool.run("find-generic-password", flag, value, "-w").stdout == "pw\n", "\(flag)")
        }
        #expect(try tool.run("find-generic-password", "-D", "other").status == 44)
        #expect(try tool.run("delete-generic-password", "-j", "note").status == 0)
    }

    @Test("internet: -d -p -P -r -t are stored and matched")
    func internetFlags() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        #expect(try tool.run("add-internet-password", "-a", "u", "-s", "host", "-d", "DOMAIN", "-p", "/path", "-P", "8080",
                             "-r", "http", "-t", "form", "-w", "pw").status == 0)
        let out = try tool.run("find-internet-password", "-s", "host").stdout
        for line in ["    \"sdmn\"<blob>=\"DOMAIN\"", "    \"path\"<blob>=\"/path\"", "    \"port\"<uint32>=0x00001F90 ",
                     "    \"ptcl\"<uint32>=\"http\"", "    \"atyp\"<blob>=\"form\""] {
            #expect(out.contains(line + "\n"), "\(line)")
        }
        for (flag, value) in [("-d", "DOMAIN"), ("-p", "/path"), ("-P", "8080"), ("-r", "http"), ("-t", "form")] {
            #expect(try tool.run("find-internet-password", "-s", "host", flag, value, "-w").stdout == "pw\n", "\(flag)")
        }
        #expect(try tool.run("find-internet-password", "-s", "host", "-P", "443").status == 44)
        #expect(try tool.run("add-internet-password", "-a", "u", "-s", "host", "-d", "DOMAIN", "-p", "/path", "-P", "8080",
                             "-r", "http", "-t", "form", "-U", "-w", "new").status == 0)
        #expect(try tool.run("find-internet-password", "-a", "u", "-w").stdout == "new\n")
    }
}

@Suite("Process hardening")
struct ProcessHardeningTests {
    @Test("the command writes no core file: its core size limit is zero while it holds a password")
    func noCoreFiles() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        // The command starts with core files allowed (a shell raises both limits, then execs it), so only the
        // command itself can bring them to zero: the test fails if it does not.
        let raised = try ChildProcess.run("/bin/sh", arguments: ["-c", "ulimit -c unlimited && ulimit -H -c"])
        let canRaise = String(decoding: raised.stdout, as: UTF8.self).hasPrefix("unlimited")
        // `-w` last reads the password from standard input: the command waits there, holding its state.
        var input = try ChildPipe()
        let child = try ChildProcess.spawn(
            "/bin/sh", arguments: ["-c", "ulimit -c unlimited 2>/dev/null; exec \"$0\" \"$@\"", Tool.binary.path,
                                   "add-generic-password", "-a", "core", "-s", "core", "-w"],
            environment: tool.environment, stdin: input.childEnd)
        input.closeChildEnd()
        // Soft and hard limit (the soft one is often 0 already; the hard one is what a crash handler could raise).
        func coreLimits() -> [Substring] {
            let limits = (try? String(contentsOfFile: "/proc/\(child.pid)/limits", encoding: .utf8)) ?? ""
            let line = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") } ?? ""
            return Array(line.split(separator: " ").dropFirst(4).prefix(2))
        }
        var seen: [Substring] = []
        for _ in 0..<150 where seen != ["0", "0"] {
            usleep(20_000)
            seen = coreLimits()
        }
        _ = input.send("CANARY-CORE\n".utf8)
        input.closeOurEnd()
        #expect(child.wait() == .exited(0))
        #expect(seen == ["0", "0"])
        // Where the hard limit could not be raised (not root, hard limit 0) the check above proves less.
        if !canRaise { print("core limits: could not raise the hard limit here; the check is weaker") }
    }
}

extension ProcessHardeningTests {
    /// A non-dumpable process has its /proc files owned by root instead of its own user: the one outside sign of
    /// PR_SET_DUMPABLE 0. So the command runs as another user (only root can arrange that, with setpriv).
    @Test("the command is not dumpable while it holds a password (no same-user ptrace or gcore)",
          .enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func notDumpable() throws {
        let home = URL(fileURLWithPath: "/tmp/e2e-dump-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        #expect(chown(home.path, 65534, 65534) == 0)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home.path
        for (variable, folder) in [("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state"), ("XDG_CONFIG_HOME", "config")] {
            environment[variable] = home.appendingPathComponent(folder).path
        }
        // The default backend (auto) starts a keychaind as that user; its socket lives in the home, so that the
        // daemon ends when the home is removed.
        let runtime = home.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        #expect(chown(runtime.path, 65534, 65534) == 0)
        environment["XDG_RUNTIME_DIR"] = runtime.path
        environment.removeValue(forKey: "KEYCHAIN_BACKEND")
        var input = try ChildPipe()
        let child = try ChildProcess.spawn(
            "/usr/bin/setpriv", arguments: ["--reuid=65534", "--regid=65534", "--clear-groups",
                                            Tool.binariesForOtherUsers.appendingPathComponent("security").path,
                                            "add-generic-password", "-a", "dump", "-s", "dump", "-w"],
            environment: environment, stdin: input.childEnd)
        input.closeChildEnd()
        // Wait until the command itself runs (after setpriv's exec) and waits for the password: blocked in read(2)
        // on its standard input (syscall 0, descriptor 0), which comes after it reached keychaind (up to 30 s: the
        // first command also starts keychaind for that user, which a loaded machine makes slow).
        var owner: uid_t?
        for _ in 0..<3000 {
            usleep(10_000)
            let status = (try? String(contentsOfFile: "/proc/\(child.pid)/status", encoding: .utf8)) ?? ""
            let syscall = (try? String(contentsOfFile: "/proc/\(child.pid)/syscall", encoding: .utf8)) ?? ""
            guard status.contains("Name:\tsecurity"), syscall.hasPrefix("0 0x0 ") else { continue }
            var info = stat()
            if stat("/proc/\(child.pid)/environ", &info) == 0 { owner = info.st_uid }
            break
        }
        _ = input.send("CANARY-DUMP\n".utf8)
        input.closeOurEnd()
        let ended = child.wait()
        // Dumpable, the files would belong to 65534, the process's own user.
        #expect(owner == 0)
        // And keychaind still knew who was asking (it reads /proc/PID/exe before the client hardens itself).
        #expect(ended == .exited(0))
    }

    /// What a real user sees (CI runs as root, who can read any process's /proc files): the thin tools, run as an
    /// ordinary user, reach a keychaind of that user that must identify them before they make themselves
    /// non-dumpable.
    @Test("as an ordinary user, security and both credential helpers work through keychaind",
          .enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func ordinaryUserThroughDaemon() throws {
        let home = URL(fileURLWithPath: "/tmp/e2e-user-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let runtime = home.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        #expect(chown(home.path, 65534, 65534) == 0 && chown(runtime.path, 65534, 65534) == 0)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home.path
        environment["XDG_RUNTIME_DIR"] = runtime.path
        for (variable, folder) in [("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state"), ("XDG_CONFIG_HOME", "config")] {
            environment[variable] = home.appendingPathComponent(folder).path
        }
        environment["KEYCHAIN_BACKEND"] = "daemon"
        func run(_ program: String, _ arguments: [String], input: String = "") throws -> (Int32, String, String) {
            let path = Tool.binariesForOtherUsers.appendingPathComponent(program).path
            let output = try ChildProcess.run(
                "/usr/bin/setpriv", arguments: ["--reuid=65534", "--regid=65534", "--clear-groups", path] + arguments,
                environment: environment, input: Data(input.utf8))
            let status: Int32 = if case .exited(let code) = output.termination { code } else { -1 }
            return (status, String(decoding: output.stdout, as: UTF8.self), String(decoding: output.stderr, as: UTF8.self))
        }
        let add = try run("security", ["add-generic-password", "-a", "u", "-s", "s", "-w", "v"])
        #expect(add.0 == 0, "\(add.2)")
        #expect(try run("security", ["find-generic-password", "-a", "u", "-s", "s", "-w"]).1 == "v\n")
        let store = try run("git-credential-keychain", ["store"],
                            input: "protocol=https\nhost=git.example\nusername=u\npassword=p\n\n")
        #expect(store.0 == 0, "\(store.2)")
        #expect(try run("git-credential-keychain", ["get"], input: "protocol=https\nhost=git.example\n\n").1
                == "username=u\npassword=p\n")
        let docker = try run("docker-credential-keychain", ["store"],
                             input: #"{"ServerURL":"https://r.example","Username":"u","Secret":"t"}"#)
        #expect(docker.0 == 0, "\(docker.1)")
        #expect(try run("docker-credential-keychain", ["get"], input: "https://r.example").1.contains(#""Secret":"t""#))
    }
}

/// The real pinentry-curses, driven through tmux as a person would type into it.
@Suite("pinentry-curses through tmux", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux")
                && FileManager.default.isExecutableFile(atPath: "/usr/bin/pinentry-curses")))
struct PinentryTmuxTests {
    /// Runs `security unlock-keychain work` in tmux with pinentry-curses, answers once the prompt shows (types
    /// `keys`, or with `answer`), and returns the exit status (nil if it never ended) and the prompt's screen.
    func unlock(_ tool: Tool, password: String? = nil, command arguments: String = "unlock-keychain work",
                answer: ((TmuxTerminal) throws -> Void)? = nil) throws -> (Int32?, String)
    {
        let env = tool.environment.filter { ["XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "HOME", "XDG_RUNTIME_DIR",
                                             "KEYCHAIN_BACKEND"].contains($0.key) }
            .map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let exitFile = tool.home.appendingPathComponent("exit-\(UUID().uuidString.prefix(8))")
        let command = "env \(env) KEYCHAIN_PROMPTER=pinentry PINENTRY_PROGRAM=/usr/bin/pinentry-curses "
            + "\(Tool.binary.path) \(arguments); echo $? > \(exitFile.path); sleep 120"
        let terminal = try TmuxTerminal(command: command)
        defer { terminal.close() }
        let screen = terminal.waitForScreen(containing: "Password:")
        guard screen.contains("Password:") else { return (nil, screen) }
        if let answer { try answer(terminal) }
        if let password, !(try terminal.enterPassword(password)) { return (nil, terminal.screen()) }
        var status: Int32?
        _ = terminal.waitUntil(seconds: 60) {
            guard let text = try? String(contentsOf: exitFile, encoding: .utf8), text.hasSuffix("\n") else { return false }
            status = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
            return true
        }
        return (status, status == nil ? "prompt:\n\(screen)\nnow:\n\(terminal.screen())" : screen)
    }

    @Test("the description is shown; the right password unlocks, a wrong one is 51, the Cancel button is 128")
    func unlockThroughPinentry() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        #expect(try tool.run("create-keychain", "-p", "hunter2", "work").status == 0)
        let (right, screen) = try unlock(tool, password: "hunter2")
        #expect(TmuxTerminal.words(of: screen).contains("Enter the password to unlock the keychain work."))
        #expect(right == 0, "\(screen)")
        let (wrong, wrongScreen) = try unlock(tool, password: "nope")
        #expect(wrong == 51, "\(wrongScreen)")
        let (cancelled, cancelScreen) = try unlock(tool) { terminal in
            #expect(try terminal.focus("<Cancel>"), "\(terminal.screen())")
            try terminal.type(["Enter"])
        }
        #expect(cancelled == 128, "\(cancelScreen)")
    }

    @Test("find meets a locked keychain on the search list before its match: the password is asked here, then found")
    func findAsksForALockedKeychainOnTheList() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        // Filled before it has a password: in-process (the default here), a new command finds it locked.
        #expect(try tool.run("create-keychain", "-p", "", "work").status == 0)
        #expect(try tool.run("add-generic-password", "-s", "svc", "-a", "acct", "-w", "in-work", "work").status == 0)
        #expect(try tool.run("set-keychain-password", "-o", "", "-p", "hunter2", "work").status == 0)
        #expect(try tool.run("add-generic-password", "-s", "other", "-a", "acct", "-w", "in-login").status == 0)
        #expect(try tool.run("list-keychains", "-s", "work", "login").status == 0)
        #expect(try tool.run("lock-keychain", "work").status == 0)
        let output = tool.home.appendingPathComponent("found")
        let (status, screen) = try unlock(tool, password: "hunter2",
                                          command: "find-generic-password -s svc -a acct -w > \(output.path)")
        #expect(TmuxTerminal.words(of: screen).contains("Enter the password to unlock the keychain"), "\(screen)")
        #expect(status == 0, "\(screen)")
        #expect(try String(contentsOf: output, encoding: .utf8) == "in-work\n")
    }
}
