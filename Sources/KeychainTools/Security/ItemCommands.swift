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
        var attributes: [String: QueryValue] = ["class": .string(kind.itemClass.rawValue)]
        let primary = kind == .generic ? "svce" : "srvr"
        attributes["acct"] = .string(opts.value("a") ?? "")
        attributes[primary] = .string(opts.value("s") ?? "")
        attributes["labl"] = .string(opts.value("l") ?? opts.value("s") ?? "")
        if let v = opts.value("D") { attributes["desc"] = .string(v) }
        if let v = opts.value("j") { attributes["icmt"] = .string(v) }
        if kind == .generic, let v = opts.value("G") { attributes["gena"] = .string(v) }
        for (flag, code) in [("c", "crtr"), ("C", "type")] {
            guard let v = opts.value(Character(flag)) else { continue }
            guard let n = AttributeDump.fourCharCode(v) else { throw .fourCharCode }
            attributes[code] = .int(n)
        }
        if kind == .internet {
            if let v = opts.value("d") { attributes["sdmn"] = .string(v) }
            if let v = opts.value("p") { attributes["path"] = .string(v) }
            if let v = opts.value("P") {
                guard let port = Int64(v) else { throw .usage }
                attributes["port"] = .int(port)
            }
            if let v = opts.value("r") {
                guard v.utf8.count == 4 else { throw .fourCharCode }
                attributes["ptcl"] = .string(v)
            }
            let atyp = opts.value("t") ?? "dflt"
            guard atyp.utf8.count == 4 else { throw .fourCharCode }
            attributes["atyp"] = .string(atyp)
        }
        // Trusted applications, as on macOS: -A any program; -T app (repeatable) exactly these; -T "" none, so even
        // this command is asked next time; neither: the program that adds the item. Applied when the item is added.
        let trusted = opts.options.filter { $0.0 == "T" }.compactMap(\.1)
        if opts.has("A") {
            attributes["acls"] = .bool(true)
        } else if opts.has("T") {
            let cwd = FileManager.default.currentDirectoryPath
            attributes["acls"] = .array(trusted.filter { !$0.isEmpty }.map {
                .string($0.hasPrefix("/") ? $0 : URL(fileURLWithPath: $0, relativeTo: URL(fileURLWithPath: cwd)).path)
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
            let keychain = try session.keychain(keychainName)
            try session.unlockIfNeeded(keychain)
            if opts.has("U") {
                // Add, or update the duplicate (the same primary key) in the same transaction.
                var changes = attributes
                changes.removeValue(forKey: "class")
                changes.removeValue(forKey: "acls")
                try session.service.upsert(attributes, secret: secret, attributes: changes, in: keychain)
            } else {
                var dictionary = attributes
                dictionary["v_Data"] = .secret(secret)
                try session.service.add(dictionary, to: keychain)
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
            try session.service.delete(["v_PersistentRef": .data(found.item.persistentReference.data)], in: keychain)
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
        var query: [String: QueryValue] = [
            "class": .string(kind.itemClass.rawValue), "r_Attributes": true, "sync": "syna",
        ]
        if wantSecret { query["r_Data"] = true }
        let primary = kind == .generic ? "svce" : "srvr"
        if opts.has("a") && opts.has("s") {
            // macOS uses only these two criteria when both are given.
            query["acct"] = .string(opts.value("a")!)
            query[primary] = .string(opts.value("s")!)
        } else {
            var map: [(Character, String)] = [("a", "acct"), ("s", primary), ("l", "labl"), ("D", "desc"), ("j", "icmt")]
            if kind == .generic { map.append(("G", "gena")) } else {
                map += [("d", "sdmn"), ("p", "path"), ("t", "atyp"), ("r", "ptcl")]
                if let port = opts.value("P") {
                    guard let n = Int64(port) else { throw .usage }
                    query["port"] = .int(n)
                }
            }
            for (flag, code) in map { if let v = opts.value(flag) { query[code] = .string(v) } }
            for (flag, code) in [("c", "crtr"), ("C", "type")] {
                guard let v = opts.value(Character(flag)) else { continue }
                guard let n = AttributeDump.fourCharCode(v) else { throw .fourCharCode }
                query[code] = .int(n)
            }
        }
        do throws(KeychainError) {
            _ = try QueryParser.parse(query, for: .search)  // bad input is an error before any keychain is opened
            var lastError = KeychainError.itemNotFound()
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
            throw lastError
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
}
