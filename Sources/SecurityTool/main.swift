import Foundation
import KeychainClient
import KeychainCore
import SecurityCommandLine

// `security`: the macOS keychain command on Linux (semantics §8). Exit status = the failing status's low byte.

struct Command {
    let name: String
    let usage: String
    let help: String
    let run: ([String]) throws(CommandError) -> Int32
}

ProcessHardening.disableCoreDumps()
let session = Session()
/// `--json` was given to a command that supports it.
var wantsJSON = false
let items = ItemCommands(session: session)
let keychains = KeychainCommands(session: session)

// Table order decides abbreviations: the first command whose name starts with the typed word runs.
let commands: [Command] = [
    Command(name: "help", usage: "", help: "Show all commands, or show usage for a command.") { _ throws(CommandError) in
        printHelp()
        return 0
    },
    Command(name: "list-keychains", usage: "[-d user|system|common|dynamic] [-s [keychain...]]",
            help: "Display or manipulate the keychain search list.", run: keychains.listKeychains),
    Command(name: "default-keychain", usage: "[-d user|system|common|dynamic] [-s [keychain]]",
            help: "Display or set the default keychain.") { args throws(CommandError) in
        try keychains.defaultKeychain(args, login: false)
    },
    Command(name: "login-keychain", usage: "[-d user|system|common|dynamic] [-s [keychain]]",
            help: "Display or set the login keychain.") { args throws(CommandError) in
        try keychains.defaultKeychain(args, login: true)
    },
    Command(name: "create-keychain", usage: "[-P] [-p password] [keychains...]",
            help: "Create keychains and add them to the search list.", run: keychains.create),
    Command(name: "delete-keychain", usage: "[keychains...]",
            help: "Delete keychains and remove them from the search list.", run: keychains.delete),
    Command(name: "lock-keychain", usage: "[-a | keychain]", help: "Lock the specified keychain.", run: keychains.lock),
    Command(name: "unlock-keychain", usage: "[-u] [-p password] [keychain]",
            help: "Unlock the specified keychain.", run: keychains.unlock),
    Command(name: "set-keychain-settings", usage: "[-lu] [-t timeout] [keychain]",
            help: "Set settings for a keychain.", run: keychains.setSettings),
    Command(name: "set-keychain-password", usage: "[-o oldPassword] [-p newPassword] [keychain]",
            help: "Set password for a keychain.", run: keychains.setPassword),
    Command(name: "show-keychain-info", usage: "[keychain]", help: "Show the settings for keychain.",
            run: keychains.showInfo),
    Command(name: "dump-keychain", usage: "[-adir] [keychain...]", help: "Dump the contents of one or more keychains.") {
        args throws(CommandError) in try keychains.dump(args, json: wantsJSON)
    },
    Command(name: "add-generic-password",
            usage: "[-a account] [-s service] [-w password] [options...] [-A|-T appPath] [keychain]",
            help: "Add a generic password item.") { args throws(CommandError) in try items.add(.generic, args) },
    Command(name: "add-internet-password",
            usage: "[-a account] [-s server] [-w password] [options...] [-A|-T appPath] [keychain]",
            help: "Add an internet password item.") { args throws(CommandError) in try items.add(.internet, args) },
    Command(name: "find-generic-password",
            usage: "[-a account] [-s service] [options...] [-g] [-w] [keychain...]",
            help: "Find a generic password item.") { args throws(CommandError) in try items.find(.generic, args, json: wantsJSON) },
    Command(name: "find-internet-password",
            usage: "[-a account] [-s server] [options...] [-g] [-w] [keychain...]",
            help: "Find an internet password item.") { args throws(CommandError) in try items.find(.internet, args, json: wantsJSON) },
    Command(name: "delete-generic-password", usage: "[-a account] [-s service] [options...] [keychain...]",
            help: "Delete a generic password item.") { args throws(CommandError) in try items.delete(.generic, args) },
    Command(name: "delete-internet-password", usage: "[-a account] [-s server] [options...] [keychain...]",
            help: "Delete an internet password item.") { args throws(CommandError) in try items.delete(.internet, args) },
    Command(name: "error", usage: "[<error code>...]", help: "Display a descriptive message for the given error code(s).") {
        args throws(CommandError) in
        guard !args.isEmpty else { throw .usage }
        for arg in args {
            let code = Int32(arg) ?? Int32(truncatingIfNeeded: Int64(arg.dropFirst(2), radix: 16) ?? 0)
            Terminal.writeOut(String(format: "Error: 0x%08X %d %@\n", UInt32(bitPattern: code), code,
                                     KeychainStatus(code).message))
        }
        return 1
    },
]

@MainActor
func printHelp() {
    Terminal.writeOut("Usage: security [-h] [-i] [-l] [-p prompt] [-q] [-v] [command] [opt ...]\n")
    Terminal.writeOut("security commands are:\n")
    for command in commands {
        Terminal.writeOut("    " + command.name.padding(toLength: 29, withPad: " ", startingAt: 0) + command.help + "\n")
    }
}

@MainActor
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
            if ProcessInfo.processInfo.environment["KEYCHAIN_DEBUG"] != nil { Terminal.writeError("  (\(status.message))\n") }
            return status.status.exitCode
        }
    }
}

// Global options: -q (quiet) and -v (echo the command); -h prints help. Interactive mode (-i) is not offered.
// Beyond macOS: `--completions bash|zsh` prints a completion script and `--man` the manual page, both generated from
// the command table and CommandFlags.
var arguments = Array(CommandLine.arguments.dropFirst())
var verbose = false
while let first = arguments.first, first.hasPrefix("-"), first.count > 1 {
    arguments.removeFirst()
    switch first {
    case "-h":
        printHelp()
        exit(0)
    case "-q": break
    case "-v": verbose = true
    case "-l": break
    case "--completions":
        let shell = arguments.first ?? "bash"
        guard let script = Completions.script(for: shell, commands: commands.map { ($0.name, $0.help) }) else {
            Terminal.writeError("security: no completions for \(shell) (bash, zsh)\n")
            exit(2)
        }
        Terminal.writeOut(script)
        exit(0)
    case "--man":
        Terminal.writeOut(Completions.manPage(commands: commands.map { ($0.name, $0.usage, $0.help) }))
        exit(0)
    default:
        Terminal.writeError("security: unsupported option \(first)\n")
        exit(2)
    }
}
if verbose { Terminal.writeError("security \(arguments.joined(separator: " "))\n") }
let status = runCommand(arguments)
session.closeAll()
exit(status)
