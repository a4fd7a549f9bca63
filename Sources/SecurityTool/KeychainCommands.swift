import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage
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
            let url = session.locations.url(forKeychain: name)
            do {
                _ = try KeychainFile.create(at: url, password: password, configuration: session.configuration)
                let list = session.preferences.searchList()
                if !list.contains(url) { try session.preferences.setSearchList(list + [url]) }
            } catch {
                throw .status(error, api: "SecKeychainCreate \(name)")
            }
        }
        return 0
    }

    func delete(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, "")
        let urls = opts.operands.isEmpty
            ? [session.preferences.defaultKeychain()] : opts.operands.map { session.locations.url(forKeychain: $0) }
        for url in urls {
            do { try session.preferences.deleteKeychain(url) } catch {
                throw .status(error, api: "SecKeychainDelete \(url.lastPathComponent)")
            }
        }
        return 0
    }

    /// Without the daemon every command starts with its keychain locked; locking checks the keychain exists.
    func lock(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, CommandFlags.lockKeychain)
        guard opts.operands.count <= 1, !(opts.has("a") && !opts.operands.isEmpty) else { throw .usage }
        if opts.has("a") { return 0 }
        do { try session.keychain(opts.operands.first).lock() } catch {
            throw .status(error, api: "SecKeychainLock \(opts.operands.first ?? "<NULL>")")
        }
        return 0
    }

    func unlock(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, CommandFlags.unlockKeychain)
        guard opts.operands.count <= 1 else { throw .usage }
        let name = opts.operands.first
        do throws(KeychainError) {
            let file = try session.keychain(name)
            let password: SecretBytes?
            if let given = opts.value("p") {
                password = RawArguments.secret(given)
            } else if Terminal.hasTerminal || ProcessInfo.processInfo.environment["KEYCHAIN_PROMPTER"] == "pinentry" {
                password = try session.askUnlockPassword(label: name ?? "default")
                if password == nil { throw KeychainError.interactionNotAllowed() }
            } else {
                password = Terminal.readSecretFromStandardInput()
            }
            try file.unlock(password: password)
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
            let file = try session.keychain(opts.operands.first)
            let removed = try file.changePassword(old: old, new: new)
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
            try session.keychain(opts.operands.first).setSettings(
                .init(lockInterval: interval, lockOnSleep: opts.has("l")))
        } catch {
            throw .status(error, api: "SecKeychainSetSettings")
        }
        return 0
    }

    func showInfo(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, "")
        guard opts.operands.count <= 1 else { throw .usage }
        do {
            let settings = try session.keychain(opts.operands.first).settings()
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
            do { try session.preferences.setSearchList(names.map { session.locations.url(forKeychain: $0) }) } catch {
                throw .status(error, api: "SecKeychainSetSearchList")
            }
            return 0
        }
        for url in session.preferences.searchList() { Terminal.writeOut("    \"\(url.path)\"\n") }
        return 0
    }

    func defaultKeychain(_ arguments: [String], login: Bool) throws(CommandError) -> Int32 {
        let (set, names) = try parseDomainAndSet(arguments)
        if set {
            guard names.count <= 1 else { throw .usage }
            let url = names.first.map { session.locations.url(forKeychain: $0) }
            do {
                if login { try session.preferences.setLoginKeychain(url) } else { try session.preferences.setDefaultKeychain(url) }
            } catch {
                throw .status(error, api: login ? "SecKeychainSetLogin" : "SecKeychainSetDefault")
            }
            return 0
        }
        let url = login ? session.preferences.loginKeychain() : session.preferences.defaultKeychain()
        Terminal.writeOut("    \"\(url.path)\"\n")
        return 0
    }

    func dump(_ arguments: [String], json: Bool = false) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, CommandFlags.dump)
        var objects: [String] = []
        do {
            for file in try session.searchList(opts.operands) {
                if opts.has("d") { try session.unlockIfNeeded(file) }
                for found in try file.allItems(includingSecrets: opts.has("d")) where found.item.itemClass == .genericPassword || found.item.itemClass == .internetPassword {
                    if json {
                        objects.append(JSONOutput.item(found.item, keychain: file.url, secret: found.secret))
                        continue
                    }
                    Terminal.writeOut(AttributeDump.text(for: found.item, keychain: file.url))
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
