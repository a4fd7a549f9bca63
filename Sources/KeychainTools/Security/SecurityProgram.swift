#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore
import KeychainInterface
import SecurityCommandLine

// `security`: the macOS keychain command on Linux (semantics §8). Exit status = the failing status's low byte.
// The same program runs in two executables: `security` (the client interface only, which starts fast) and the
// engine-linked twin `keychain-embedded security …` that `security` becomes when the keychain is opened in-process.

struct Command {
    let name: String
    let usage: String
    let help: String
    let run: ([String]) throws(CommandError) -> Int32
}

@MainActor
public final class SecurityProgram {
    private let session: Session
    /// `--json` was given to a command that supports it.
    private var wantsJSON = false
    private lazy var items = ItemCommands(session: session)
    private lazy var keychains = KeychainCommands(session: session)
    private lazy var certificates = CertificateCommands(session: session)
    private lazy var commands: [Command] = makeCommands()

    /// - Parameter service: makes the keychain service at first use (a command that never needs one never calls it).
    public init(service: @escaping () throws(KeychainError) -> any KeychainService) {
        session = Session(makeService: service)
    }

    /// Whether `arguments` (without the program name) run a command that reaches the keychain: `help`, `error` and
    /// the global options that print and exit do not.
    public nonisolated static func needsKeychain(_ arguments: [String]) -> Bool {
        var words = arguments[...]
        while let first = words.first, first.hasPrefix("-"), first.count > 1 {
            if ["-h", "--completions", "--man", "--version"].contains(first) { return false }
            words = words.dropFirst()
        }
        // Abbreviations as `runCommand` reads them: `help` is the table's first command, no other starts with "e".
        guard let word = words.first else { return false }
        return !("help".hasPrefix(word) || "error".hasPrefix(word))
    }

    // Table order decides abbreviations: the first command whose name starts with the typed word runs.
    private func makeCommands() -> [Command] {
        [
        Command(name: "help", usage: "", help: "Show all commands, or show usage for a command.") { _ throws(CommandError) in
            self.printHelp()
            return 0
        },
        Command(name: "list-keychains", usage: "[-d user|system|common|dynamic] [-s [keychain...]]",
                help: "Display or manipulate the keychain search list.", run: self.keychains.listKeychains),
        Command(name: "default-keychain", usage: "[-d user|system|common|dynamic] [-s [keychain]]",
                help: "Display or set the default keychain.") { args throws(CommandError) in
            try self.keychains.defaultKeychain(args, login: false)
        },
        Command(name: "login-keychain", usage: "[-d user|system|common|dynamic] [-s [keychain]]",
                help: "Display or set the login keychain.") { args throws(CommandError) in
            try self.keychains.defaultKeychain(args, login: true)
        },
        Command(name: "create-keychain", usage: "[-P] [-p password] [keychains...]",
                help: "Create keychains and add them to the search list.", run: self.keychains.create),
        Command(name: "delete-keychain", usage: "[keychains...]",
                help: "Delete keychains and remove them from the search list.", run: self.keychains.delete),
        Command(name: "lock-keychain", usage: "[-a | keychain]", help: "Lock the specified keychain.", run: self.keychains.lock),
        Command(name: "unlock-keychain", usage: "[-u] [-p password] [keychain]",
                help: "Unlock the specified keychain.", run: self.keychains.unlock),
        Command(name: "set-keychain-settings", usage: "[-lu] [-t timeout] [keychain]",
                help: "Set settings for a keychain.", run: self.keychains.setSettings),
        Command(name: "set-keychain-password", usage: "[-o oldPassword] [-p newPassword] [keychain]",
                help: "Set password for a keychain.", run: self.keychains.setPassword),
        Command(name: "show-keychain-info", usage: "[keychain]", help: "Show the settings for keychain.",
                run: self.keychains.showInfo),
        Command(name: "dump-keychain", usage: "[-adir] [keychain...]", help: "Dump the contents of one or more keychains.") {
            args throws(CommandError) in try self.keychains.dump(args, json: self.wantsJSON)
        },
        Command(name: "add-generic-password",
                usage: "[-a account] [-s service] [-w password] [options...] [-A|-T appPath] [keychain]",
                help: "Add a generic password item.") { args throws(CommandError) in try self.items.add(.generic, args) },
        Command(name: "add-internet-password",
                usage: "[-a account] [-s server] [-w password] [options...] [-A|-T appPath] [keychain]",
                help: "Add an internet password item.") { args throws(CommandError) in try self.items.add(.internet, args) },
        Command(name: "find-generic-password",
                usage: "[-a account] [-s service] [options...] [-g] [-w] [keychain...]",
                help: "Find a generic password item.") { args throws(CommandError) in try self.items.find(.generic, args, json: self.wantsJSON) },
        Command(name: "find-internet-password",
                usage: "[-a account] [-s server] [options...] [-g] [-w] [keychain...]",
                help: "Find an internet password item.") { args throws(CommandError) in try self.items.find(.internet, args, json: self.wantsJSON) },
        Command(name: "delete-generic-password", usage: "[-a account] [-s service] [options...] [keychain...]",
                help: "Delete a generic password item.") { args throws(CommandError) in try self.items.delete(.generic, args) },
        Command(name: "delete-internet-password", usage: "[-a account] [-s server] [options...] [keychain...]",
                help: "Delete an internet password item.") { args throws(CommandError) in try self.items.delete(.internet, args) },
        Command(name: "find-certificate", usage: "[-a] [-c name] [-e emailAddress] [-m] [-p] [-Z] [keychain...]",
                help: "Find a certificate item.") { args throws(CommandError) in try self.certificates.findCertificate(args) },
        Command(name: "find-identity", usage: "[-p policy] [-s string] [-v] [keychain...]",
                help: "Find an identity (certificate + private key).") { args throws(CommandError) in
            try self.certificates.findIdentity(args)
        },
        Command(name: "delete-certificate", usage: "[-c name] [-Z hash] [-t] [keychain...]",
                help: "Delete a certificate from a keychain.") { args throws(CommandError) in
            try self.certificates.delete(args, identity: false)
        },
        Command(name: "delete-identity", usage: "[-c name] [-Z hash] [-t] [keychain...]",
                help: "Delete a certificate and its private key from a keychain.") { args throws(CommandError) in
            try self.certificates.delete(args, identity: true)
        },
        Command(name: "add-certificates", usage: "[-k keychain] file...",
                help: "Add certificates to a keychain.") { args throws(CommandError) in try self.certificates.addCertificates(args) },
        Command(name: "import", usage: "inputfile [-k keychain] [-t type] [-f format] [-w] [-P passphrase] [-x] [-A | -T appPath]",
                help: "Import items into a keychain.") { args throws(CommandError) in try self.certificates.importFile(args) },
        Command(name: "export", usage: "[-k keychain] [-t type] [-f format] [-w] [-p] [-P passphrase] [-o outfile]",
                help: "Export items from a keychain.") { args throws(CommandError) in try self.certificates.export(args) },
        Command(name: "error", usage: "[<error code>...]", help: "Display a descriptive message for the given error code(s).") {
            args throws(CommandError) in
            guard !args.isEmpty else { throw .usage }
            for arg in args {
                let code = Int32(arg) ?? Int32(truncatingIfNeeded: Int64(arg.dropFirst(2), radix: 16) ?? 0)
                Terminal.writeOut("Error: 0x\(Hex.word(UInt32(bitPattern: code), uppercase: true)) \(code) "
                                      + "\(KeychainStatus(code).message)\n")
            }
            return 1
        },
        // Beyond macOS: Apple's backup rules for one keychain, as a file of its own.
        Command(name: "backup-keychain", usage: "[-k keychain] -o file [-P -]",
                help: "Back up every item of a keychain into an encrypted file.") { args throws(CommandError) in
            try BackupCommands(session: self.session).backUp(args)
        },
        Command(name: "restore-keychain", usage: "-i file [-k keychain] [-P -]",
                help: "Restore a backup file's items into a keychain.") { args throws(CommandError) in
            try BackupCommands(session: self.session).restore(args)
        },
        // Beyond macOS: synchronizable items on the user's other devices (docs/SYNC.md).
        Command(name: "sync-setup", usage: "--server URL [--ca-file PEM] [--registration-token-file FILE|-] [-k keychain]",
                help: "Sync a keychain's synchronizable items through a sync server, as its first device.") {
            args throws(CommandError) in try SyncCommands(session: self.session).setUp(args)
        },
        Command(name: "sync-join", usage: "[--server URL [--ca-file PEM] [--no-wait]] [-k keychain]",
                help: "Ask to sync a keychain as a new device; wait until a device that syncs approves it.") {
            args throws(CommandError) in try SyncCommands(session: self.session).join(args)
        },
        Command(name: "sync-approve", usage: "code [-k keychain]",
                help: "Let a new device sync, after comparing the words both devices show.") {
            args throws(CommandError) in try SyncCommands(session: self.session).approve(args)
        },
        Command(name: "sync-remove-device", usage: "device-id [-k keychain]",
                help: "Remove another device from a keychain's sync account (a new item key for the others).") {
            args throws(CommandError) in try SyncCommands(session: self.session).removeDevice(args)
        },
        Command(name: "sync-recover", usage: "--server URL [--ca-file PEM] [-P -] [-k keychain]",
                help: "Join a sync account with its recovery key, after every device was lost.") {
            args throws(CommandError) in try SyncCommands(session: self.session).recover(args)
        },
        Command(name: "sync-devices", usage: "[-k keychain]",
                help: "List the devices of a keychain's sync account.") { args throws(CommandError) in
            try SyncCommands(session: self.session).devices(args)
        },
        Command(name: "sync-now", usage: "[-k keychain]",
                help: "Send and receive a keychain's synchronizable items now.") { args throws(CommandError) in
            try SyncCommands(session: self.session).now(args)
        },
        Command(name: "sync-status", usage: "[-k keychain]",
                help: "Show a keychain's sync account, device and last sync.") { args throws(CommandError) in
            try SyncCommands(session: self.session).status(args)
        },
        Command(name: "sync-leave", usage: "[-k keychain]",
                help: "Stop syncing a keychain on this device (its items stay).") { args throws(CommandError) in
            try SyncCommands(session: self.session).leave(args)
        },
        // Beyond macOS: who read what (docs/ACCESS-LOG.md).
        Command(name: "access-log", usage: "[--program path] [--item id|label] [--since time|age] [--json]",
                help: "Show which program did what with which item, as keychaind recorded it.") {
            args throws(CommandError) in try AccessLogCommands(session: self.session).show(args)
        },
        Command(name: "verify-access-log", usage: "",
                help: "Check the access log; name the first altered, removed, reordered or cut record.") {
            args throws(CommandError) in try AccessLogCommands(session: self.session).verify(args)
        },
        // Beyond macOS: other stores' secrets moved in (docs/MIGRATION.md).
        Command(name: "import-secrets",
                usage: "--from secret-service|gnome-keyring|keepassxc-xml|keepassxc-csv|pass [--dry-run] [-k keychain] [-P -] [file|dir]",
                help: "Copy another password store's secrets into a keychain.") { args throws(CommandError) in
            try ImportSecretsCommand(session: self.session).run(args)
        },
        // Beyond macOS: a rebuilt program (a test binary after each build) is a new program to keychaind.
        Command(name: "trust-program", usage: "program",
                help: "Let a rebuilt or replaced program use the access groups it claims.") { args throws(CommandError) in
            guard args.count == 1 else { throw .usage }
            guard let daemon = self.session.service as? RemoteKeychainService else {
                throw .status(KeychainError(.notAvailable, "trust-program needs keychaind (KEYCHAIN_BACKEND=daemon)"),
                              api: "trust-program")
            }
            let path = CertificateCommands.absolute(args[0])
            do throws(KeychainError) {
                let groups = try daemon.trustProgram(at: path)
                Terminal.writeOut("\(path) may use \(groups) access group\(groups == 1 ? "" : "s").\n")
            } catch {
                throw .status(error, api: "trust-program")
            }
            return 0
        },
    ]
    }

    func printHelp() {
        Terminal.writeOut("Usage: security [-h] [-i] [-l] [-p prompt] [-q] [-v] [command] [opt ...]\n")
        Terminal.writeOut("security commands are:\n")
        for command in commands {
            Terminal.writeOut("    " + command.name + String(repeating: " ", count: max(0, 29 - command.name.count)) + command.help + "\n")
        }
    }

    func runCommand(_ arguments: [String]) -> Int32 {
        guard let word = arguments.first else {
            printHelp()
            return 0
        }
        guard let command = commands.first(where: { $0.name.hasPrefix(word) }) else {
            Terminal.writeError("security: unknown command \"\(word)\"\n")
            return 1
        }
        if command.name == "help", arguments.count > 1 {
            if let target = commands.first(where: { $0.name.hasPrefix(arguments[1]) }) {
                Terminal.writeOut("Usage: \(target.name) \(target.usage)\n    \(target.help)\n")
            }
            return 0
        }
        var rest = Array(arguments.dropFirst())
        if CommandFlags.json.contains(command.name), let index = rest.firstIndex(of: "--json") {
            rest.remove(at: index)
            wantsJSON = true
        }
        do {
            return try command.run(rest)
        } catch {
            switch error {
            case .usage:
                Terminal.writeError("Usage: \(command.name) \(command.usage)\n    \(command.help)\n")
                return 2
            case .fourCharCode:
                Terminal.writeError(
                    "Error: four-character types must be exactly 4 characters long.\n"
                        + "(Use quotes and a trailing space for shorter codes, e.g. \"ftp \".)\n")
                return 2
            case .status(let status, let api):
                Terminal.writeError("security: \(api): \(status.status.message)\n")
                if ProcessEnvironment.current()["KEYCHAIN_DEBUG"] != nil { Terminal.writeError("  (\(status.message))\n") }
                return status.status.exitCode
            case .reported(let code):
                return code
            }
        }
    }

    /// Runs `security` with `arguments` (without the program name) and returns the exit status.
    public func run(_ arguments: [String]) -> Int32 {
        ProcessHardening.disableCoreDumps()
        var arguments = arguments
        // Global options: -q (quiet) and -v (echo the command); -h prints help. Interactive mode (-i) is not offered.
        // Beyond macOS: `--completions bash|zsh` prints a completion script and `--man` the manual page, both generated from
        // the command table and CommandFlags.
        var verbose = false
        while let first = arguments.first, first.hasPrefix("-"), first.count > 1 {
            arguments.removeFirst()
            switch first {
            case "-h":
                printHelp()
                return 0
            case "--version":  // beyond macOS: which release and build is installed
                Terminal.writeOut(BuildInfo.versionLine(for: "security"))
                return 0
            case "-q": break
            case "-v": verbose = true
            case "-l": break
            case "--completions":
                let shell = arguments.first ?? "bash"
                guard let script = Completions.script(for: shell, commands: commands.map { ($0.name, $0.help) }) else {
                    Terminal.writeError("security: no completions for \(shell) (bash, zsh)\n")
                    return 2
                }
                Terminal.writeOut(script)
                return 0
            case "--man":
                Terminal.writeOut(Completions.manPage(commands: commands.map { ($0.name, $0.usage, $0.help) }))
                return 0
            default:
                Terminal.writeError("security: unsupported option \(first)\n")
                return 2
            }
        }
        if verbose { Terminal.writeError("security \(arguments.joined(separator: " "))\n") }
        let status = runCommand(arguments)
        session.closeAll()
        return status
    }
}
