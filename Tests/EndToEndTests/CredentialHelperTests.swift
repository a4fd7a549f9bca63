import Foundation
import KeychainClient
import Testing

/// docker's own helper tests (osxkeychain_test.go, credentials_test.go), ported to run the built helper.
@Suite("docker-credential-keychain: docker's helper tests")
struct DockerHelperConformanceTests {
    struct Helper {
        let tool = Tool()
        func store(_ url: String, _ user: String, _ secret: String) throws -> Tool.Result {
            let json = try JSONSerialization.data(withJSONObject: ["ServerURL": url, "Username": user, "Secret": secret])
            return try tool.helper("docker-credential-keychain", "store", input: json)
        }
        func get(_ url: String) throws -> (user: String, secret: String)? {
            let result = try tool.helper("docker-credential-keychain", "get", stdin: url)
            guard result.status == 0,
                let creds = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: String]
            else { return nil }
            return (creds["Username"] ?? "", creds["Secret"] ?? "")
        }
        func erase(_ url: String) throws -> Tool.Result { try tool.helper("docker-credential-keychain", "erase", stdin: url) }
        func list() throws -> [String: String] {
            let out = try tool.helper("docker-credential-keychain", "list").stdout
            return (try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: String]) ?? [:]
        }
    }

    @Test("add, get, list, a second token, delete the first (TestOSXKeychainHelper)")
    func lifecycle() throws {
        let h = Helper()
        defer { try? FileManager.default.removeItem(at: h.tool.home) }
        let first = "https://foobar.example.com:2376/v1", second = "https://foobar.example.com:2376/v2"
        #expect(try h.store(first, "foobar", "foobarbaz").status == 0)
        let got = try #require(try h.get(first))
        #expect(got.user == "foobar" && got.secret == "foobarbaz")
        #expect(try h.list()[first] == "foobar")
        #expect(try h.store(second, "foobarbaz", "foobar").status == 0)
        #expect(Set(try h.list().keys) == [first, second])
        #expect(try h.erase(first).status == 0)
        #expect(try h.list().keys.sorted() == [second])
    }

    @Test("an address read with less than it was stored with finds it (TestOSXKeychainHelperRetrieveAliases)",
          arguments: [("https://foobar.example.com:2376", "https://foobar.example.com"),
                      ("https://foobar.example.com:2376", "foobar.example.com"),
                      ("https://foobar.example.com:1234/one/two", "https://foobar.example.com:1234")])
    func aliases(stored: String, read: String) throws {
        let h = Helper()
        defer { try? FileManager.default.removeItem(at: h.tool.home) }
        #expect(try h.store(stored, "hello", "world").status == 0)
        #expect(try h.get(read) != nil)
        #expect(try h.erase(stored).status == 0)
    }

    @Test("another scheme, port or path does not find it (TestOSXKeychainHelperRetrieveStrict)",
          arguments: [("https://foobar.example.com:2376", "http://foobar.example.com:2376"),
                      ("http://foobar.example.com:2376", "https://foobar.example.com:2376"),
                      ("http://foobar.example.com", "foobar.example.com:5678"),
                      ("https://foobar.example.com:1234", "https://foobar.example.com:5678"),
                      ("https://foobar.example.com:1234/one/two", "https://foobar.example.com:1234/five/six")])
    func strict(stored: String, read: String) throws {
        let h = Helper()
        defer { try? FileManager.default.removeItem(at: h.tool.home) }
        #expect(try h.store(stored, "hello", "world").status == 0)
        #expect(try h.get(read) == nil)
        #expect(try h.erase(stored).status == 0)
    }

    @Test("an unclean path with an IPv6 host round-trips (TestOSXKeychainHelperStoreWithUncleanPath)")
    func uncleanPath() throws {
        let h = Helper()
        defer { try? FileManager.default.removeItem(at: h.tool.home) }
        let url = "https://::1:8080//////location/../../hello"
        #expect(try h.store(url, "testuser", "testsecret").status == 0)
        let got = try #require(try h.get(url))
        #expect(got.user == "testuser" && got.secret == "testsecret")
    }

    @Test("each address reads back what was stored under it, overwrites included (TestOSXKeychainHelperStoreRetrieve)")
    func storeRetrieve() throws {
        let h = Helper()
        defer { try? FileManager.default.removeItem(at: h.tool.home) }
        let urls = ["foobar.example.com", "foobar.example.com:2376", "//foobar.example.com:2376",
                    "https://foobar.example.com:2376", "http://foobar.example.com:2376",
                    "https://foobar.example.com:2376/some/path", "https://foobar.example.com:2376/some/other/path",
                    "https://foobar.example.com:2376/some/other/path?foo=bar"]
        for (i, url) in urls.enumerated() {
            #expect(try h.store(url, "user-\(i)", "secret-\(i)").status == 0, "\(url)")
            let got = try h.get(url)
            #expect(got?.user == "user-\(i)" && got?.secret == "secret-\(i)", "\(url)")
        }
    }

    @Test("missing credentials: get and erase say docker's not-found text (TestMissingCredentials)")
    func missing() throws {
        let h = Helper()
        defer { try? FileManager.default.removeItem(at: h.tool.home) }
        for op in ["get", "erase"] {
            let result = try h.tool.helper("docker-credential-keychain", op, stdin: "https://adsfasdf.invalid/asdfsdddd")
            #expect(result.status == 1)
            #expect(result.stdout == "credentials not found in native keychain\n")
        }
    }

    @Test("a second login as another user replaces the first (docker erases the address's credentials first)")
    func secondUserReplaces() throws {
        let h = Helper()
        defer { try? FileManager.default.removeItem(at: h.tool.home) }
        #expect(try h.store("https://registry.example.com", "alice", "a-token").status == 0)
        #expect(try h.store("https://registry.example.com", "bob", "b-token").status == 0)
        let got = try #require(try h.get("https://registry.example.com"))
        #expect(got.user == "bob" && got.secret == "b-token")
        #expect(try h.list() == ["https://registry.example.com": "bob"])
    }

    @Test("docker's texts for a missing username or server URL and a bad scheme; nothing is stored")
    func invalidCredentials() throws {
        let h = Helper()
        defer { try? FileManager.default.removeItem(at: h.tool.home) }
        let noUser = try h.store("https://registry.example.com", "", "s")
        #expect(noUser.status == 1 && noUser.stdout == "no credentials username\n")
        let noURL = try h.store("", "u", "s")
        #expect(noURL.status == 1 && noURL.stdout == "no credentials server URL\n")
        let ftp = try h.store("ftp://registry.example.com", "u", "s")
        #expect(ftp.status == 1 && ftp.stdout == "unsupported scheme: ftp\n")
        #expect(try h.list().isEmpty)
    }

    @Test("docker's items and git's for the same host stay apart")
    func gitItemsUntouched() throws {
        let h = Helper()
        defer { try? FileManager.default.removeItem(at: h.tool.home) }
        #expect(try h.tool.helper("git-credential-keychain", "store",
                                  stdin: "protocol=https\nhost=registry.example.com\nusername=git\npassword=g\n\n").status == 0)
        #expect(try h.store("https://registry.example.com", "docker", "d").status == 0)
        let git = try h.tool.helper("git-credential-keychain", "get", stdin: "protocol=https\nhost=registry.example.com\n\n")
        #expect(git.stdout == "username=git\npassword=g\n")
        #expect(try h.get("https://registry.example.com")?.user == "docker")
    }
}

@Suite("git-credential-keychain: hostile and partial requests")
struct GitHelperSafetyTests {
    func git(_ tool: Tool, _ op: String, _ input: String) throws -> Tool.Result {
        try tool.helper("git-credential-keychain", op, stdin: input)
    }

    @Test("without a host nothing is returned or erased")
    func hostRequired() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        #expect(try git(tool, "store", "protocol=https\nhost=a.example\nusername=u\npassword=pa\n\n").status == 0)
        #expect(try git(tool, "get", "protocol=https\n\n").stdout == "")
        #expect(try git(tool, "get", "protocol=https\nhost=\n\n").stdout == "")
        #expect(try git(tool, "erase", "protocol=https\nhost=\n\n").status == 0)
        #expect(try git(tool, "erase", "host=a.example\n\n").status == 0)
        #expect(try git(tool, "get", "protocol=https\nhost=a.example\n\n").stdout == "username=u\npassword=pa\n")
    }

    @Test("a stored value with a newline is never written back (no field injection)")
    func noInjection() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        // An account that holds a newline, stored by another program through the security command (readable by
        // any program, so that the helper does read it through keychaind too).
        #expect(try tool.run("add-internet-password", "-a", "u\nurl=https://evil.example/", "-s", "a.example",
                             "-r", "htps", "-A", "-w", "pw").status == 0)
        let got = try git(tool, "get", "protocol=https\nhost=a.example\n\n")
        #expect(!got.stdout.contains("url="))
        #expect(got.status == 1)
    }

    @Test("a NUL in a request is refused")
    func nulRefused() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        let result = try tool.helper("git-credential-keychain", "store",
                                     input: Data("protocol=https\nhost=a.example\nusername=u\npassword=p\0x\n\n".utf8))
        #expect(result.status == 1)
        #expect(try git(tool, "get", "protocol=https\nhost=a.example\n\n").stdout == "")
    }

    @Test("passwords that are not UTF-8 come back byte for byte, and two of them stay two")
    func rawPasswords() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        func store(_ user: String, _ password: [UInt8]) throws {
            let input = Data("protocol=https\nhost=a.example\nusername=\(user)\npassword=".utf8) + Data(password) + Data("\n\n".utf8)
            #expect(try tool.helper("git-credential-keychain", "store", input: input).status == 0)
        }
        try store("one", [0xFF, 0x41])
        try store("two", [0xFE, 0x41])
        for (user, password) in [("one", [UInt8]([0xFF, 0x41])), ("two", [0xFE, 0x41])] {
            let got = try git(tool, "get", "protocol=https\nhost=a.example\nusername=\(user)\n\n")
            #expect(got.stdoutBytes == Data("password=".utf8) + Data(password) + Data("\n".utf8))
        }
    }

    @Test("a store for one repository leaves the host's other repositories' tokens alone")
    func storeTouchesOnlyItsDuplicate() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        for repo in ["org/a.git", "org/b.git"] {
            #expect(try git(tool, "store", "protocol=https\nhost=h.example\npath=\(repo)\nusername=u\npassword=\(repo)\n\n").status == 0)
        }
        // A host-wide store (no path) adds its own item; it does not overwrite the per-repository ones.
        #expect(try git(tool, "store", "protocol=https\nhost=h.example\nusername=u\npassword=hostwide\n\n").status == 0)
        for repo in ["org/a.git", "org/b.git"] {
            #expect(try git(tool, "get", "protocol=https\nhost=h.example\npath=\(repo)\n\n").stdout == "username=u\npassword=\(repo)\n")
        }
        // Storing again for one repository updates that one item.
        #expect(try git(tool, "store", "protocol=https\nhost=h.example\npath=org/a.git\nusername=u\npassword=new\n\n").status == 0)
        #expect(try git(tool, "get", "protocol=https\nhost=h.example\npath=org/a.git\n\n").stdout == "username=u\npassword=new\n")
        #expect(try git(tool, "get", "protocol=https\nhost=h.example\npath=org/b.git\n\n").stdout == "username=u\npassword=org/b.git\n")
    }
}

@Suite("security: wrong passwords across processes")
struct PasswordAttemptProcessTests {
    @Test("a guess whose process is killed during the key derivation still counts toward the back-off")
    func killedGuessesCount() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        #expect(try tool.run("create-keychain", "-p", "right", "work").status == 0)
        #expect(try tool.run("lock-keychain", "work").status == 0)
        // Each guess runs scrypt (N=2^17, about 0.4 s here); the attempt is recorded before it starts.
        // Wait until the state shows the attempt, then kill the process in the middle of its derivation.
        let stateDirectory = tool.home.appendingPathComponent("state/keychain")
        func recordedFailures() -> Int? {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: stateDirectory.path)) ?? []
            for name in names where name.hasSuffix(".state") {
                let text = (try? String(contentsOf: stateDirectory.appendingPathComponent(name), encoding: .utf8)) ?? ""
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("failed ") }) {
                    return Int(line.dropFirst("failed ".count))
                }
            }
            return nil
        }
        var killed = 0
        for attempt in 1...5 {
            let child = try ChildProcess.spawn(Tool.binary.path, arguments: ["unlock-keychain", "-p", "wrong", "work"],
                                               environment: tool.environment)
            for _ in 0..<1000 where recordedFailures() != attempt { usleep(2_000) }
            kill(child.pid, SIGKILL)
            if child.wait() == .signalled(SIGKILL) { killed += 1 }
        }
        #expect(killed >= 3, "most kills should land during the derivation")
        // Five counted failures: even the right password now waits.
        let right = try tool.run("unlock-keychain", "-p", "right", "work")
        #expect(right.status == 51)
    }
}

@Suite("security: secrets as bytes")
struct SecretBytesEndToEndTests {
    @Test("passwords that are not UTF-8, from -w and from standard input, are stored byte for byte")
    func rawPasswords() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        // Through a shell: only it can put bytes that are not UTF-8 into an argument.
        let sh = URL(fileURLWithPath: "/bin/sh")
        let bin = Tool.binary.path
        #expect(try tool.run(program: sh, ["-c", "\(bin) add-generic-password -a one -s raw -w \"$(printf '\\377A')\""],
                             stdin: nil).status == 0)
        #expect(try tool.run(program: sh, ["-c", "\(bin) add-generic-password -a two -s raw -w \"$(printf '\\376A')\""],
                             stdin: nil).status == 0)
        #expect(try tool.run(program: sh, ["-c", "printf '\\375A\\n' | \(bin) add-generic-password -a three -s raw -w"],
                             stdin: nil).status == 0)
        // `-w` prints a password with unprintable bytes in hex, as macOS does.
        for (account, hex) in [("one", "ff41"), ("two", "fe41"), ("three", "fd41")] {
            let found = try tool.run("find-generic-password", "-a", account, "-s", "raw", "-w")
            #expect(found.stdout == hex + "\n", "\(account)")
        }
    }

    @Test("a large secret on standard input is read whole; one past the limit is errSecDataTooLarge and not stored")
    func largeSecrets() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        let big = String(repeating: "x", count: 3 << 20)
        #expect(try tool.run("add-generic-password", "-a", "big", "-s", "large", "-w", stdin: big + "\n").status == 0)
        let found = try tool.run("find-generic-password", "-a", "big", "-s", "large", "-w")
        #expect(found.stdout == big + "\n")
        let tooBig = String(repeating: "y", count: (4 << 20) + 1)
        let refused = try tool.run("add-generic-password", "-a", "huge", "-s", "large", "-w", stdin: tooBig + "\n")
        #expect(refused.status == 42)  // errSecDataTooLarge (-25302) & 0xff
        #expect(try tool.run("find-generic-password", "-a", "huge", "-s", "large").status == 44)
    }

    @Test("set-keychain-password reads the old and the new password from one standard input")
    func twoLinesFromStandardInput() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        #expect(try tool.run("create-keychain", "-p", "old", "work").status == 0)
        #expect(try tool.run("set-keychain-password", "work", stdin: "old\nnew\n").status == 0)
        #expect(try tool.run("lock-keychain", "work").status == 0)
        #expect(try tool.run("unlock-keychain", "-p", "new", "work").status == 0)
    }
}

@Suite("security delete-keychain deletes only keychains")
struct DeleteKeychainSafetyTests {
    @Test("an ordinary file and its -wal sibling are left alone (errSecInvalidKeychain); a keychain goes")
    func ordinaryFileKept() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        try FileManager.default.createDirectory(at: tool.home, withIntermediateDirectories: true)
        let notes = tool.home.appendingPathComponent("notes.txt")
        try Data("my notes\n".utf8).write(to: notes)
        try Data("log\n".utf8).write(to: URL(fileURLWithPath: notes.path + "-wal"))
        let result = try tool.run("delete-keychain", notes.path)
        #expect(result.status == Int32(UInt8(truncatingIfNeeded: -25295)))
        #expect(FileManager.default.fileExists(atPath: notes.path))
        #expect(FileManager.default.fileExists(atPath: notes.path + "-wal"))
        // Another SQLite database is not a keychain either.
        let sqlite = tool.home.appendingPathComponent("other.db")
        _ = try ChildProcess.run("/usr/bin/env", arguments: ["python3", "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table t(x)'); c.commit()", sqlite.path])
        if FileManager.default.fileExists(atPath: sqlite.path) {
            #expect(try tool.run("delete-keychain", sqlite.path).status == Int32(UInt8(truncatingIfNeeded: -25295)))
            #expect(FileManager.default.fileExists(atPath: sqlite.path))
        }
        #expect(try tool.run("create-keychain", "-p", "pw", "work").status == 0)
        #expect(try tool.run("delete-keychain", "work").status == 0)
        #expect(!FileManager.default.fileExists(atPath: tool.home.appendingPathComponent("data/keychains/work.keychain-db").path))
    }
}
