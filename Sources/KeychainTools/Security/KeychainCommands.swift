#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainInterface
import KeychainCore
import SecurityCommandLine

/// create-, delete-, lock-, unlock-keychain; settings; password; search list and default; dump.
struct KeychainCommands {
    let session: Session

    func create(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, CommandFlags.createKeychain)
        guard !opts.operands.isEmpty else { throw .usage }
        for name in opts.operands {
            let password: SecretBytes?
            if let given = opts.value("p") {
                password = RawArguments.secret(given)
            } else {
                password = Terminal.newPassword(
                    prompt: "password for new keychain: ", retype: "retype password for new keychain: ")
                if password == nil { return 1 }
            }
            let keychain = session.service.resolve(name)
            do {
                try session.service.createKeychain(keychain, password: password, settings: .appleDefault)
                let list = session.service.searchList()
                if !list.contains(keychain) { try session.service.setSearchList(list + [keychain]) }
            } catch {
                throw .status(error, api: "SecKeychainCreate \(name)")
            }
        }
        return 0
    }

    func delete(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, "")
        let keychains = opts.operands.isEmpty
            ? [session.service.defaultKeychain()] : opts.operands.map { session.service.resolve($0) }
        for keychain in keychains {
            do { try session.service.deleteKeychain(keychain) } catch {
                throw .status(error, api: "SecKeychainDelete \(keychain.fileName)")
            }
        }
        return 0
    }

    /// Without the daemon every command starts with its keychain locked; locking checks the keychain exists.
    func lock(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, CommandFlags.lockKeychain)
        guard opts.operands.count <= 1, !(opts.has("a") && !opts.operands.isEmpty) else { throw .usage }
        if opts.has("a") { return 0 }
        do { try session.service.lock(session.keychain(opts.operands.first)) } catch {
            throw .status(error, api: "SecKeychainLock \(opts.operands.first ?? "<NULL>")")
        }
        return 0
    }

    func unlock(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, CommandFlags.unlockKeychain)
        guard opts.operands.count <= 1 else { throw .usage }
        let name = opts.operands.first
        do throws(KeychainError) {
            let keychain = try session.keychain(name)
            let password: SecretBytes?
            if let given = opts.value("p") {
                password = RawArguments.secret(given)
            } else if Terminal.hasTerminal || ProcessEnvironment.current()["KEYCHAIN_PROMPTER"] == "pinentry" {
                password = try session.askUnlockPassword(label: name ?? "default")
                if password == nil { throw KeychainError.interactionNotAllowed() }
            } else {
                password = Terminal.readSecretFromStandardInput()
            }
            try session.service.unlock(keychain, password: password)
        } catch {
            throw .status(error, api: "SecKeychainUnlock \(name ?? "<NULL>")")
        }
        return 0
    }

    func setPassword(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, CommandFlags.setPassword)
        guard opts.operands.count <= 1 else { throw .usage }
        let old = opts.value("o").map(RawArguments.secret)
            ?? (Terminal.hasTerminal ? Terminal.readSecret(prompt: "Old Password: ") : Terminal.readSecretFromStandardInput())
        let new = opts.value("p").map(RawArguments.secret)
            ?? Terminal.newPassword(prompt: "New Password: ", retype: "Retype New Password: ")
        guard let new else { return 1 }
        do {
            let keychain = try session.keychain(opts.operands.first)
            let removed = try session.service.changePassword(of: keychain, old: old, new: new)
            if removed > 0 {
                Terminal.writeError("security: \(removed) WhenPasscodeSet item(s) deleted with the password.\n")
            }
        } catch {
            throw .status(error, api: "SecKeychainChangePassword")
        }
        return 0
    }

    func setSettings(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, CommandFlags.setSettings)
        guard opts.operands.count <= 1 else { throw .usage }
        var interval: Int?
        if let t = opts.value("t") {
            guard let n = Int(t), n >= 0 else { throw .usage }
            interval = n
        }
        do {
            try session.service.setSettings(
                KeychainSettings(lockInterval: interval, lockOnSleep: opts.has("l")),
                of: session.keychain(opts.operands.first))
        } catch {
            throw .status(error, api: "SecKeychainSetSettings")
        }
        return 0
    }

    func showInfo(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, "")
        guard opts.operands.count <= 1 else { throw .usage }
        do {
            let settings = try session.service.settings(of: session.keychain(opts.operands.first))
            var line = "Keychain \"\(opts.operands.first ?? "<NULL>")\""
            if settings.lockOnSleep { line += " lock-on-sleep" }
            line += settings.lockInterval.map { " timeout=\($0)s" } ?? " no-timeout"
            Terminal.writeError(line + "\n")
        } catch {
            throw .status(error, api: "SecKeychainCopySettings")
        }
        return 0
    }

    func listKeychains(_ arguments: [String]) throws(CommandError) -> Int32 {
        let (set, names) = try parseDomainAndSet(arguments)
        if set {
            do { try session.service.setSearchList(names.map { session.service.resolve($0) }) } catch {
                throw .status(error, api: "SecKeychainSetSearchList")
            }
            return 0
        }
        for keychain in session.service.searchList() { Terminal.writeOut("    \"\(keychain.path)\"\n") }
        return 0
    }

    func defaultKeychain(_ arguments: [String], login: Bool) throws(CommandError) -> Int32 {
        let (set, names) = try parseDomainAndSet(arguments)
        if set {
            guard names.count <= 1 else { throw .usage }
            let keychain = names.first.map { session.service.resolve($0) }
            do {
                if login { try session.service.setLoginKeychain(keychain) } else { try session.service.setDefaultKeychain(keychain) }
            } catch {
                throw .status(error, api: login ? "SecKeychainSetLogin" : "SecKeychainSetDefault")
            }
            return 0
        }
        let keychain = login ? session.service.loginKeychain() : session.service.defaultKeychain()
        Terminal.writeOut("    \"\(keychain.path)\"\n")
        return 0
    }

    func dump(_ arguments: [String], json: Bool = false) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, CommandFlags.dump)
        var objects: [String] = []
        do {
            for keychain in try session.searchList(opts.operands) {
                if opts.has("d") { try session.unlockIfNeeded(keychain) }
                for found in try session.service.allItems(in: keychain, includingSecrets: opts.has("d")) where found.item.itemClass == .genericPassword || found.item.itemClass == .internetPassword {
                    if json {
                        objects.append(JSONOutput.item(found.item, keychain: keychain, secret: found.secret))
                        continue
                    }
                    Terminal.writeOut(AttributeDump.text(for: found.item, keychain: keychain))
                    if opts.has("a") { Terminal.writeOut(AttributeDump.access(of: found.item)) }
                    if let secret = found.secret {
                        Terminal.writeOut("data:\n\(BufferPrinter.format(secret.withUnsafeBytes { [UInt8]($0) }))\n")
                    }
                }
            }
        } catch {
            throw .status(error, api: "SecKeychainItemCopyContent")
        }
        if json { Terminal.writeOut("[" + objects.joined(separator: ",") + "]\n") }
        return 0
    }

    /// `[-d user|system|common|dynamic] [-s [keychain…]]`.
    private func parseDomainAndSet(_ arguments: [String]) throws(CommandError) -> (Bool, [String]) {
        var args = arguments
        if args.first == "-d" {
            guard args.count >= 2, ["user", "system", "common", "dynamic"].contains(args[1]) else { throw .usage }
            args.removeFirst(2)
        }
        if args.first == "-s" { return (true, Array(args.dropFirst())) }
        guard args.isEmpty else { throw .usage }
        return (false, [])
    }

    private func parse(_ arguments: [String], _ spec: String) throws(CommandError) -> Getopt {
        do { return try Getopt(arguments, spec: spec) } catch { throw .usage }
    }
}
