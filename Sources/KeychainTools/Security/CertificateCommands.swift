#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore
import KeychainInterface
import SwiftASN1
import SecurityCommandLine

#if canImport(Glibc)
import Glibc
#endif

/// import, export, add-certificates, find-certificate, find-identity, delete-certificate, delete-identity.
/// Files are opened and written by the keychain service, where the keys live (keychaind when it serves): this
/// program only reads and writes the bytes, so it stays free of certificate and cipher code.
struct CertificateCommands {
    let session: Session

    // MARK: - import, add-certificates

    func importFile(_ arguments: [String]) throws(CommandError) -> Int32 {
        // The file comes first (`import file -k …`), as macOS reads it; after the options works too.
        var rest = arguments
        var named: String?
        if let first = rest.first, !first.hasPrefix("-") { named = rest.removeFirst() }
        let opts = try parse(rest, spec: CommandFlags.importItems)
        guard let path = named ?? opts.operands.first, opts.operands.count == (named == nil ? 1 : 0) else { throw .usage }
        if opts.has("a") {
            Terminal.writeError("security: import: extended attributes (-a) are not supported\n")
            return 1
        }
        var format: ItemFileFormat?
        if let name = opts.value("f") {
            guard let known = ItemFileFormat(rawValue: name) else {
                throw .status(KeychainError(.unsupportedFormat, name), api: "SecKeychainItemImport")
            }
            format = known
        }
        if let type = opts.value("t"), !["pub", "priv", "session", "cert", "agg"].contains(type) { throw .usage }
        guard let bytes = FileManager.default.contents(atPath: path) else {
            Terminal.writeError("security: \(path): cannot read the file\n")
            return 1
        }
        var attributes: [String: QueryValue] = [:]
        if opts.has("A") {
            attributes["acls"] = .bool(true)
        } else if opts.has("T") {
            attributes["acls"] = .array(opts.options.filter { $0.0 == "T" }.compactMap(\.1).filter { !$0.isEmpty }.map {
                .string(Self.absolute($0))
            })
        }
        let privateKeyAttributes: [String: QueryValue] = opts.has("x") ? ["extr": .bool(false), "sens": .bool(true)] : [:]
        let fileName = URL(fileURLWithPath: path).lastPathComponent
        var passphrase = opts.value("P").map(RawArguments.secret)
        let isPKCS12 = format == .pkcs12 || ["p12", "pfx"].contains(URL(fileURLWithPath: path).pathExtension.lowercased())
        if passphrase == nil, isPKCS12, Terminal.hasTerminal {
            passphrase = Terminal.readSecret(prompt: "Enter the passphrase for \"\(fileName)\": ")
        }
        do throws(KeychainError) {
            let keychain = try session.keychain(opts.value("k"))
            try session.unlockIfNeeded(keychain)
            var attempts = 0
            while true {
                let request = ItemImport(file: SecretBytes(bytes), format: format, passphrase: passphrase,
                                         attributes: attributes, privateKeyAttributes: privateKeyAttributes)
                do throws(KeychainError) {
                    let stored = try session.service.importItems(request, into: keychain)
                    Self.reportImport(stored)
                    return 0
                } catch where [.authFailed, .passphraseRequired].contains(error.status) && Terminal.hasTerminal {
                    // Asked again, up to three times in all, as macOS does.
                    attempts += 1
                    guard attempts < 3 || error.status == .passphraseRequired && attempts < 4 else { throw error }
                    passphrase = Terminal.readSecret(prompt: "Enter the passphrase for \"\(fileName)\": ")
                    guard passphrase != nil else { throw error }
                }
            }
        } catch {
            Terminal.writeError("security: SecKeychainItemImport: \(error.status.message)\n")
            return 1
        }
    }

    /// `N identities imported.`, `N keys imported.`, `N certificates imported.` (macOS's wording); a certificate
    /// that came with its private key counts as the identity only.
    private static func reportImport(_ stored: [FoundItem]) {
        let certificateHashes = Set(stored.filter { $0.item.itemClass == .certificate }.compactMap { $0.item.attributes["pkhh"]?.dataValue })
        let privateKeys = stored.filter { $0.item.itemClass == .key && $0.item.attributes["kcls"]?.numberValue == 1 }
        let identityHashes = Set(privateKeys.compactMap { $0.item.attributes["klbl"]?.dataValue }).intersection(certificateHashes)
        let keys = stored.filter { $0.item.itemClass == .key }.filter {
            guard let label = $0.item.attributes["klbl"]?.dataValue else { return true }
            return !identityHashes.contains(label)
        }.count
        let certificates = stored.filter { $0.item.itemClass == .certificate }.filter {
            guard let hash = $0.item.attributes["pkhh"]?.dataValue else { return true }
            return !identityHashes.contains(hash)
        }.count
        for (count, one, many) in [(identityHashes.count, "identity", "identities"), (keys, "key", "keys"),
                                   (certificates, "certificate", "certificates")] where count > 0 {
            Terminal.writeOut("\(count) \(count == 1 ? one : many) imported.\n")
        }
    }

    /// Each file a certificate (DER or PEM); the next file after an error; exit 1 if any failed.
    func addCertificates(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, spec: CommandFlags.addCertificates)
        guard !opts.operands.isEmpty else { throw .usage }
        var failed = false
        let keychain: KeychainReference
        do throws(KeychainError) {
            keychain = try session.keychain(opts.value("k"))
            try session.unlockIfNeeded(keychain)
        } catch {
            throw .status(error, api: "SecKeychainOpen")
        }
        for path in opts.operands {
            guard let bytes = FileManager.default.contents(atPath: path) else {
                Terminal.writeError("security: \(path): cannot read the file\n")
                failed = true
                continue
            }
            let isPEM = String(decoding: bytes.prefix(4096), as: UTF8.self).contains("-----BEGIN ")
            let request = ItemImport(file: SecretBytes(bytes), format: isPEM ? .pemSequence : .x509, passphrase: nil)
            do throws(KeychainError) {
                let stored = try session.service.importItems(request, into: keychain)
                if stored.contains(where: { $0.item.itemClass != .certificate }) {
                    failed = true  // only certificates belong here; what else came in was stored, say so
                    Terminal.writeError("security: \(path): holds more than certificates\n")
                }
            } catch {
                failed = true
                if error.status == .duplicateItem {
                    Terminal.writeError("security: \(path): already in \(opts.value("k") ?? "default keychain")\n")
                } else {
                    Terminal.writeError("security: \(path): \(error.status.message)\n")
                }
            }
        }
        return failed ? 1 : 0
    }

    // MARK: - export

    func export(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, spec: CommandFlags.export)
        guard opts.operands.isEmpty else { throw .usage }
        let selection: ItemExport.Selection
        switch opts.value("t") ?? "all" {
        case "certs": selection = .certificates
        case "identities": selection = .identities
        case "all": selection = .all
        case "allKeys", "pubKeys", "privKeys":
            throw .status(KeychainError(.unsupportedFormat, "keys are exported inside identities"), api: "SecKeychainItemExport")
        default: throw .usage
        }
        var format: ItemFileFormat
        if let name = opts.value("f") {
            guard let known = ItemFileFormat(rawValue: name) else {
                throw .status(KeychainError(.unsupportedFormat, name), api: "SecKeychainItemExport")
            }
            format = known
        } else {
            format = selection == .certificates ? .pemSequence : .pkcs12
        }
        var passphrase = opts.value("P").map(RawArguments.secret)
        if format == .pkcs12, passphrase == nil, Terminal.hasTerminal {
            guard let typed = Terminal.newPassword(prompt: "Enter a passphrase for the export: ",
                                                   retype: "Retype the passphrase: ") else { return 1 }
            passphrase = typed
        }
        let file: SecretBytes
        do throws(KeychainError) {
            let keychain = try session.keychain(opts.value("k"))
            try session.unlockIfNeeded(keychain)
            file = try session.service.exportItems(ItemExport(selection: selection, format: format, passphrase: passphrase),
                                                   from: keychain)
        } catch {
            throw .status(error, api: "SecKeychainItemExport")
        }
        var bytes = file.withUnsafeBytes { [UInt8]($0) }
        if opts.has("p"), format != .pemSequence {
            let label = format == .pkcs12 ? "PKCS12" : "CERTIFICATE"
            bytes = Array(Self.pem(Data(bytes), label: label).utf8)
        }
        if let output = opts.value("o") {
            let descriptor = open(output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            guard descriptor >= 0 else {
                Terminal.writeError("security: \(output): cannot write the file\n")
                return 1
            }
            StandardStreams.write(bytes, to: descriptor)
            close(descriptor)
        } else {
            StandardStreams.write(bytes, to: 1)
        }
        return 0
    }

    // MARK: - find-certificate, find-identity

    func findCertificate(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, spec: CommandFlags.findCertificate)
        let matches = try certificates(in: opts.operands, name: opts.value("c"), email: opts.value("e"))
        guard !matches.isEmpty else {
            if opts.has("a") { return 0 }
            throw .status(.itemNotFound(), api: "SecKeychainSearchCopyNext")
        }
        for (keychain, record) in opts.has("a") ? matches : [matches[0]] {
            if opts.has("Z") {
                Terminal.writeOut("SHA-256 hash: \(Self.hex(record.sha256))\nSHA-1 hash: \(Self.hex(record.sha1))\n")
            }
            if opts.has("m") { Terminal.writeOut("email addresses: \(record.emailAddresses.joined(separator: ", "))\n") }
            if opts.has("p") {
                let der = record.item.secret.map { s in s.withUnsafeBytes { Data($0) } } ?? Data()
                Terminal.writeOut(Self.pem(der, label: "CERTIFICATE"))
            } else {
                Terminal.writeOut(AttributeDump.text(for: record.item.item, keychain: keychain))
            }
        }
        return 0
    }

    func findIdentity(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, spec: CommandFlags.findIdentity)
        let policyNames = ["ssl-client": "SSL (client)", "ssl-server": "SSL (server)", "smime": "S/MIME", "eap": "EAP",
                           "ipsec": "IPsec", "ichat": "iChat", "codesigning": "Code Signing", "basic": "X.509 Basic",
                           "sys-default": "X.509 Basic", "sys-kerberos-kdc": "X.509 Basic", "appleID": "AppleID Sharing",
                           "macappstore": "Mac App Store Receipt"]
        var policies = opts.options.filter { $0.0 == "p" }.compactMap(\.1)
        for policy in policies where policyNames[policy] == nil { throw .usage }
        if policies.isEmpty { policies = ["basic"] }
        let identities = try certificates(in: opts.operands, name: nil, email: opts.value("s")).filter { $0.1.hasPrivateKey }
        let now = Date()
        // "Valid" here: within its validity period. There is no trust evaluation (no anchors, no revocation).
        func problem(_ record: CertificateRecord) -> String? {
            if let notAfter = record.notAfter, notAfter < now { return "CSSMERR_TP_CERT_EXPIRED" }
            if let notBefore = record.notBefore, notBefore > now { return "CSSMERR_TP_CERT_NOT_VALID_YET" }
            return nil
        }
        func line(_ index: Int, _ record: CertificateRecord) -> String {
            let name = record.subjectSummary ?? record.item.item.attributes["labl"]?.stringValue ?? "<unknown>"
            return "\(String(repeating: " ", count: max(0, 3 - String(index).count)))\(index)) \(Self.hex(record.sha1)) \"\(name)\""
                + (problem(record).map { " (\($0))" } ?? "") + "\n"
        }
        var out = ""
        for policy in policies {
            if !opts.has("v") {
                out += "\nPolicy: \(policyNames[policy]!)\n  Matching identities\n"
                for (index, (_, record)) in identities.enumerated() { out += line(index + 1, record) }
                out += "     \(identities.count) identities found\n\n  Valid identities only\n"
            }
            let valid = identities.filter { problem($0.1) == nil }
            for (index, (_, record)) in valid.enumerated() { out += line(index + 1, record) }
            out += "     \(valid.count) valid identities found\n"
        }
        Terminal.writeOut(out)
        return 0
    }

    // MARK: - delete-certificate, delete-identity

    func delete(_ arguments: [String], identity: Bool) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, spec: CommandFlags.deleteCertificate)
        let name = opts.value("c"), hash = opts.value("Z")
        guard name != nil || hash != nil else { throw .usage }
        var matches = try certificates(in: opts.operands, name: name, email: nil)
        if let hash {
            let wanted = hash.uppercased()
            matches = matches.filter { Self.hex($0.1.sha1) == wanted || Self.hex($0.1.sha256) == wanted }
        }
        guard matches.count == 1, let (keychain, record) = matches.first else {
            Terminal.writeError(matches.isEmpty ? "Unable to delete certificate matching \"\(name ?? hash ?? "")\"\n"
                                : "\(name ?? hash ?? "") is ambiguous, please use the SHA-1 hash\n")
            return 1
        }
        do throws(KeychainError) {
            if identity, let keyHash = record.item.item.attributes["pkhh"]?.dataValue {
                do throws(KeychainError) {
                    try session.service.delete(.matching(.key, [.keyClass: .number(1), .applicationLabel: .data(keyHash)],
                                                         for: .delete), in: keychain)
                } catch where error.status == .itemNotFound {
                    // no private key: deleting the certificate is still what was asked
                }
            }
            try session.service.delete(.item(record.item.item.persistentReference, for: .delete), in: keychain)
        } catch {
            throw .status(error, api: "SecKeychainItemDelete")
        }
        return 0
    }

    // MARK: - Helpers

    /// The certificates of the keychains (the search list when none are named), in order, whose common name
    /// contains `name` (case-insensitive) and that carry `email`.
    private func certificates(in names: [String], name: String?, email: String?) throws(CommandError)
        -> [(KeychainReference, CertificateRecord)]
    {
        do throws(KeychainError) {
            var out: [(KeychainReference, CertificateRecord)] = []
            for keychain in try session.searchList(names) {
                try session.unlockIfNeeded(keychain)
                for record in try session.service.certificates([:], in: keychain) {
                    if let name, record.commonName?.lowercased().contains(name.lowercased()) != true { continue }
                    if let email, !record.emailAddresses.contains(where: { $0.lowercased() == email.lowercased() }) { continue }
                    out.append((keychain, record))
                }
            }
            return out
        } catch {
            throw .status(error, api: "SecKeychainSearchCopyNext")
        }
    }

    static func hex(_ data: Data) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        return String(decoding: data.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] }, as: UTF8.self)
    }

    static func pem(_ der: Data, label: String) -> String {
        PEMDocument(type: label, derBytes: Array(der)).pemString + "\n"
    }

    static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath)).path
    }

    private func parse(_ arguments: [String], spec: String) throws(CommandError) -> Getopt {
        do { return try Getopt(arguments, spec: spec) } catch { throw .usage }
    }
}
