import Foundation
import KeychainInterface
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the PAM tests need: root, Debian's pam_wrapper, nss_wrapper and pamtester, and the PAM headers.
enum PAMTools {
    static let multiarch = "/usr/lib/x86_64-linux-gnu"
    static var present: Bool {
        geteuid() == 0
            && [multiarch + "/libpam_wrapper.so", multiarch + "/libnss_wrapper.so", multiarch + "/pam_wrapper/pam_set_items.so",
                "/usr/bin/pamtester", "/usr/bin/setpriv", "/usr/bin/make", "/usr/bin/openssl",
                "/usr/include/security/pam_modules.h"].allSatisfy { FileManager.default.fileExists(atPath: $0) }
    }
}

/// pam_keychain.so (contrib/pam) under the real libpam, driven by pamtester as a login would drive it: pam_wrapper
/// gives the test its own /etc/pam.d, nss_wrapper its own user (uid 65534, a home in /tmp), and the password is
/// checked by Debian's real pam_unix. Root is needed for that (pam_unix reads the hash itself only as root) and for
/// the module's switch to the user, which is what a real login does.
@Suite("PAM module, end to end", .serialized, .enabled(if: PAMTools.present))
struct PAMModuleTests {
    static let pamWrapper = PAMTools.multiarch + "/libpam_wrapper.so"
    static let nssWrapper = PAMTools.multiarch + "/libnss_wrapper.so"
    static let pamSetItems = PAMTools.multiarch + "/pam_wrapper/pam_set_items.so"

    /// A user of nobody's uid with a home of its own, the PAM service files, and the module built from its sources.
    final class Login {
        let root = URL(fileURLWithPath: "/tmp/pam-e2e-\(UUID().uuidString)")
        var home: URL { root.appendingPathComponent("home") }
        var runtime: URL { home.appendingPathComponent("run") }
        let uid: uid_t = 65534

        /// - Parameter security: the `security` the module is told to run (default: the one built here).
        init(password: String, security: ((URL) throws -> String)? = nil) throws {
            let fm = FileManager.default
            try fm.createDirectory(at: root, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
            try fm.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            for path in [home.path, runtime.path] { _ = chown(path, uid, uid) }
            // The module, built by its own Makefile (as an installer would).
            let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("contrib/pam")
            let built = try ChildProcess.run("/usr/bin/make", arguments: ["-s", "-C", sources.path, "BUILD_DIR=\(root.path)"],
                                             environment: ProcessInfo.processInfo.environment)
            guard built.termination == .exited(0) else {
                throw Failure("make failed: \(String(decoding: built.stderr, as: UTF8.self))")
            }
            try write("passwd", "alice:\(try Self.cryptHash(password)):\(uid):\(uid):Alice:\(home.path):/bin/sh\n")
            try write("group", "alice:x:\(uid):\n")
            try write("env.conf", "XDG_RUNTIME_DIR DEFAULT=\(runtime.path)\n")
            // Debian's common-auth / common-session / common-password lines, with our module where the docs put it.
            // The password stack takes its old and new password from pam_set_items (what pam_unix would have
            // asked for): pam_unix would change the machine's own password files.
            let module = "\(root.path)/pam_keychain.so security=\(try security?(home) ?? Tool.binary.path)"
            try write("services/login-test", """
                auth     required  pam_unix.so
                auth     optional  \(module)
                password required  \(PAMModuleTests.pamSetItems)
                password optional  \(module)
                session  required  pam_env.so conffile=\(root.path)/env.conf readenv=0
                session  optional  \(module) debug
                session  required  pam_permit.so

                """)
        }

        struct Failure: Error, CustomStringConvertible {
            let description: String
            init(_ text: String) { description = text }
        }

        private func write(_ name: String, _ text: String) throws {
            let url = root.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: url)
        }

        static func cryptHash(_ password: String) throws -> String {
            let out = try ChildProcess.run("/usr/bin/openssl", arguments: ["passwd", "-6", "-stdin"],
                                           environment: ProcessInfo.processInfo.environment, input: Data((password + "\n").utf8))
            return String(decoding: out.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// pamtester SERVICE alice OPERATIONS… under the wrappers, the typed answers on its standard input: as root,
        /// as login and sshd run, or `asUser`, as passwd runs in the user's session (its environment then names her
        /// runtime directory).
        func pamtester(_ operations: [String], typed: String, items: [String: String] = [:], asUser: Bool = false,
                       ignoringChildren: Bool = false) throws -> Int32
        {
            var environment = ProcessInfo.processInfo.environment
            if asUser { environment["XDG_RUNTIME_DIR"] = runtime.path }
            environment["LD_PRELOAD"] = "\(PAMModuleTests.pamWrapper):\(PAMModuleTests.nssWrapper)"
            environment["PAM_WRAPPER"] = "1"
            environment["PAM_WRAPPER_SERVICE_DIR"] = root.appendingPathComponent("services").path
            environment["NSS_WRAPPER_PASSWD"] = root.appendingPathComponent("passwd").path
            environment["NSS_WRAPPER_GROUP"] = root.appendingPathComponent("group").path
            for (name, value) in items { environment[name] = value }
            environment["PAM_WRAPPER_DEBUGLEVEL"] = "2"  // the modules' syslog lines, on standard error
            var pamtester = ["/usr/bin/pamtester", "login-test", "alice"] + operations
            if ignoringChildren {
                // As some login daemons run: SIGCHLD ignored, which exec keeps (the module must still see its child end).
                pamtester = ["/usr/bin/python3", "-c",
                             "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])"]
                    + pamtester
            }
            let out = asUser
                ? try ChildProcess.run("/usr/bin/setpriv", arguments: ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"] + pamtester,
                                       environment: environment, input: Data(typed.utf8))
                : try ChildProcess.run(pamtester[0], arguments: Array(pamtester.dropFirst()), environment: environment,
                                       input: Data(typed.utf8))
            lastLog = String(decoding: out.stderr, as: UTF8.self)
            if case .exited(let code) = out.termination { return code }
            return -1
        }

        /// What the modules logged during the last pamtester run.
        var lastLog = ""

        /// `security ARGUMENTS` as alice, in her home, through her keychaind.
        func security(_ arguments: String..., stdin: String = "") throws -> Tool.Result {
            let environment = ["HOME": home.path, "XDG_RUNTIME_DIR": runtime.path, "PATH": "/usr/bin:/bin"]
            let out = try ChildProcess.run("/usr/bin/setpriv", arguments: ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups",
                                                                           Tool.binary.path] + arguments,
                                           environment: environment, input: Data(stdin.utf8))
            let status: Int32 = if case .exited(let code) = out.termination { code } else { -1 }
            return Tool.Result(status: status, stdout: String(decoding: out.stdout, as: UTF8.self),
                               stderr: String(decoding: out.stderr, as: UTF8.self))
        }

        /// The keychaind alice's commands started, from its lock file.
        var daemonPID: pid_t? {
            let directory = runtime.appendingPathComponent("keychain")
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            guard let lock = names.first(where: { $0.hasSuffix(".sock.lock") }),
                  let text = try? String(contentsOf: directory.appendingPathComponent(lock), encoding: .utf8)
            else { return nil }
            return pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
        }

        deinit {
            if let pid = daemonPID { kill(pid, SIGKILL) }
            try? FileManager.default.removeItem(at: root)
        }
    }

    @Test("login creates the login keychain with the login password, then unlocks it; a wrong password unlocks nothing; a password change follows")
    func loginUnlocksKeychain() throws {
        let login = try Login(password: "correct horse")
        // First login: no keychain yet → created with the login password, as the user (never root's file).
        #expect(try login.pamtester(["authenticate", "open_session"], typed: "correct horse\n") == 0)
        let keychain = login.home.appendingPathComponent(".local/share/keychains/login.keychain-db")
        var info = stat()
        #expect(stat(keychain.path, &info) == 0)
        #expect(info.st_uid == login.uid)
        #expect(login.daemonPID != nil)  // keychaind started for alice, holding the unlocked keychain
        #expect(try login.security("add-generic-password", "-s", "mail", "-a", "alice", "-w", stdin: "m41l\n").status == 0)
        #expect(try login.security("lock-keychain", "login").status == 0)
        #expect(try login.security("find-generic-password", "-s", "mail", "-w").status == 36)  // locked, nobody to ask

        // A wrong password fails pam_unix; the keychain stays locked.
        #expect(try login.pamtester(["authenticate", "open_session"], typed: "wrong\n") != 0)
        #expect(try login.security("find-generic-password", "-s", "mail", "-w").status == 36)

        // The next login unlocks it for every program of the session (here from a host that ignores SIGCHLD).
        #expect(try login.pamtester(["authenticate", "open_session"], typed: "correct horse\n", ignoringChildren: true) == 0)
        #expect(login.lastLog.contains("unlocked the login keychain of alice"), "\(login.lastLog)")
        #expect(try login.security("find-generic-password", "-s", "mail", "-w").stdout == "m41l\n")

        // passwd, run by the user in her session: the keychain's password changes with the login password.
        #expect(try login.pamtester(["chauthtok"], typed: "", items: ["PAM_OLDAUTHTOK": "correct horse",
                                                                      "PAM_AUTHTOK": "battery staple"], asUser: true) == 0)
        #expect(try login.security("lock-keychain", "login").status == 0)
        #expect(try login.security("unlock-keychain", "login", stdin: "correct horse\n").status == 51)
        #expect(try login.security("unlock-keychain", "login", stdin: "battery staple\n").status == 0)
        #expect(try login.security("find-generic-password", "-s", "mail", "-w").stdout == "m41l\n")
    }

    @Test("the login password is never handed to a security the user's own programs could replace")
    func refusesUserWritableProgram() throws {
        let login = try Login(password: "pw") { home in
            // As if installed in ~/.local/bin: the user (and so any program of hers) can swap it.
            let bin = home.appendingPathComponent("bin")
            try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
            let copy = bin.appendingPathComponent("security")
            try FileManager.default.copyItem(at: Tool.binary, to: copy)
            for path in [bin.path, copy.path] { _ = chown(path, 65534, 65534) }
            return copy.path
        }
        #expect(try login.pamtester(["authenticate", "open_session"], typed: "pw\n") == 0)  // the login itself goes on
        #expect(login.lastLog.contains("can be changed by others than root"), "\(login.lastLog)")
        #expect(!FileManager.default.fileExists(atPath: login.home.appendingPathComponent(".local/share/keychains").path))
    }

    @Test("a session opened without a password kept by auth (a key login) leaves the keychain as it is")
    func sessionWithoutPassword() throws {
        let login = try Login(password: "pw")
        #expect(try login.pamtester(["open_session"], typed: "") == 0)
        #expect(!FileManager.default.fileExists(atPath: login.home.appendingPathComponent(".local/share/keychains").path))
    }
}
