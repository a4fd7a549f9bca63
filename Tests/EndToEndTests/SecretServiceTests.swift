import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus
import KeychainTestSupport
import Synchronization
import Testing

/// keychaind's Secret Service against the real libsecret client (secret-tool) on a private session bus.
@Suite("Secret Service, end to end", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")
           && FileManager.default.isExecutableFile(atPath: "/usr/bin/secret-tool")))
struct SecretServiceTests {
    /// A private session bus and a home whose keychaind serves org.freedesktop.secrets on it.
    final class Desktop {
        let home: DaemonTests.DaemonHome
        let bus: PrivateSessionBus

        /// A new home, or `home` (a test that filled its keychain first); a new bus with the stock session
        /// configuration, or `bus`.
        init(home: DaemonTests.DaemonHome? = nil, bus: PrivateSessionBus? = nil) throws {
            self.home = try home ?? DaemonTests.DaemonHome()
            self.bus = try bus ?? PrivateSessionBus()
        }
        var daemon: Process?
        var address: String { bus.address }

        var environment: [String: String] {
            var environment = home.environment
            environment["DBUS_SESSION_BUS_ADDRESS"] = address
            return environment
        }

        /// Starts keychaind with --secret-service and returns its first line ("ready" or "failed: …").
        @discardableResult
        func startDaemon(_ extra: [String] = [], runtime: String? = nil, settings: [String: String] = [:]) throws -> String {
            let process = Process()
            process.executableURL = Tool.binary.deletingLastPathComponent().appendingPathComponent("keychaind")
            process.arguments = ["--notify-ready", "--secret-service"] + extra
            var environment = self.environment
            if let runtime { environment["XDG_RUNTIME_DIR"] = runtime }
            environment.merge(settings) { _, setting in setting }
            process.environment = environment
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            let line = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            if daemon == nil { daemon = process }
            return line.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// Kills keychaind at once (as a crash would); the next startDaemon starts another.
        func stopDaemon() {
            if let daemon { kill(daemon.processIdentifier, SIGKILL); daemon.waitUntilExit() }
            daemon = nil
        }

        func run(_ program: String, _ arguments: String..., stdin: String = "") throws -> Tool.Result {
            let path = program.hasPrefix("/") ? program : Tool.binary.deletingLastPathComponent().appendingPathComponent(program).path
            let output = try ChildProcess.run(path, arguments: arguments, environment: environment, input: Data(stdin.utf8))
            let status: Int32 = switch output.termination {
            case .exited(let code): code
            case .signalled(let signal): 128 + signal
            }
            return Tool.Result(status: status, stdout: String(decoding: output.stdout, as: UTF8.self),
                               stderr: String(decoding: output.stderr, as: UTF8.self))
        }

        deinit {
            home.cleanUp()
            if let daemon { kill(daemon.processIdentifier, SIGKILL); daemon.waitUntilExit() }
        }
    }

    @Test("secret-tool store, lookup, search and clear; what security stores is found by secret-tool and the other way")
    func secretTool() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")
        let stored = try desktop.run("/usr/bin/secret-tool", "store", "--label=Mail password", "service", "mail",
                                     "account", "me@example.org", "xdg:schema", "org.example.Mail", stdin: "s3cret!")
        #expect(stored.status == 0, "\(stored.stderr)")
        let found = try desktop.run("/usr/bin/secret-tool", "lookup", "service", "mail", "account", "me@example.org")
        #expect(found.status == 0)
        #expect(found.stdout == "s3cret!")
        let listed = try desktop.run("/usr/bin/secret-tool", "search", "--all", "service", "mail")
        #expect(listed.stdout.contains("label = Mail password"))
        #expect(listed.stdout.contains("schema = org.example.Mail"))
        #expect(listed.stdout.contains("secret = s3cret!"))

        // Replace: storing the same attribute set again updates that item; a different set is another item.
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=Mail password", "service", "mail",
                                "account", "me@example.org", "xdg:schema", "org.example.Mail", stdin: "newer").status == 0)
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=Other", "service", "mail",
                                "account", "me@example.org", "server", "imap", stdin: "imap-pw").status == 0)
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "service", "mail", "xdg:schema", "org.example.Mail").stdout == "newer")
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "server", "imap").stdout == "imap-pw")

        // One keychain: security sees libsecret's item; secret-tool finds what security stored (readable by any program).
        let viaSecurity = try desktop.run("security", "find-generic-password", "-s", "mail", "-a", "me@example.org", "-l", "Mail password")
        #expect(viaSecurity.status == 0, "\(viaSecurity.stderr)")
        #expect(try desktop.run("security", "add-generic-password", "-s", "shell", "-a", "me", "-w", "from-security", "-A").status == 0)
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "service", "shell", "account", "me").stdout == "from-security")

        #expect(try desktop.run("/usr/bin/secret-tool", "clear", "service", "mail", "server", "imap").status == 0)
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "server", "imap").status != 0)
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "service", "mail", "xdg:schema", "org.example.Mail").stdout == "newer")
    }

    @Test("a locked keychain is unlocked through a prompt on the session's display: Cancel leaves it locked, the password opens it for everyone")
    func unlockThroughPrompt() throws {
        let desktop = try Desktop()
        let pinentry = try DaemonTests.ScriptedPinentry(in: desktop.home.tool.home)
        #expect(try desktop.startDaemon(settings: ["PINENTRY_PROGRAM": pinentry.program.path, "DISPLAY": ":kc-test"]) == "ready")
        #expect(try desktop.run("security", "create-keychain", "-p", "pw", "login").status == 0)
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=Locked one", "service", "vault", "account", "me",
                                stdin: "v4ult").status == 0)
        #expect(try desktop.run("security", "lock-keychain", "login").status == 0)

        // libsecret sees the item locked, calls Unlock and runs its prompt: Cancel → nothing, still locked.
        try pinentry.answer("cancel")
        let cancelled = try desktop.run("/usr/bin/secret-tool", "lookup", "service", "vault", "account", "me")
        #expect(cancelled.stdout == "")
        #expect(pinentry.passwordRequests == 1)
        #expect(pinentry.descriptions.contains("/secret-tool wants to use the keychain \u{201C}login\u{201D}"))
        #expect(try desktop.run("security", "find-generic-password", "-s", "vault", "login").status == 36)

        // A wrong password is asked again; the right one unlocks the keychain in keychaind, for every client.
        try pinentry.answer("pin:wrong", "pin:pw")
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "service", "vault", "account", "me").stdout == "v4ult")
        #expect(pinentry.passwordRequests == 3)
        #expect(try desktop.run("security", "find-generic-password", "-s", "vault", "login").status == 0)
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "service", "vault", "account", "me").stdout == "v4ult")
        #expect(pinentry.passwordRequests == 3)

        // Storing into a locked keychain: CreateItem hands back a prompt for its password, then stores.
        #expect(try desktop.run("security", "lock-keychain", "login").status == 0)
        try pinentry.answer("pin:pw")
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=Locked one", "service", "vault", "account", "me",
                                stdin: "n3w").status == 0)
        #expect(pinentry.passwordRequests == 4)
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "service", "vault", "account", "me").stdout == "n3w")

        // A collection's own SearchItems (secretstorage) asks the same way before it searches a locked keychain.
        guard Self.hasPythonClients else { return }
        #expect(try desktop.run("security", "lock-keychain", "login").status == 0)
        try pinentry.answer("pin:pw")
        let script = """
            import secretstorage
            collection = secretstorage.get_default_collection(secretstorage.dbus_init())
            print([item.get_label() for item in collection.search_items({"service": "vault"})])
            """
        #expect(try desktop.run("/usr/bin/env", "python3", "-c", script).stdout == "['Locked one']\n")
        #expect(pinentry.passwordRequests == 5)
    }

    @Test("another program's item: Deny, Allow (this process only), Always Allow (kept); no display: refused at once")
    func consentForAnotherProgram() throws {
        let desktop = try Desktop()
        let pinentry = try DaemonTests.ScriptedPinentry(in: desktop.home.tool.home)
        #expect(try desktop.startDaemon(settings: ["PINENTRY_PROGRAM": pinentry.program.path, "DISPLAY": ":kc-test"]) == "ready")
        // Stored by security without -A: only security is trusted with it.
        #expect(try desktop.run("security", "add-generic-password", "-s", "api", "-a", "bot", "-w", "t0ken").status == 0)
        let lookup = { try desktop.run("/usr/bin/secret-tool", "lookup", "service", "api", "account", "bot") }
        try pinentry.answer("deny")
        #expect(try lookup().stdout == "")
        #expect(pinentry.confirmations == 1)
        #expect(pinentry.descriptions.contains("/secret-tool wants to use the secret of"))
        try pinentry.answer("allow")
        #expect(try lookup().stdout == "t0ken")
        // Allow was for that process's connection: the next secret-tool is asked again.
        try pinentry.answer("deny")
        #expect(try lookup().stdout == "")
        #expect(pinentry.confirmations == 3)
        try pinentry.answer("always")
        #expect(try lookup().stdout == "t0ken")
        #expect(try lookup().stdout == "t0ken")
        #expect(pinentry.confirmations == 4)
        // The creator still reads it without a question.
        #expect(try desktop.run("security", "find-generic-password", "-s", "api", "-a", "bot", "-w").stdout == "t0ken\n")

        // A keychaind with no display to ask on: the prompt completes dismissed at once, the client does not hang.
        let headless = try Desktop()
        #expect(try headless.startDaemon() == "ready")
        #expect(try headless.run("security", "add-generic-password", "-s", "api", "-a", "bot", "-w", "t0ken").status == 0)
        let refused = try headless.run("/usr/bin/secret-tool", "lookup", "service", "api", "account", "bot")
        #expect(refused.stdout == "")
        #expect(pinentry.confirmations == 4)
    }

    @Test("issue 21 §1: an item a program keeps in its access group is not on the bus: no attributes, no secret, no question; file keychain items are")
    func accessGroupItemsStayOffTheBus() throws {
        let desktop = try Desktop()
        let pinentry = try DaemonTests.ScriptedPinentry(in: desktop.home.tool.home)
        #expect(try desktop.startDaemon(settings: ["PINENTRY_PROGRAM": pinentry.program.path, "DISPLAY": ":kc-test"]) == "ready")
        try pinentry.answer("always")
        // The native API's items live by the program's access group (keychain-example's own), as data-protection
        // items do on Apple platforms; a synchronizable one always does.
        #expect(try desktop.run("keychain-example", "--synchronizable", "set", "vault", "me", stdin: "GROUP-CANARY").status == 0)
        #expect(try desktop.run("keychain-example", "set", "notes", "me", stdin: "NATIVE-CANARY").status == 0)
        // security's item, added without a group, is a file keychain item: on the bus, and its list decides.
        #expect(try desktop.run("security", "add-generic-password", "-s", "shared", "-a", "me", "-w", "FILE-ITEM").status == 0)

        for service in ["vault", "notes"] {
            let searched = try desktop.run("/usr/bin/secret-tool", "search", "--all", "service", service)
            #expect(!searched.stdout.contains(service) && !searched.stdout.contains("CANARY"), "\(searched.stdout)")
            #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "service", service, "account", "me").stdout == "")
            // Nor can it be removed from the bus.
            _ = try desktop.run("/usr/bin/secret-tool", "clear", "service", service)
        }
        #expect(pinentry.confirmations == 0)

        // The file keychain item: found, and its secret after the user's yes (Always Allow, scripted above).
        let shared = try desktop.run("/usr/bin/secret-tool", "search", "service", "shared")
        #expect(shared.stdout.contains("label = shared"), "\(shared.stdout)")
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "service", "shared", "account", "me").stdout == "FILE-ITEM")
        #expect(pinentry.confirmations == 1)
        // The owner still has both of its items.
        #expect(try desktop.run("keychain-example", "--synchronizable", "get", "vault", "me").stdout == "GROUP-CANARY\n")
        #expect(try desktop.run("keychain-example", "get", "notes", "me").stdout == "NATIVE-CANARY\n")
    }

    @Test("the access log records what a program did over D-Bus, through the Secret Service door")
    func accessLogOverTheBus() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=Bus item", "app", "bus", stdin: "BUS-SECRET").status == 0)
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "app", "bus").stdout == "BUS-SECRET")
        let shown = try desktop.run("security", "access-log", "--json", "--program", "secret-tool")
        #expect(shown.status == 0, "\(shown.stderr)")
        let records = try AccessLogTests.records(shown.stdout)
        #expect(records.contains { $0.frontEnd == .secretService && $0.action == .add && $0.itemLabel == "Bus item"
            && $0.program == "/usr/bin/secret-tool" })
        #expect(records.contains { $0.frontEnd == .secretService && $0.action == .readSecret && $0.outcome == .allowed })
    }

    /// Python's secretstorage (the client behind `keyring`'s SecretService backend) and keyring itself, unchanged.
    static let pythonClients = """
        import secretstorage
        from keyring.backends import SecretService
        connection = secretstorage.dbus_init()
        collection = secretstorage.get_default_collection(connection)
        print("locked", collection.is_locked())
        collection.create_item("Py item", {"application": "pytest", "user": "alice"}, b"py-secret", replace=True)
        found = list(collection.search_items({"application": "pytest"}))
        item = found[0]
        print("found", len(found), item.get_secret().decode(), sorted(item.get_attributes().items()), item.get_label())
        item.set_label("Renamed")
        item.set_secret(b"changed")
        print("changed", item.get_label(), item.get_secret().decode())
        item.delete()
        print("left", len(list(collection.search_items({"application": "pytest"}))))
        backend = SecretService.Keyring()
        backend.set_password("pysvc", "bob", "kr-pass")
        print("keyring", backend.get_password("pysvc", "bob"))
        backend.delete_password("pysvc", "bob")
        print("keyring after delete", backend.get_password("pysvc", "bob"))
        """

    static var hasPythonClients: Bool {
        guard let result = try? ChildProcess.run("/usr/bin/env", arguments: ["python3", "-c", "import secretstorage, keyring"])
        else { return false }
        return result.termination == .exited(0)
    }

    @Test("Python secretstorage and keyring's SecretService backend, unchanged",
          .enabled(if: SecretServiceTests.hasPythonClients))
    func python() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")
        let script = desktop.home.tool.home.appendingPathComponent("clients.py")
        try Self.pythonClients.write(to: script, atomically: true, encoding: .utf8)
        let result = try desktop.run("/usr/bin/env", "python3", script.path)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == """
            locked False
            found 1 py-secret [('application', 'pytest'), ('user', 'alice')] Py item
            changed Renamed changed
            left 0
            keyring kr-pass
            keyring after delete None

            """)
    }

    @Test("ItemCreated, ItemChanged and ItemDeleted reach a listener on the bus")
    func signals() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")
        let listener = try DBusConnection(address: desktop.address)
        defer { listener.close() }
        _ = try listener.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                          interface: "org.freedesktop.DBus", member: "AddMatch",
                                          body: [.string("type='signal',interface='org.freedesktop.Secret.Collection'")]))
        let heard = Mutex<[String]>([])
        listener.startReceiving { message in
            if message.kind == .signal, message.interface == "org.freedesktop.Secret.Collection", let member = message.member {
                heard.withLock { $0.append(member) }
            }
        }
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=L", "service", "sig", stdin: "one").status == 0)
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=L", "service", "sig", stdin: "two").status == 0)
        #expect(try desktop.run("/usr/bin/secret-tool", "clear", "service", "sig").status == 0)
        for _ in 0..<250 where heard.withLock({ $0.count }) < 3 { usleep(20_000) }
        #expect(heard.withLock { $0 } == ["ItemCreated", "ItemChanged", "ItemDeleted"])
    }

    @Test("collections follow the keychains, whoever changes them: created, locked, deleted; SetAlias moves the default")
    func collectionSignals() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")
        let listener = try DBusConnection(address: desktop.address)
        defer { listener.close() }
        for interface in ["org.freedesktop.Secret.Service", "org.freedesktop.DBus.Properties"] {
            _ = try listener.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                              interface: "org.freedesktop.DBus", member: "AddMatch",
                                              body: [.string("type='signal',interface='\(interface)'")]))
        }
        let heard = Mutex<[String]>([])
        listener.startReceiving { message in
            guard message.kind == .signal, let member = message.member, let path = message.path else { return }
            var line = "\(member) \(message.body.first?.stringValue ?? "") \(path)"
            if member == "PropertiesChanged", case .dictionary(_, _, let entries) = message.body[1] {
                line += " " + entries.map { entry in
                    let value = entry.value == .variant(.boolean(true)) ? "true" : entry.value == .variant(.boolean(false)) ? "false" : "…"
                    return "\(entry.key.stringValue ?? "")=\(value)"
                }.joined(separator: ",")
            }
            heard.withLock { $0.append(line) }
        }
        func waitFor(_ fragment: String) -> Bool {
            for _ in 0..<250 {
                if heard.withLock({ $0.contains { $0.contains(fragment) } }) { return true }
                usleep(20_000)
            }
            return false
        }
        let prefix = "/org/freedesktop/secrets/collection/"
        // The first store creates the default keychain (nobody to ask here: without a password).
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=L", "service", "c", stdin: "x").status == 0)
        #expect(waitFor("CollectionCreated \(prefix)login "))
        // Through the socket (security): a new keychain in the search list, locked, deleted.
        #expect(try desktop.run("security", "create-keychain", "-p", "pw", "work").status == 0)
        #expect(try desktop.run("security", "list-keychains", "-s", "login", "work").status == 0)
        #expect(waitFor("CollectionCreated \(prefix)work "))
        #expect(try desktop.run("security", "lock-keychain", "work").status == 0)
        #expect(waitFor("PropertiesChanged org.freedesktop.Secret.Collection \(prefix)work Locked=true"))
        #expect(waitFor("CollectionChanged \(prefix)work "))
        // SetAlias default: the default keychain is now work (as `security default-keychain -s work`).
        _ = try listener.call(.methodCall(destination: "org.freedesktop.secrets", path: "/org/freedesktop/secrets",
                                          interface: "org.freedesktop.Secret.Service", member: "SetAlias",
                                          body: [.string("default"), .objectPath(prefix + "work")]))
        #expect(try desktop.run("security", "default-keychain").stdout.contains("work.keychain-db"))
        let alias = try listener.call(.methodCall(destination: "org.freedesktop.secrets", path: "/org/freedesktop/secrets",
                                                  interface: "org.freedesktop.Secret.Service", member: "ReadAlias",
                                                  body: [.string("default")]))
        #expect(alias.body.first == .objectPath(prefix + "work"))
        #expect(try desktop.run("security", "delete-keychain", "work").status == 0)
        #expect(waitFor("CollectionDeleted \(prefix)work "))
    }

    @Test("CreateCollection asks for the new keychain's password in a prompt; Delete asks before it deletes (secretstorage)",
          .enabled(if: SecretServiceTests.hasPythonClients))
    func createAndDeleteCollection() throws {
        let desktop = try Desktop()
        let pinentry = try DaemonTests.ScriptedPinentry(in: desktop.home.tool.home)
        #expect(try desktop.startDaemon(settings: ["PINENTRY_PROGRAM": pinentry.program.path, "DISPLAY": ":kc-test"]) == "ready")
        let script = desktop.home.tool.home.appendingPathComponent("collections.py")
        try """
            import sys, secretstorage
            connection = secretstorage.dbus_init()
            if sys.argv[1] == "create":
                collection = secretstorage.create_collection(connection, "Work Stuff")
                print(collection.collection_path, collection.is_locked(), collection.get_label())
                collection.create_item("w", {"k": "v"}, b"work-secret")
            elif sys.argv[1] == "label":
                collection = secretstorage.Collection(connection, "/org/freedesktop/secrets/collection/Work_Stuff")
                collection.set_label("Renamed \\u2713")
                try:
                    collection.set_label("bad\\x01")
                except Exception as error:
                    print("refused", type(error).__name__)
            elif sys.argv[1] == "show":
                collection = secretstorage.Collection(connection, "/org/freedesktop/secrets/collection/Work_Stuff")
                print(collection.get_label(), collection.is_locked())
            else:
                [collection] = [c for c in secretstorage.get_all_collections(connection) if c.collection_path.endswith("/Work_Stuff")]
                try:
                    collection.delete()
                    print("deleted")
                except secretstorage.exceptions.PromptDismissedException:
                    print("kept")
            """.write(to: script, atomically: true, encoding: .utf8)
        // Two different passwords first (asked again), then the same one twice.
        try pinentry.answer("pin:one", "pin:two", "pin:pw", "pin:pw")
        let created = try desktop.run("/usr/bin/env", "python3", script.path, "create")
        #expect(created.stdout == "/org/freedesktop/secrets/collection/Work_Stuff False Work Stuff\n", "\(created.stderr)")
        #expect(pinentry.passwordRequests == 4)
        #expect(try desktop.run("security", "list-keychains").stdout.contains("Work_Stuff.keychain-db"))
        // The password the user chose is the keychain's.
        #expect(try desktop.run("security", "lock-keychain", "Work_Stuff").status == 0)
        #expect(try desktop.run("security", "unlock-keychain", "-p", "pw", "Work_Stuff").status == 0)
        // Label is writable: the same path, the new label (a control character refused), readable while locked
        // and after keychaind restarts.
        let relabeled = try desktop.run("/usr/bin/env", "python3", script.path, "label")
        #expect(relabeled.stdout.hasPrefix("refused"), "\(relabeled.stdout) \(relabeled.stderr)")
        #expect(try desktop.run("security", "lock-keychain", "Work_Stuff").status == 0)
        #expect(try desktop.run("/usr/bin/env", "python3", script.path, "show").stdout == "Renamed \u{2713} True\n")
        desktop.stopDaemon()
        #expect(try desktop.startDaemon(settings: ["PINENTRY_PROGRAM": pinentry.program.path, "DISPLAY": ":kc-test"]) == "ready")
        #expect(try desktop.run("/usr/bin/env", "python3", script.path, "show").stdout == "Renamed \u{2713} True\n")
        #expect(try desktop.run("security", "unlock-keychain", "-p", "pw", "Work_Stuff").status == 0)
        // Delete: Deny keeps it, Allow deletes the file.
        try pinentry.answer("deny")
        #expect(try desktop.run("/usr/bin/env", "python3", script.path, "delete").stdout == "kept\n")
        #expect(try desktop.run("security", "list-keychains").stdout.contains("Work_Stuff.keychain-db"))
        try pinentry.answer("allow")
        #expect(try desktop.run("/usr/bin/env", "python3", script.path, "delete").stdout == "deleted\n")
        #expect(!(try desktop.run("security", "list-keychains").stdout.contains("Work_Stuff")))
        #expect(pinentry.confirmations == 2)
    }

    @Test("the session collection: in memory only, the creating program reads it, gone when keychaind stops (the keychain's items stay)",
          .enabled(if: SecretServiceTests.hasPythonClients))
    func sessionCollection() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")
        let script = desktop.home.tool.home.appendingPathComponent("session.py")
        try """
            import sys, secretstorage
            connection = secretstorage.dbus_init()
            collection = secretstorage.get_collection_by_alias(connection, "session")
            if sys.argv[1] == "store":
                print(collection.collection_path, collection.is_locked())
                collection.create_item("temp", {"app": "mem"}, b"in-memory-only")
            print([item.get_secret().decode() for item in collection.search_items({"app": "mem"})])
            """.write(to: script, atomically: true, encoding: .utf8)
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=kept", "app", "disk", stdin: "on-disk").status == 0)
        let stored = try desktop.run("/usr/bin/env", "python3", script.path, "store")
        #expect(stored.stdout == "/org/freedesktop/secrets/collection/session False\n['in-memory-only']\n", "\(stored.stderr)")
        // Another process of the same program reads it; another program (secret-tool) finds it locked, and with no
        // display to ask on it stays so.
        #expect(try desktop.run("/usr/bin/env", "python3", script.path, "read").stdout == "['in-memory-only']\n")
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "app", "mem").stdout == "")
        #expect(try desktop.run("/usr/bin/secret-tool", "search", "app", "mem").stdout.contains("label = temp"))
        // Nothing of it on disk.
        let home = desktop.home.tool.home.path
        let grep = try desktop.run("/usr/bin/grep", "-r", "-l", "-a", "in-memory-only", home, "--exclude=session.py")
        #expect(grep.stdout == "")
        // keychaind stopped: gone.
        desktop.stopDaemon()
        #expect(try desktop.startDaemon() == "ready")
        #expect(try desktop.run("/usr/bin/env", "python3", script.path, "read").stdout == "[]\n")
        // What went to the keychain is there after the restart, for the same client as before.
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "app", "disk").stdout == "on-disk")
    }

    @Test("a second keychaind cannot take org.freedesktop.secrets while it is owned, and says why")
    func nameOwned() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")
        let otherRuntime = desktop.home.tool.home.appendingPathComponent("run2")
        try FileManager.default.createDirectory(at: otherRuntime, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let second = try desktop.startDaemon(runtime: otherRuntime.path)
        #expect(second.hasPrefix("failed: Secret Service: another program owns org.freedesktop.secrets"))
    }

    /// A Python client that stores an item (so its program is trusted by it) and reads it, then forks a child that
    /// keeps the bus connection while the process executes another program: the child's read must fail.
    static let execAfterIdentification = """
        import os, sys, time, secretstorage
        connection = secretstorage.dbus_init()
        collection = secretstorage.get_default_collection(connection)
        item = collection.create_item("Exec canary", {"exec": "canary"}, b"DBUS-EXEC-CANARY", replace=True)
        assert item.get_secret() == b"DBUS-EXEC-CANARY"
        r, w = os.pipe()
        if os.fork() == 0:
            os.close(r)
            time.sleep(0.3)
            try:
                print("WON" if item.get_secret() == b"DBUS-EXEC-CANARY" else "LOST")
            except Exception as error:
                print("LOST", type(error).__name__)
            sys.stdout.flush()
            os.close(w)
            os._exit(0)
        os.close(w)
        os.dup2(r, 0)
        os.execv("/bin/cat", ["cat"])
        """

    @Test("finding 3, what holds: a bus connection whose process executed another program since it was identified gets nothing",
          .enabled(if: SecretServiceTests.hasPythonClients))
    func execAfterIdentification() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")
        let script = desktop.home.tool.home.appendingPathComponent("exec-after.py")
        try Self.execAfterIdentification.write(to: script, atomically: true, encoding: .utf8)
        var won = 0
        for _ in 0..<10 {
            let result = try desktop.run("/usr/bin/env", "python3", script.path)
            #expect(result.stdout.contains("LOST") || result.stdout.contains("WON"), "\(result.stdout) \(result.stderr)")
            if result.stdout.contains("WON") { won += 1 }
        }
        #expect(won == 0, "won \(won) of 10")
        // A new process of the same program is still trusted by its item.
        let reread = try desktop.run("/usr/bin/env", "python3", "-c", """
            import secretstorage
            c = secretstorage.get_default_collection(secretstorage.dbus_init())
            print([i.get_secret().decode() for i in c.search_items({"exec": "canary"})])
            """)
        #expect(reread.stdout == "['DBUS-EXEC-CANARY']\n", "\(reread.stderr)")
    }

    /// Sends a 40 MiB call (a byte array) to the Secret Service and prints the reply's error name.
    static let oversizedCall = """
        from jeepney import DBusAddress, new_method_call
        from jeepney.io.blocking import open_dbus_connection
        connection = open_dbus_connection(bus="SESSION")
        service = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                              interface="org.freedesktop.Secret.Service")
        call = new_method_call(service, "OpenSession", "sv", ("plain", ("ay", bytes(40 << 20))))
        reply = connection.send_and_get_reply(call, timeout=60)
        print(reply.header.fields.get(4, "no error"))
        """

    @Test("a 40 MiB call gets LimitsExceeded; keychaind stays on the bus and its memory does not grow with it",
          .enabled(if: SecretServiceTests.hasPythonClients))
    func oversizedMessage() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")
        let pid = try #require(desktop.daemon?.processIdentifier)
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=Big", "size", "small", stdin: "kept").status == 0)
        let before = DaemonResourceTests.residentKiB(pid)
        let script = desktop.home.tool.home.appendingPathComponent("oversized.py")
        try Self.oversizedCall.write(to: script, atomically: true, encoding: .utf8)
        let result = try desktop.run("/usr/bin/env", "python3", script.path)
        #expect(result.stdout.contains("org.freedesktop.DBus.Error.LimitsExceeded"), "\(result.stdout) \(result.stderr)")
        let after = DaemonResourceTests.residentKiB(pid)
        #expect(after - before < 32 * 1024, "resident \(before) KiB before, \(after) KiB after")
        // Still the Secret Service: the next client is served.
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "size", "small").stdout == "kept")
    }

    /// Takes org.freedesktop.systemd1 on the session bus (as any program can when no systemd user manager runs),
    /// then never answers: every call to it waits for the caller's timeout. Writes the file named by its argument
    /// once it owns the name.
    static let systemdSquatter = """
        import sys
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection
        connection = open_dbus_connection(bus="SESSION")
        connection.send_and_get_reply(message_bus.RequestName("org.freedesktop.systemd1"))
        open(sys.argv[1], "w").write("owned")
        while True:
            connection.receive()
        """

    @Test("issue 22 finding 2: a program squatting org.freedesktop.systemd1 holds up no lookup, its own or anyone else's",
          .enabled(if: SecretServiceTests.hasPythonClients))
    func squattedSystemdName() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")  // no DISPLAY: keychaind would look for one at systemd's manager
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=Open", "service", "open", stdin: "visible").status == 0)
        // A second keychain, locked: every search over the collections meets it and looks for a display to ask on.
        #expect(try desktop.run("security", "create-keychain", "-p", "pw", "vault").status == 0)
        #expect(try desktop.run("security", "lock-keychain", "vault").status == 0)

        let script = desktop.home.tool.home.appendingPathComponent("squatter.py")
        let owned = desktop.home.tool.home.appendingPathComponent("squatter-owns")
        try Self.systemdSquatter.write(to: script, atomically: true, encoding: .utf8)
        let squatter = try ChildProcess.spawn("/usr/bin/env", arguments: ["python3", script.path, owned.path],
                                              environment: desktop.environment)
        defer { squatter.send(SIGKILL); _ = squatter.wait() }
        for _ in 0..<300 where !FileManager.default.fileExists(atPath: owned.path) { usleep(20_000) }
        try #require(FileManager.default.fileExists(atPath: owned.path), "the squatter never owned the name")

        // Three lookups at once. Before the fix each waited 25 s for the squatter, one after another (75 s).
        let started = Date()
        let answers = Mutex<[String]>([])
        let environment = desktop.environment
        DispatchQueue.concurrentPerform(iterations: 3) { _ in
            let lookup = try? ChildProcess.run("/usr/bin/secret-tool", arguments: ["lookup", "service", "open"],
                                               environment: environment)
            answers.withLock { $0.append(lookup.map { String(decoding: $0.stdout, as: UTF8.self) } ?? "failed") }
        }
        let elapsed = Date().timeIntervalSince(started)
        #expect(answers.withLock { $0 } == ["visible", "visible", "visible"])
        #expect(elapsed < 15, "three lookups took \(elapsed) s")
    }

    /// CreateItem without Replace twice with equal attributes, then with Replace; every item read and deleted.
    static let duplicateItems = """
        import secretstorage
        connection = secretstorage.dbus_init()
        collection = secretstorage.get_default_collection(connection)
        first = collection.create_item("one", {"dup": "x"}, b"first")
        second = collection.create_item("two", {"dup": "x"}, b"second")
        print("distinct", first.item_path != second.item_path)
        found = list(collection.search_items({"dup": "x"}))
        print("found", sorted((item.get_label(), item.get_secret().decode()) for item in found))
        print("first reads", first.get_secret().decode(), "second reads", second.get_secret().decode())
        replaced = collection.create_item("three", {"dup": "x"}, b"third", replace=True)
        print("replace keeps", len(list(collection.search_items({"dup": "x"}))))
        for item in collection.search_items({"dup": "x"}):
            item.delete()
        print("left", len(list(collection.search_items({"dup": "x"}))))
        """

    @Test("CreateItem without Replace adds a second item beside one with equal attributes; with Replace it updates one",
          .enabled(if: SecretServiceTests.hasPythonClients))
    func duplicateAttributes() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")
        let script = desktop.home.tool.home.appendingPathComponent("duplicates.py")
        try Self.duplicateItems.write(to: script, atomically: true, encoding: .utf8)
        let result = try desktop.run("/usr/bin/env", "python3", script.path)
        #expect(result.stdout == """
            distinct True
            found [('one', 'first'), ('two', 'second')]
            first reads first second reads second
            replace keeps 2
            left 0

            """, "\(result.stderr)")
        // `security` sees both as generic passwords of the same service and account (their attributes are equal).
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=Apple view", "service", "shared", stdin: "a").status == 0)
        #expect(try desktop.run("/usr/bin/env", "python3", "-c", """
            import secretstorage
            c = secretstorage.get_default_collection(secretstorage.dbus_init())
            c.create_item("again", {"service": "shared"}, b"b")
            print(len(list(c.search_items({"service": "shared"}))))
            """).stdout == "2\n")
        #expect(try desktop.run("security", "find-generic-password", "-s", "shared").status == 0)
    }

    @Test("every alias is a collection object: …/aliases/session and …/aliases/default take items, ReadAlias names login",
          .enabled(if: SecretServiceTests.hasPythonClients))
    func aliasObjects() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=First", "first", "one", stdin: "x").status == 0)
        // libsecret's SECRET_COLLECTION_SESSION: secret-tool stores straight into /org/freedesktop/secrets/aliases/session.
        let session = try desktop.run("/usr/bin/secret-tool", "store", "--label=Short-lived", "--collection=session",
                                      "scope", "session", stdin: "in-memory")
        #expect(session.status == 0, "\(session.stderr)")
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "scope", "session").stdout == "in-memory")
        let script = """
            import secretstorage
            from jeepney import DBusAddress, new_method_call
            connection = secretstorage.dbus_init()
            for alias in ["default", "session"]:
                collection = secretstorage.Collection(connection, "/org/freedesktop/secrets/aliases/" + alias)
                item = collection.create_item("via " + alias, {"alias": alias}, alias.encode(), replace=True)
                print(alias, collection.get_label() is not None, [i.get_secret().decode() for i in collection.search_items({"alias": alias})])
            service = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                                  interface="org.freedesktop.Secret.Service")
            for alias in ["login", "default", "session", "nothing"]:
                print(alias, connection.send_and_get_reply(new_method_call(service, "ReadAlias", "s", (alias,))).body[0])
            """
        let result = try desktop.run("/usr/bin/env", "python3", "-c", script)
        #expect(result.stdout == """
            default True ['default']
            session True ['session']
            login /org/freedesktop/secrets/collection/login
            default /org/freedesktop/secrets/collection/login
            session /org/freedesktop/secrets/collection/session
            nothing /

            """, "\(result.stderr)")
    }

    @Test("a keychaind started for the Secret Service while one serves the socket hands the name to that one; only keychaind may ask")
    func handOverToRunningDaemon() throws {
        let desktop = try Desktop()
        defer { desktop.home.stopDaemon() }
        // The first command starts keychaind for the socket, on demand: no Secret Service.
        #expect(try desktop.run("security", "add-generic-password", "-a", "a", "-s", "socket-first", "-w", "x").status == 0)
        let first = try #require(desktop.home.daemonPID)
        // Then D-Bus activation starts keychaind --secret-service: the running one takes the name; this one ends.
        #expect(try desktop.startDaemon() == "ready")
        desktop.daemon?.waitUntilExit()
        #expect(desktop.daemon?.terminationStatus == 0)
        desktop.daemon = nil
        #expect(desktop.home.daemonPID == first && kill(first, 0) == 0)
        #expect(try desktop.run("/usr/bin/secret-tool", "store", "--label=Handed over", "service", "handed-over", stdin: "v").status == 0)
        #expect(try desktop.run("/usr/bin/secret-tool", "lookup", "service", "handed-over").stdout == "v")
        #expect(try desktop.run("security", "find-generic-password", "-s", "handed-over").status == 0)
        // A second activation finds the name served and ends at once.
        #expect(try desktop.startDaemon() == "ready")
        desktop.daemon?.waitUntilExit()
        desktop.daemon = nil

        // Any other program asking is refused: it could point keychaind at a bus of its own.
        let service = try #require(try RemoteKeychainService.connect(
            to: KeychainLocations.current(environment: desktop.environment).daemonSocket, environment: desktop.environment))
        #expect(throws: KeychainError.self) { try service.serveSecretService(busAddress: desktop.address, replace: false) }
    }

    /// The Secret Service API 0.2, method by method and property by property, printed with object paths reduced to
    /// their kind so that implementations compare line by line. Its output from gnome-keyring-daemon 42 (Debian
    /// 12) is the reference below; keychaind gives the same, except where noted.
    static let specificationWalk = """
        # Secret Service API 0.2, method by method and property by property, printed in a form that does not depend on the
        # implementation's own object names (paths become their kind), so two implementations can be compared line by line.
        import re, sys
        from jeepney import DBusAddress, new_method_call, Properties, DBusErrorResponse
        from jeepney.io.blocking import open_dbus_connection

        bus = open_dbus_connection(bus="SESSION")
        NAME = "org.freedesktop.secrets"
        SERVICE = DBusAddress("/org/freedesktop/secrets", bus_name=NAME, interface="org.freedesktop.Secret.Service")

        def shape(value):
            if isinstance(value, str) and value.startswith("/org/freedesktop/secrets/"):
                if "/session/" in value: return "<session>"
                if "/prompt/" in value: return "<prompt>"
                parts = value.split("/")
                if len(parts) >= 7: return "<item>"
                return "<collection>"
            if isinstance(value, tuple): return tuple(shape(v) for v in value)
            if isinstance(value, list): return sorted((shape(v) for v in value), key=repr)
            if isinstance(value, dict): return {shape(k): shape(v) for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))}
            if isinstance(value, bytes): return value
            return value

        def call(address, method, signature=None, *body, interface=None):
            if interface:
                address = DBusAddress(address.object_path, bus_name=NAME, interface=interface)
            message = new_method_call(address, method, signature, body) if signature else new_method_call(address, method)
            reply = bus.send_and_get_reply(message, timeout=20)
            if reply.header.message_type.name == "error":
                return ("error", reply.header.fields.get(4))
            return reply.body

        def show(label, value):
            print(f"{label}: {shape(value)!r}")

        def prop(path, interface, name):
            reply = bus.send_and_get_reply(Properties(DBusAddress(path, bus_name=NAME, interface=interface)).get(name))
            if reply.header.message_type.name == "error":
                return ("error", reply.header.fields.get(4))
            return reply.body[0][1]

        session = call(SERVICE, "OpenSession", "sv", "plain", ("s", ""))
        show("OpenSession plain", session)
        session_path = session[1]
        show("OpenSession unknown algorithm", call(SERVICE, "OpenSession", "sv", "rot13", ("s", "")))
        default = call(SERVICE, "ReadAlias", "s", "default")[0]
        if default == "/":
            created = call(SERVICE, "CreateCollection", "a{sv}s", {"org.freedesktop.Secret.Collection.Label": ("s", "Login")}, "default")
            default = call(SERVICE, "ReadAlias", "s", "default")[0]
        show("ReadAlias default", default)
        show("ReadAlias nothing", call(SERVICE, "ReadAlias", "s", "no-such-alias"))
        show("Service.Collections holds default", default in prop("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Collections"))
        C = "org.freedesktop.Secret.Collection"
        collection = DBusAddress(default, bus_name=NAME, interface=C)
        show("Collection.Locked", prop(default, C, "Locked"))
        show("Collection.Label is text", isinstance(prop(default, C, "Label"), str))
        show("Collection.Created > 0", prop(default, C, "Created") > 0)
        secret = (session_path, b"", b"spec-secret", "text/plain")
        props = {"org.freedesktop.Secret.Item.Label": ("s", "Spec item"),
                 "org.freedesktop.Secret.Item.Attributes": ("a{ss}", {"spec": "yes", "xdg:schema": "org.example.Spec"})}
        made = call(collection, "CreateItem", "a{sv}(oayays)b", props, secret, False)
        show("CreateItem", made)
        item_path = made[0]
        I = "org.freedesktop.Secret.Item"
        item = DBusAddress(item_path, bus_name=NAME, interface=I)
        show("Collection.Items holds it", item_path in prop(default, C, "Items"))
        show("Item.Label", prop(item_path, I, "Label"))
        show("Item.Attributes", prop(item_path, I, "Attributes"))
        show("Item.Locked", prop(item_path, I, "Locked"))
        show("Item.Type", prop(item_path, I, "Type"))
        show("Item.Created > 0", prop(item_path, I, "Created") > 0)
        show("GetSecret", call(item, "GetSecret", "o", session_path))
        show("GetSecret, no such session", call(item, "GetSecret", "o", "/org/freedesktop/secrets/session/nope"))
        show("SetSecret", call(item, "SetSecret", "(oayays)", (session_path, b"", b"changed", "text/plain")))
        show("GetSecret after SetSecret", call(item, "GetSecret", "o", session_path))
        show("Properties.Set Label", bus.send_and_get_reply(Properties(item).set("Label", "s", "Renamed")).body)
        show("Item.Label after Set", prop(item_path, I, "Label"))
        show("Properties.Set Attributes", bus.send_and_get_reply(Properties(item).set("Attributes", "a{ss}", {"spec": "changed"})).body)
        show("Item.Attributes after Set", prop(item_path, I, "Attributes"))
        show("Service.SearchItems", call(SERVICE, "SearchItems", "a{ss}", {"spec": "changed"}))
        show("Service.SearchItems, none", call(SERVICE, "SearchItems", "a{ss}", {"spec": "no-such-value"}))
        show("Collection.SearchItems", call(collection, "SearchItems", "a{ss}", {"spec": "changed"}))
        show("GetSecrets", call(SERVICE, "GetSecrets", "aoo", [item_path], session_path))
        show("Unlock, already unlocked", call(SERVICE, "Unlock", "ao", [item_path]))
        show("an unknown method", call(SERVICE, "NoSuchMethod"))
        show("SearchItems, wrong arguments", call(SERVICE, "SearchItems", "s", "x"))
        show("OpenSession, no arguments", call(SERVICE, "OpenSession"))
        show("CreateItem, no replace flag", call(collection, "CreateItem", "a{sv}(oayays)", props, secret))
        show("a Collection method on the service", call(DBusAddress("/org/freedesktop/secrets", bus_name=NAME, interface=C), "Delete"))
        show("an interface nobody has", call(DBusAddress("/org/freedesktop/secrets", bus_name=NAME, interface="org.example.Nothing"), "Ping"))
        intro = call(DBusAddress(item_path, bus_name=NAME, interface="org.freedesktop.DBus.Introspectable"), "Introspect")[0]
        show("Item's Introspect shows GetSecret and Attributes", ('<method name="GetSecret">' in intro, '<property name="Attributes" type="a{ss}" access="readwrite"/>' in intro))
        show("Item.Delete", call(item, "Delete"))
        show("GetSecret of a deleted item", call(item, "GetSecret", "o", session_path))
        show("Service.SearchItems after Delete", call(SERVICE, "SearchItems", "a{ss}", {"spec": "changed"}))
        show("Session.Close", call(DBusAddress(session_path, bus_name=NAME, interface="org.freedesktop.Secret.Session"), "Close"))
        show("GetSecrets on a closed session", call(SERVICE, "GetSecrets", "aoo", [], session_path))
        """

    @Test("the specification, call by call, answers as gnome-keyring answers (one difference, noted)",
          .enabled(if: SecretServiceTests.hasPythonClients))
    func specificationAsGnomeKeyring() throws {
        let desktop = try Desktop()
        #expect(try desktop.startDaemon() == "ready")
        let script = desktop.home.tool.home.appendingPathComponent("specification.py")
        try Self.specificationWalk.write(to: script, atomically: true, encoding: .utf8)
        let result = try desktop.run("/usr/bin/env", "python3", script.path)
        // gnome-keyring's reply, line by line, but for a deleted item's GetSecret: gnome-keyring answers
        // org.freedesktop.DBus.Error.UnknownMethod (its object is gone from the bus), keychaind the specification's
        // org.freedesktop.Secret.Error.NoSuchObject.
        #expect(result.stdout == """
            OpenSession plain: (('s', ''), '<session>')
            OpenSession unknown algorithm: ('error', 'org.freedesktop.DBus.Error.NotSupported')
            ReadAlias default: '<collection>'
            ReadAlias nothing: ('/',)
            Service.Collections holds default: True
            Collection.Locked: False
            Collection.Label is text: True
            Collection.Created > 0: True
            CreateItem: ('<item>', '/')
            Collection.Items holds it: True
            Item.Label: 'Spec item'
            Item.Attributes: {'spec': 'yes', 'xdg:schema': 'org.example.Spec'}
            Item.Locked: False
            Item.Type: 'org.example.Spec'
            Item.Created > 0: True
            GetSecret: (('<session>', b'', b'spec-secret', 'text/plain'),)
            GetSecret, no such session: ('error', 'org.freedesktop.Secret.Error.NoSession')
            SetSecret: ()
            GetSecret after SetSecret: (('<session>', b'', b'changed', 'text/plain'),)
            Properties.Set Label: ()
            Item.Label after Set: 'Renamed'
            Properties.Set Attributes: ()
            Item.Attributes after Set: {'spec': 'changed', 'xdg:schema': 'org.example.Spec'}
            Service.SearchItems: (['<item>'], [])
            Service.SearchItems, none: ([], [])
            Collection.SearchItems: (['<item>'],)
            GetSecrets: ({'<item>': ('<session>', b'', b'changed', 'text/plain')},)
            Unlock, already unlocked: (['<item>'], '/')
            an unknown method: ('error', 'org.freedesktop.DBus.Error.UnknownMethod')
            SearchItems, wrong arguments: ('error', 'org.freedesktop.DBus.Error.InvalidArgs')
            OpenSession, no arguments: ('error', 'org.freedesktop.DBus.Error.InvalidArgs')
            CreateItem, no replace flag: ('error', 'org.freedesktop.DBus.Error.InvalidArgs')
            a Collection method on the service: ('error', 'org.freedesktop.DBus.Error.UnknownMethod')
            an interface nobody has: ('error', 'org.freedesktop.DBus.Error.UnknownMethod')
            Item's Introspect shows GetSecret and Attributes: (True, True)
            Item.Delete: ('/',)
            GetSecret of a deleted item: ('error', 'org.freedesktop.Secret.Error.NoSuchObject')
            Service.SearchItems after Delete: ([], [])
            Session.Close: ()
            GetSecrets on a closed session: ('error', 'org.freedesktop.Secret.Error.NoSession')

            """, "\(result.stderr)")
    }
}
