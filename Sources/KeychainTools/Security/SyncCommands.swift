#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore
import KeychainInterface

#if canImport(Glibc)
import Glibc
#endif

/// sync-setup, sync-now, sync-status and sync-leave (beyond macOS's `security`; docs/SYNC.md): a keychain's
/// synchronizable items on the user's other devices, end-to-end encrypted, through a server the user runs.
struct SyncCommands {
    let session: Session

    /// `sync-setup --server URL [-k keychain]`: a new sync account with this device as its first.
    func setUp(_ arguments: [String]) throws(CommandError) -> Int32 {
        let (server, authorities, keychainName, tokenFile) = try Self.server(arguments, api: "sync-setup",
                                                                             registrationToken: true)
        guard let server else { throw .usage }
        var token: SecretBytes?
        if let tokenFile {
            // From a file or standard input's first line (asked without echo on a terminal), never the command
            // line: the token is the server's door.
            if tokenFile == "-" {
                token = Terminal.hasTerminal && isatty(STDIN_FILENO) == 1
                    ? Terminal.readSecret(prompt: "registration token: ") : Terminal.readSecretFromStandardInput()
            } else if var bytes = FileManager.default.contents(atPath: tokenFile).map(Array.init) {
                while let last = bytes.last, [0x0a, 0x0d, 0x20, 0x09].contains(last) { bytes.removeLast() }
                token = SecretBytes(consuming: &bytes)
            }
            guard token != nil else {
                return Terminal.reportFailure(of: "sync-setup", .param("\(tokenFile): cannot read the registration token"))
            }
        }
        let status = try run(.setUp(server: server, certificateAuthorities: authorities, registrationToken: token),
                             keychainName, api: "sync-setup") { report in
            Terminal.writeOut("This keychain now syncs with \(report.server) (account \(report.account), "
                              + "this device \(report.device)).\n")
            if let key = report.recoveryKey, let text = key.unprotectedString() {
                Terminal.writeOut("""
                    Recovery key (shown once; keep it offline: it restores the account if every device is lost):
                      \(text)

                    """)
            }
        }
        guard status == 0 else { return status }
        return try run(.now, keychainName, api: "sync-setup") { Self.writeRound($0) }  // the first round
    }

    /// `sync-join --server URL [--no-wait] [-k keychain]`: ask to join an account as a new device; then wait
    /// (unless `--no-wait`) until a device that syncs lets this one in. `sync-join` alone waits again.
    func join(_ arguments: [String]) throws(CommandError) -> Int32 {
        let noWait = arguments.contains("--no-wait")
        let (server, authorities, keychainName, _) = try Self.server(arguments.filter { $0 != "--no-wait" }, api: "sync-join")
        if let server {
            let status = try run(.join(server: server, certificateAuthorities: authorities), keychainName,
                                 api: "sync-join") { report in
                if report.joined {
                    Terminal.writeOut("This keychain already syncs with \(report.server).\n")
                    return
                }
                Terminal.writeOut("""
                    On a device that already syncs this keychain, run:
                      security sync-approve \(report.joinCode ?? "?")
                    then allow the new device there if it shows the same words as this one.

                    """)
            }
            guard status == 0, !noWait else { return status }
        }
        // Waiting: each look is one short request, so nothing is held between them.
        var shownWords: [String] = []
        let deadline = Date().addingTimeInterval(10 * 60)
        while Date() < deadline {
            var joined = false
            let status = try run(.joinStatus, keychainName, api: "sync-join") { report in
                if !report.words.isEmpty, report.words != shownWords {
                    shownWords = report.words
                    Terminal.writeOut("Words: \(report.words.joined(separator: " "))\n")
                }
                if report.joined {
                    joined = true
                    Terminal.writeOut("This device now syncs with \(report.server) (\(report.devices) devices).\n")
                    Self.writeRound(report)
                }
            }
            if status != 0 || joined { return status }
            if noWait {
                Terminal.writeOut("Not approved yet.\n")
                return 1
            }
            usleep(2_000_000)
        }
        Terminal.writeError("security: sync-join: no device approved this one within 10 minutes\n")
        return 1
    }

    /// `sync-approve CODE [-k keychain]`: let the device that shows CODE in, once the words match (asked where
    /// this program cannot answer for the user).
    func approve(_ arguments: [String]) throws(CommandError) -> Int32 {
        var rest = arguments
        guard let code = rest.first, !code.hasPrefix("-") else { throw .usage }
        rest.removeFirst()
        let (_, keychainName) = try Self.options(rest, server: false)
        return try run(.approve(code: code), keychainName, api: "sync-approve") { report in
            Terminal.writeOut("The new device may sync now (words: \(report.words.joined(separator: " "))).\n")
        }
    }

    /// `sync-remove-device ID [-k keychain]`: another device leaves the account; a new epoch begins.
    func removeDevice(_ arguments: [String]) throws(CommandError) -> Int32 {
        var rest = arguments
        guard let id = rest.first, !id.hasPrefix("-") else { throw .usage }
        rest.removeFirst()
        let (_, keychainName) = try Self.options(rest, server: false)
        return try run(.removeDevice(id: id), keychainName, api: "sync-remove-device") { report in
            Terminal.writeOut("Removed \(id): the account is at epoch \(report.epoch), whose key it never had; "
                              + "\(report.devices) devices remain.\n")
            Self.writeRound(report)
        }
    }

    /// `sync-recover --server URL [-P -] [-k keychain]`: every device lost; this one joins with the recovery key
    /// (asked on the terminal, or the first line of standard input with `-P -`; never on the command line).
    func recover(_ arguments: [String]) throws(CommandError) -> Int32 {
        var fromStandardInput = false
        var rest: [String] = []
        var args = arguments[...]
        while let argument = args.popFirst() {
            if argument == "-P" {
                guard args.popFirst() == "-" else {
                    Terminal.writeError("security: sync-recover: the recovery key is never taken from the command line; -P - reads it from standard input\n")
                    return KeychainStatus.param.exitCode
                }
                fromStandardInput = true
            } else {
                rest.append(argument)
            }
        }
        let (server, authorities, keychainName, _) = try Self.server(rest, api: "sync-recover")
        guard let server else { throw .usage }
        let key: SecretBytes?
        if fromStandardInput {
            key = Terminal.readSecretFromStandardInput()
        } else if Terminal.hasTerminal {
            key = Terminal.readSecret(prompt: "recovery key: ")
        } else {
            Terminal.writeError("security: sync-recover: no terminal to ask the recovery key on: give it on standard input with -P -\n")
            return KeychainStatus.interactionNotAllowed.exitCode
        }
        guard let key, !key.isEmpty else { throw .usage }
        return try run(.recover(server: server, recoveryKey: key, certificateAuthorities: authorities), keychainName,
                       api: "sync-recover") { report in
            Terminal.writeOut("This device now syncs with \(report.server) (account \(report.account)).\n")
            Self.writeRound(report)
        }
    }

    /// `sync-devices [-k keychain]`: the account's devices and which device added each.
    func devices(_ arguments: [String]) throws(CommandError) -> Int32 {
        let (_, keychainName) = try Self.options(arguments, server: false)
        return try run(.status, keychainName, api: "sync-devices") { report in
            for device in report.deviceList {
                Terminal.writeOut("\(device.id)  added by \(device.approvedBy == device.id ? "itself (first device)" : device.approvedBy)"
                                  + (device.isThisDevice ? "  (this device)" : "") + "\n")
            }
        }
    }

    /// `sync-now [-k keychain]`: one round now.
    func now(_ arguments: [String]) throws(CommandError) -> Int32 {
        let (_, keychainName) = try Self.options(arguments, server: false)
        return try run(.now, keychainName, api: "sync-now") { Self.writeRound($0) }
    }

    /// `sync-status [-k keychain]`.
    func status(_ arguments: [String]) throws(CommandError) -> Int32 {
        let (_, keychainName) = try Self.options(arguments, server: false)
        return try run(.status, keychainName, api: "sync-status") { report in
            Terminal.writeOut("""
                server:   \(report.server)
                account:  \(report.account)
                device:   \(report.device)
                epoch:    \(report.epoch)
                items:    \(report.items)
                devices:  \(report.devices)
                last:     \(report.lastSync.map { Self.time($0) } ?? "never")

                """)
        }
    }

    /// `sync-leave [-k keychain]`: this device stops syncing the keychain; its items stay here.
    func leave(_ arguments: [String]) throws(CommandError) -> Int32 {
        let (_, keychainName) = try Self.options(arguments, server: false)
        return try run(.leave, keychainName, api: "sync-leave") { report in
            Terminal.writeOut("This keychain no longer syncs with \(report.server); its items stay here.\n")
        }
    }

    private func run(_ request: SyncRequest, _ keychainName: String?, api: String,
                     show: (SyncReport) -> Void) throws(CommandError) -> Int32 {
        do throws(KeychainError) {
            let keychain = try session.keychain(keychainName)
            show(try session.service.sync(request, keychain: keychain))
        } catch {
            return Terminal.reportFailure(of: api, error)
        }
        return 0
    }

    private static func options(_ arguments: [String], server allowed: Bool) throws(CommandError)
        -> (server: String?, keychain: String?)
    {
        let options = try options(arguments, server: allowed, caFile: false, registrationToken: false)
        return (options.server, options.keychain)
    }

    /// `--server URL`, `--ca-file PEM` (where a server is named), `--registration-token-file FILE` (sync-setup)
    /// and `-k keychain`.
    private static func options(_ arguments: [String], server allowed: Bool, caFile caAllowed: Bool,
                                registrationToken tokenAllowed: Bool)
        throws(CommandError) -> (server: String?, keychain: String?, caFile: String?, tokenFile: String?)
    {
        var server: String?, keychain: String?, caFile: String?, tokenFile: String?
        var args = arguments[...]
        while let argument = args.popFirst() {
            switch argument {
            case "--server" where allowed: guard let value = args.popFirst() else { throw .usage }; server = value
            case "--ca-file" where caAllowed: guard let value = args.popFirst() else { throw .usage }; caFile = value
            case "--registration-token-file" where tokenAllowed:
                guard let value = args.popFirst() else { throw .usage }; tokenFile = value
            case "-k": guard let value = args.popFirst() else { throw .usage }; keychain = value
            default:
                if allowed, argument.hasPrefix("--server=") {
                    server = String(argument.dropFirst(9))
                } else if caAllowed, argument.hasPrefix("--ca-file=") {
                    caFile = String(argument.dropFirst(10))
                } else {
                    throw .usage
                }
            }
        }
        return (server, keychain, caFile, tokenFile)
    }

    /// The server and what vouches for it: the `--ca-file`'s certificates (read here; keychaind checks and keeps
    /// them with the keychain's sync state), or nil for the system's roots.
    private static func server(_ arguments: [String], api: String, registrationToken: Bool = false)
        throws(CommandError) -> (server: String?, authorities: Data?, keychain: String?, tokenFile: String?)
    {
        let (server, keychain, caFile, tokenFile) = try options(arguments, server: true, caFile: true,
                                                                registrationToken: registrationToken)
        guard let caFile else { return (server, nil, keychain, tokenFile) }
        guard server != nil, let pem = FileManager.default.contents(atPath: caFile) else {
            let problem = server == nil ? "--ca-file goes with --server" : "\(caFile): cannot read the CA file"
            throw .reported(Terminal.reportFailure(of: api, .param(problem)))
        }
        return (server, pem, keychain, tokenFile)
    }

    private static func writeRound(_ report: SyncReport) {
        var line = "Synced: sent \(report.sent), received \(report.received), deleted here \(report.deleted)"
        if report.conflicts > 0 { line += ", \(report.conflicts) taken from the server (changed there first)" }
        Terminal.writeOut(line + "; \(report.items) items in sync.\n")
    }

    private static func time(_ seconds: Double) -> String {
        let date = Date(timeIntervalSince1970: seconds)
        return date.formatted(.iso8601)
    }
}
