#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainInterface
import KeychainCore
import SecurityCommandLine

/// add-, find- and delete-generic-password / -internet-password.
struct ItemCommands {
    let session: Session

    enum Kind {
        case generic, internet
        var itemClass: ItemClass { self == .generic ? .genericPassword : .internetPassword }
    }

    // MARK: - add

    func add(_ kind: Kind, _ arguments: [String]) throws(CommandError) -> Int32 {
        var args = arguments
        let promptForPassword = args.last == "-w"
        if promptForPassword { args.removeLast() }
        let spec = kind == .generic ? CommandFlags.addGeneric : CommandFlags.addInternet
        let opts = try parse(args, spec: spec)
        guard opts.operands.count <= 1 else { throw .usage }
        var attributes: [AttributeName: QueryValue] = [:]
        let primary: AttributeName = kind == .generic ? .service : .server
        attributes[.account] = .string(opts.value("a") ?? "")
        attributes[primary] = .string(opts.value("s") ?? "")
        attributes[.label] = .string(opts.value("l") ?? opts.value("s") ?? "")
        if let v = opts.value("D") { attributes[.description] = .string(v) }
        if let v = opts.value("j") { attributes[.comment] = .string(v) }
        if kind == .generic, let v = opts.value("G") { attributes[.generic] = .string(v) }
        for (flag, name) in [("c", AttributeName.creator), ("C", .type)] {
            guard let v = opts.value(Character(flag)) else { continue }
            guard let n = AttributeDump.fourCharCode(v) else { throw .fourCharCode }
            attributes[name] = .int(n)
        }
        if kind == .internet {
            if let v = opts.value("d") { attributes[.securityDomain] = .string(v) }
            if let v = opts.value("p") { attributes[.path] = .string(v) }
            if let v = opts.value("P") {
                guard let port = Int64(v) else { throw .usage }
                attributes[.port] = .int(port)
            }
            if let v = opts.value("r") {
                guard v.utf8.count == 4 else { throw .fourCharCode }
                attributes[.protocol] = .string(v)
            }
            let atyp = opts.value("t") ?? "dflt"
            guard atyp.utf8.count == 4 else { throw .fourCharCode }
            attributes[.authenticationType] = .string(atyp)
        }
        var item = ItemQuery(operation: .add, itemClass: kind.itemClass)
        // Trusted applications, as on macOS: -A any program; -T app (repeatable) exactly these; -T "" none, so even
        // this command is asked next time; neither: the program that adds the item. Applied when the item is added.
        let trusted = opts.options.filter { $0.0 == "T" }.compactMap(\.1)
        if opts.has("A") {
            item.applicationAccess = .anyApplication
        } else if opts.has("T") {
            let cwd = FileManager.default.currentDirectoryPath
            item.applicationAccess = .applications(trusted.filter { !$0.isEmpty }.map {
                $0.hasPrefix("/") ? $0 : URL(fileURLWithPath: $0, relativeTo: URL(fileURLWithPath: cwd)).path
            })
        }
        let secret: SecretBytes
        if promptForPassword {
            guard let typed = Terminal.newPassword(prompt: "password data for new item: ",
                                                   retype: "retype password for new item: ") else { return 1 }
            secret = typed
        } else if let hex = opts.value("X") {
            guard let bytes = hexBytes(hex) else { throw .usage }
            var copy = bytes
            secret = SecretBytes(consuming: &copy)
        } else if let value = opts.value("w") ?? (kind == .generic ? opts.value("p") : nil) {
            secret = RawArguments.secret(value)
        } else {
            secret = SecretBytes(Data())
        }
        let keychainName = opts.operands.first
        let api = "SecKeychainItemCreateFromContent (\(keychainName ?? "<default>"))"
        do throws(KeychainError) {
            try item.set(coercing: attributes)
            item.valueData = secret
            let keychain = try session.keychain(keychainName)
            try session.unlockIfNeeded(keychain)
            if opts.has("U") {
                // Add, or update the duplicate (the same primary key) in the same transaction.
                var changes = ItemUpdate()
                changes.attributes = item.attributes
                try session.service.upsert(item, changes: changes, in: keychain)
            } else {
                try session.service.add(item, to: keychain)
            }
        } catch {
            throw .status(error, api: api)
        }
        return 0
    }

    // MARK: - find, delete

    func find(_ kind: Kind, _ arguments: [String], json: Bool = false) throws(CommandError) -> Int32 {
        let spec = kind == .generic ? CommandFlags.findGeneric : CommandFlags.findInternet
        let opts = try parse(arguments, spec: spec)
        let (keychain, found) = try firstMatch(kind, opts, wantSecret: opts.has("g") || opts.has("w"))
        let secret = found.secret.map { s in s.withUnsafeBytes { [UInt8]($0) } } ?? []
        if opts.has("w") {
            StandardStreams.write(BufferPrinter.passwordForW(secret) + [0x0a], to: 1)
            return 0
        }
        if json {
            Terminal.writeOut(JSONOutput.item(found.item, keychain: keychain, secret: opts.has("g") ? found.secret : nil) + "\n")
            return 0
        }
        Terminal.writeOut(AttributeDump.text(for: found.item, keychain: keychain))
        if opts.has("g") { Terminal.writeError("password: \(BufferPrinter.format(secret))\n") }
        return 0
    }

    func delete(_ kind: Kind, _ arguments: [String]) throws(CommandError) -> Int32 {
        let spec = kind == .generic ? CommandFlags.deleteGeneric : CommandFlags.deleteInternet
        let opts = try parse(arguments, spec: spec)
        guard !opts.options.isEmpty else { throw .usage }
        let (keychain, found) = try firstMatch(kind, opts, wantSecret: false)
        Terminal.writeOut(AttributeDump.text(for: found.item, keychain: keychain))
        do {
            try session.service.delete(.item(found.item.persistentReference, for: .delete), in: keychain)
        } catch {
            throw .status(error, api: "SecKeychainItemDelete")
        }
        Terminal.writeError("password has been deleted.\n")
        return 0
    }

    /// The first item in search-list order that matches the options.
    private func firstMatch(_ kind: Kind, _ opts: Getopt, wantSecret: Bool) throws(CommandError)
        -> (KeychainReference, FoundItem)
    {
        var criteria: [AttributeName: QueryValue] = [:]
        let primary: AttributeName = kind == .generic ? .service : .server
        if opts.has("a") && opts.has("s") {
            // macOS uses only these two criteria when both are given.
            criteria[.account] = .string(opts.value("a")!)
            criteria[primary] = .string(opts.value("s")!)
        } else {
            var map: [(Character, AttributeName)] = [("a", .account), ("s", primary), ("l", .label), ("D", .description),
                                                     ("j", .comment)]
            if kind == .generic { map.append(("G", .generic)) } else {
                map += [("d", .securityDomain), ("p", .path), ("t", .authenticationType), ("r", .protocol)]
                if let port = opts.value("P") {
                    guard let n = Int64(port) else { throw .usage }
                    criteria[.port] = .int(n)
                }
            }
            for (flag, name) in map { if let v = opts.value(flag) { criteria[name] = .string(v) } }
            for (flag, name) in [("c", AttributeName.creator), ("C", .type)] {
                guard let v = opts.value(Character(flag)) else { continue }
                guard let n = AttributeDump.fourCharCode(v) else { throw .fourCharCode }
                criteria[name] = .int(n)
            }
        }
        var query = ItemQuery.search(kind.itemClass, returning: wantSecret ? [.attributes, .data] : .attributes)
        query.sync = .any
        do throws(KeychainError) {
            try query.set(coercing: criteria)  // bad input is an error before any keychain is opened
            // The search list walked where the keychains are (one round trip to keychaind), unless it meets a
            // password to ask for here: then walked from here.
            if opts.operands.isEmpty, case .found(let keychain, let items) = try session.service.firstMatch(query),
               let found = items.first
            {
                return (keychain, found)
            }
            var lastError: KeychainError?  // made only when it is thrown: a found item needs no error's words
            for keychain in try session.searchList(opts.operands) {
                do {
                    try session.unlockIfNeeded(keychain)
                    if let found = try session.service.search(query, in: keychain).first { return (keychain, found) }
                } catch KeychainStatus.itemNotFound {
                    continue
                } catch {
                    lastError = error
                }
            }
            throw lastError ?? KeychainError.itemNotFound()
        } catch {
            throw .status(error, api: "SecKeychainSearchCopyNext")
        }
    }

    private func parse(_ arguments: [String], spec: String) throws(CommandError) -> Getopt {
        do { return try Getopt(arguments, spec: spec) } catch { throw .usage }
    }

    private func hexBytes(_ hex: String) -> [UInt8]? {
        let chars = Array(hex.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < chars.count {
            guard let b = UInt8(String(decoding: chars[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
            out.append(b)
            i += 2
        }
        return out
    }
}

/// How a command ends when it does not succeed.
enum CommandError: Error {
    /// Wrong arguments: print the usage, exit 2.
    case usage
    /// A four-character code of the wrong length.
    case fourCharCode
    /// A keychain call failed: `security: <api>: <message>`, exit with the status's low byte.
    case status(KeychainError, api: String)
    /// Told already (the command's own words, as `Terminal.reportFailure` writes them): exit with this code.
    case reported(Int32)
}
