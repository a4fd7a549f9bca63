import Foundation
import KeychainClient
import Testing

/// `security backup-keychain` and `restore-keychain` as a person moving to a new machine runs them: back up on one
/// home, restore on another (its own device key), and every tool finds its items as before.
@Suite("Backup and restore, end to end")
struct BackupCommandTests {
    static let backupPassword = "correct horse battery staple"

    @Test("a backup restored in another home: security, git and docker find their items; restoring again adds nothing")
    func newMachine() throws {
        let old = Tool(), new = Tool()
        defer {
            try? FileManager.default.removeItem(at: old.home)
            try? FileManager.default.removeItem(at: new.home)
        }
        #expect(try old.run("add-generic-password", "-a", "alice", "-s", "mail", "-l", "Mail", "-w", "m41l").status == 0)
        #expect(try old.run("add-internet-password", "-a", "bob", "-s", "db.example.com", "-r", "htps", "-P", "5432",
                            "-w", "pg-secret").status == 0)
        #expect(try old.helper("git-credential-keychain", "store",
                               stdin: "protocol=https\nhost=git.example.com\nusername=carol\npassword=git-token\n\n").status == 0)
        let docker = Data(#"{"ServerURL":"https://registry.example.com","Username":"dave","Secret":"docker-token"}"#.utf8)
        #expect(try old.helper("docker-credential-keychain", "store", input: docker).status == 0)

        let file = old.home.appendingPathComponent("keychain.backup").path
        let backup = try old.run("backup-keychain", "-o", file, "-P", "-", stdin: Self.backupPassword + "\n")
        #expect(backup.status == 0)
        #expect(backup.stdout == "Backed up 4 items of login.keychain-db to \(file).\n")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        for clear in ["m41l", "pg-secret", "git-token", "docker-token", "git.example.com", "alice", Self.backupPassword] {
            #expect(bytes.range(of: Data(clear.utf8)) == nil, "\(clear) is in the backup in the clear")
        }

        let restore = try new.run("restore-keychain", "-i", file, "-P", "-", stdin: Self.backupPassword + "\n")
        #expect(restore.status == 0)
        #expect(restore.stdout == "Restored 4 items into login.keychain-db.\n")
        #expect(try new.run("find-generic-password", "-a", "alice", "-s", "mail", "-w").stdout == "m41l\n")
        #expect(try new.run("find-internet-password", "-a", "bob", "-s", "db.example.com", "-w").stdout == "pg-secret\n")
        let git = try new.helper("git-credential-keychain", "get", stdin: "protocol=https\nhost=git.example.com\n\n")
        #expect(git.stdout.contains("username=carol\npassword=git-token\n"))
        let dockerGet = try new.helper("docker-credential-keychain", "get", stdin: "https://registry.example.com")
        #expect(dockerGet.stdout.contains(#""Secret":"docker-token""#))
        let label = try new.run("find-generic-password", "-a", "alice")
        #expect(label.stdout.contains("0x00000007 <blob>=\"Mail\""))

        let again = try new.run("restore-keychain", "-i", file, "-P", "-", stdin: Self.backupPassword + "\n")
        #expect(again.stdout == "Restored 0 items into login.keychain-db; kept 4 whose copy here is as new or newer.\n")
        let dump = try new.run("dump-keychain")
        #expect(dump.stdout.components(separatedBy: "class: ").count - 1 == 4)
    }

    @Test("a wrong password (51), a damaged file (93) and a password on the command line (206) change nothing")
    func refusals() throws {
        let old = Tool(), new = Tool()
        defer {
            try? FileManager.default.removeItem(at: old.home)
            try? FileManager.default.removeItem(at: new.home)
        }
        #expect(try old.run("add-generic-password", "-a", "alice", "-s", "svc", "-w", "s3cret").status == 0)
        let file = old.home.appendingPathComponent("keychain.backup")
        #expect(try old.run("backup-keychain", "-o", file.path, "-P", "-", stdin: "pw\n").status == 0)
        #expect(try new.run("add-generic-password", "-a", "zed", "-s", "svc", "-w", "mine").status == 0)

        let wrong = try new.run("restore-keychain", "-i", file.path, "-P", "-", stdin: "not it\n")
        #expect(wrong.status == 51)
        #expect(wrong.stderr.contains("restore-keychain"))
        var bytes = try Data(contentsOf: file)
        bytes[bytes.count - 40] ^= 0x20
        let damaged = new.home.appendingPathComponent("damaged.backup")
        try bytes.write(to: damaged)
        #expect(try new.run("restore-keychain", "-i", damaged.path, "-P", "-", stdin: "pw\n").status == 93)
        let cut = new.home.appendingPathComponent("cut.backup")
        try Data(try Data(contentsOf: file).dropLast(10)).write(to: cut)
        #expect(try new.run("restore-keychain", "-i", cut.path, "-P", "-", stdin: "pw\n").status == 93)
        let onCommandLine = try new.run("restore-keychain", "-i", file.path, "-P", "pw")
        #expect(onCommandLine.status == 206)
        #expect(try new.run("find-generic-password", "-a", "alice").status == 44)
        #expect(try new.run("find-generic-password", "-a", "zed", "-w").stdout == "mine\n")
        // A refused backup leaves an existing file as it was.
        let before = try Data(contentsOf: file)
        #expect(try old.run("backup-keychain", "-o", file.path, "-P", "x").status == 206)
        #expect(try Data(contentsOf: file) == before)
        #expect(try old.run("backup-keychain").status == 2)
        // -o never replaces what is not a backup: the keychain itself stays as it was.
        let keychain = try Data(contentsOf: URL(fileURLWithPath: old.loginPath))
        #expect(try old.run("backup-keychain", "-o", old.loginPath, "-P", "-", stdin: "pw\n").status == 206)
        #expect(try Data(contentsOf: URL(fileURLWithPath: old.loginPath)) == keychain)
        #expect(try old.run("find-generic-password", "-a", "alice", "-w").stdout == "s3cret\n")
    }
}

extension BackupCommandTests {
    @Test("through keychaind, a keychain with a password is backed up only after its password (asked by keychaind; Cancel 128, nobody 36)")
    func ownerPasswordThroughDaemon() throws {
        let home = try DaemonTests.DaemonHome()
        defer { home.cleanUp() }
        let pinentry = try DaemonTests.ScriptedPinentry(in: home.tool.home)
        func run(_ arguments: [String], stdin: String = "", display: Bool = true) throws -> Tool.Result {
            try home.run("security", arguments, stdin: stdin, environment: pinentry.environment(display: display))
        }
        #expect(try run(["create-keychain", "-p", "kc-pw", "work.keychain-db"]).status == 0)
        #expect(try run(["add-generic-password", "-a", "a", "-s", "s", "-w", "w0rk", "work.keychain-db"]).status == 0)
        #expect(try run(["lock-keychain", "work.keychain-db"]).status == 0)
        let file = home.tool.home.appendingPathComponent("work.backup").path
        let backup = ["backup-keychain", "-k", "work.keychain-db", "-o", file, "-P", "-"]
        // Nobody to ask: 36, and no file.
        #expect(try run(backup, stdin: "bpw\n", display: false).status == 36)
        #expect(!FileManager.default.fileExists(atPath: file))
        try pinentry.answer("cancel")
        #expect(try run(backup, stdin: "bpw\n").status == 128)
        #expect(!FileManager.default.fileExists(atPath: file))
        // A wrong password is asked again; the right one also unlocks the keychain (asked once, not twice).
        try pinentry.answer("pin:wrong", "pin:kc-pw")
        let done = try run(backup, stdin: "bpw\n")
        #expect(done.status == 0)
        #expect(done.stdout.hasPrefix("Backed up 1 item of work.keychain-db"))
        #expect(pinentry.passwordRequests == 3)
        #expect(pinentry.descriptions.contains("security wants to back up every item of the keychain"))
        // Unlocked now, it still asks: being unlocked is not the owner being here.
        try pinentry.answer("cancel")
        #expect(try run(backup, stdin: "bpw\n").status == 128)
        #expect(pinentry.passwordRequests == 4)
        // Restoring into it asks for its password too.
        try pinentry.answer("pin:kc-pw")
        let restore = try run(["restore-keychain", "-i", file, "-k", "work.keychain-db", "-P", "-"], stdin: "bpw\n")
        #expect(restore.stdout == "Restored 0 items into work.keychain-db; kept 1 whose copy here is as new or newer.\n")
        #expect(pinentry.passwordRequests == 5)
    }
}

extension BackupCommandTests {
    @Test("a restore killed at any instant leaves the keychain as it was or wholly restored",
          .disabled(if: ProcessInfo.processInfo.environment["KEYCHAIN_TEST_BACKEND"] == "daemon"))
    func killedRestore() throws {
        let old = Tool()
        defer { try? FileManager.default.removeItem(at: old.home) }
        let count = 200
        for i in 0..<count {
            try old.run("add-generic-password", "-a", "account-\(i)", "-s", "bulk", "-w", "secret-\(i)")
        }
        let file = old.home.appendingPathComponent("bulk.backup").path
        #expect(try old.run("backup-keychain", "-o", file, "-P", "-", stdin: "pw\n").status == 0)
        let passwordFile = old.home.appendingPathComponent("password")
        try Data("pw\n".utf8).write(to: passwordFile)

        // How long a whole restore takes here (mostly scrypt): the kills land across its second half, where the
        // items are read, sealed and committed.
        let timing = Tool()
        defer { try? FileManager.default.removeItem(at: timing.home) }
        #expect(try timing.run("add-generic-password", "-a", "mine", "-s", "own", "-w", "kept").status == 0)
        let started = Date()
        #expect(try timing.run("restore-keychain", "-i", file, "-P", "-", stdin: "pw\n").status == 0)
        let duration = Date().timeIntervalSince(started)
        var outcomes: [String: Int] = [:]
        for round in 0..<12 {
            let new = Tool()
            defer { try? FileManager.default.removeItem(at: new.home) }
            // The target keychain exists first, with an item of its own that must survive every kill.
            #expect(try new.run("add-generic-password", "-a", "mine", "-s", "own", "-w", "kept").status == 0)
            let input = open(passwordFile.path, O_RDONLY)
            defer { close(input) }
            let restore = try ChildProcess.spawn(Tool.binary.path, arguments: ["restore-keychain", "-i", file, "-P", "-"],
                                                 environment: new.environment, stdin: input)
            usleep(UInt32(duration * Double.random(in: 0.5...1.05) * 1_000_000))
            restore.send(SIGKILL)
            let finished = restore.wait() == .exited(0)
            let dump = try new.run("dump-keychain", "-d")
            #expect(dump.status == 0)
            let restored = dump.stdout.components(separatedBy: "\"bulk\"").count - 1
            #expect(restored == 0 || restored == 2 * count, "round \(round): \(restored / 2) of \(count) items")
            #expect(try new.run("find-generic-password", "-a", "mine", "-w").stdout == "kept\n")
            if finished { #expect(restored == 2 * count) }
            outcomes[restored == 0 ? "none" : "all", default: 0] += 1
        }
        print("killed restores: \(outcomes)")
    }
}

extension BackupCommandTests {
    @Test("what the Secret Service and a Swift program stored comes back on a new machine: secret-tool and the program find it",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/secret-tool")
              && FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")))
    func secretServiceAfterRestore() throws {
        let old = try SecretServiceTests.Desktop()
        #expect(try old.startDaemon() == "ready")
        #expect(try old.run("/usr/bin/secret-tool", "store", "--label=Chrome Safe Storage", "application", "chrome",
                            stdin: "chrome-key").status == 0)
        #expect(try old.run("keychain-example", "set", "com.example.app", "me", stdin: "app-secret").status == 0)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ss-\(UUID().uuidString).backup").path
        defer { unlink(file) }
        let backup = try old.run("security", "backup-keychain", "-o", file, "-P", "-", stdin: "bpw\n")
        #expect(backup.status == 0, "\(backup.stderr)")

        let new = try SecretServiceTests.Desktop()
        let restore = try new.run("security", "restore-keychain", "-i", file, "-P", "-", stdin: "bpw\n")
        #expect(restore.stdout == "Restored 2 items into login.keychain-db.\n", "\(restore.stderr)")
        new.home.stopDaemon()
        #expect(try new.startDaemon() == "ready")
        #expect(try new.run("/usr/bin/secret-tool", "lookup", "application", "chrome").stdout == "chrome-key")
        #expect(try new.run("keychain-example", "get", "com.example.app", "me").stdout == "app-secret\n")
    }
}
