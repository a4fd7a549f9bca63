#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore
import KeychainInterface
import KeychainMigration

#if canImport(Glibc)
import Glibc
#endif

/// `security import-secrets --from SOURCE [--dry-run] [-k keychain] [-P -] [FILE | DIR]` (beyond macOS): another
/// store's secrets copied into a keychain (docs/MIGRATION.md). Run twice, it adds nothing the second time; an item
/// that cannot come is named, and the rest go on; the exit status says whether everything came.
struct ImportSecretsCommand {
    let session: Session

    static let sources = ["secret-service", "gnome-keyring", "keepassxc-xml", "keepassxc-csv", "pass"]

    func run(_ arguments: [String]) throws(CommandError) -> Int32 {
        var source: String?
        var dryRun = false
        var keychainName: String?
        var passwordFromInput = false
        var operands: [String] = []
        var args = arguments[...]
        while let argument = args.popFirst() {
            switch argument {
            case "--dry-run": dryRun = true
            case "--from": guard let value = args.popFirst() else { throw .usage }; source = value
            case "-k": guard let value = args.popFirst() else { throw .usage }; keychainName = value
            case "-P":
                guard args.popFirst() == "-" else {
                    throw .status(KeychainError(.param, "a keyring's password is never taken from the command line: "
                                                + "-P - reads it from standard input"), api: "import-secrets")
                }
                passwordFromInput = true
            default:
                if argument.hasPrefix("--from=") { source = String(argument.dropFirst(7)) } else if argument.hasPrefix("-") {
                    throw .usage
                } else {
                    operands.append(argument)
                }
            }
        }
        guard let source, Self.sources.contains(source), operands.count <= 1 else { throw .usage }
        let environment = ProcessEnvironment.current()
        var report = ImportReport()
        var readFailures: [ImportReport.Failure] = []
        do throws(KeychainError) {
            let keychain = try session.keychain(keychainName)
            if !dryRun { try session.unlockIfNeeded(keychain) }
            switch source {
            case "pass":
                let store = PassStore(directory: operands.first.map { URL(fileURLWithPath: CertificateCommands.absolute($0)) }
                    ?? PassStore.defaultDirectory(environment: environment))
                let entries = try store.entries()
                var batch: [ImportedSecret] = []
                for (index, entry) in entries.enumerated() {
                    Progress.show("reading the password store", index + 1, of: entries.count)
                    switch Result<ImportedSecret, KeychainError>(catching: { () throws(KeychainError) in
                        try store.read(entry, environment: environment)
                    }) {
                    case .success(let secret): batch.append(secret)
                    case .failure(let error):
                        readFailures.append(.init(name: entry, status: error.status, message: error.message))
                    }
                }
                Progress.done()
                report = try send(batch, dryRun: dryRun, into: keychain)
            case "keepassxc-csv", "keepassxc-xml":
                guard let path = operands.first else { throw KeychainError(.param, "name the export file to read") }
                guard let data = FileManager.default.contents(atPath: CertificateCommands.absolute(path)) else {
                    throw KeychainError(.param, "cannot read \(path)")
                }
                let text = String(decoding: data, as: UTF8.self)
                let secrets = source == "keepassxc-csv" ? try KeePassXCExport.csv(text) : try KeePassXCExport.xml(text)
                report = try send(secrets, dryRun: dryRun, into: keychain)
            case "secret-service":
                guard operands.isEmpty else { throw KeychainError(.param, "the secret-service source takes no file") }
                let (secrets, failures) = try SecretServiceSource(environment: environment).read()
                readFailures = failures.map { .init(name: $0.name, status: .decode, message: $0.message) }
                report = try send(secrets, dryRun: dryRun, into: keychain)
            default:  // gnome-keyring: the file and its password go to the keychain service, which decrypts it
                guard let path = operands.first else { throw KeychainError(.param, "name the keyring file to read") }
                guard let file = FileManager.default.contents(atPath: CertificateCommands.absolute(path)) else {
                    throw KeychainError(.param, "cannot read \(path)")
                }
                let password: SecretBytes?
                if file.starts(with: Data("[keyring]".utf8)) {
                    password = SecretBytes(Data())  // a keyring without a password, kept in the clear: nothing to ask
                } else if passwordFromInput {
                    password = Terminal.readSecretFromStandardInput()
                } else {
                    password = Terminal.readSecret(prompt: "password of the keyring \(URL(fileURLWithPath: path).lastPathComponent): ")
                }
                guard let password else {
                    throw KeychainError(.interactionNotAllowed, "no terminal to ask the keyring's password on: -P - reads it from standard input")
                }
                report = try session.service.importSecrets(
                    SecretImport(.gnomeKeyringFile(SecretBytes(file), password: password), dryRun: dryRun), into: keychain)
            }
            report.failures = readFailures + report.failures
        } catch {
            throw .status(error, api: "import-secrets")
        }
        print(report, source: source, dryRun: dryRun)
        return report.failures.isEmpty ? 0 : 1
    }

    /// Sends the secrets in batches that fit a request (a few MiB each), adding up the reports.
    private func send(_ secrets: [ImportedSecret], dryRun: Bool, into keychain: KeychainReference) throws(KeychainError)
        -> ImportReport
    {
        var report = ImportReport()
        var batch: [ImportedSecret] = []
        var size = 0
        var sent = 0
        func flush() throws(KeychainError) {
            guard !batch.isEmpty else { return }
            report.merge(try session.service.importSecrets(SecretImport(.entries(batch), dryRun: dryRun), into: keychain))
            sent += batch.count
            Progress.show("storing", sent, of: secrets.count)
            batch = []
            size = 0
        }
        for secret in secrets {
            let cost = secret.secret.count + 1024
            if size + cost > 2 << 20 { try flush() }
            batch.append(secret)
            size += cost
        }
        try flush()
        Progress.done()
        return report
    }

    private func print(_ report: ImportReport, source: String, dryRun: Bool) {
        let kinds = report.added.sorted { $0.key < $1.key }.map { code, n in
            "\(n) \(Self.kindNames[code] ?? code)\(n == 1 ? "" : "s")"
        }
        let total = report.addedCount
        var line = dryRun ? "Would import \(total) item\(total == 1 ? "" : "s") from \(source)"
            : "Imported \(total) item\(total == 1 ? "" : "s") from \(source)"
        if !kinds.isEmpty { line += " (" + kinds.joined(separator: ", ") + ")" }
        if report.alreadyThere > 0 { line += "; \(report.alreadyThere) already there" }
        if !report.failures.isEmpty { line += "; \(report.failures.count) could not come" }
        Terminal.writeOut(line + ".\n")
        for failure in report.failures {
            Terminal.writeError("security: import-secrets: \(failure.name): \(failure.message) (\(failure.status.rawValue))\n")
        }
    }

    static let kindNames = ["genp": "generic password", "inet": "internet password", "cert": "certificate", "keys": "key"]
}

/// A progress line on standard error when it is a terminal and the work takes more than a second.
enum Progress {
    nonisolated(unsafe) static var started: Date?
    nonisolated(unsafe) static var shown = false

    static func show(_ what: String, _ done: Int, of total: Int) {
        write("\(what): \(done) of \(total)")
    }

    /// The same line as a percentage (a restore counts bytes of the file, not items).
    static func show(_ what: String, percent done: Int64, of total: Int64) {
        guard total > 0 else { return }
        write("\(what): \(min(100, done * 100 / total))%")
    }

    /// Rewrites the line in place, once the work has taken more than a second and only on a terminal.
    private static func write(_ line: String) {
        guard isatty(STDERR_FILENO) == 1 else { return }
        let now = Date()
        if started == nil { started = now }
        guard let started, now.timeIntervalSince(started) > 1 else { return }
        shown = true
        Terminal.writeError("\r\(line)\u{1B}[K")
    }

    /// Runs `body` with a progress line for what keychaind (or the engine here) reports of it.
    static func around<T>(_ what: String, _ body: () throws(KeychainError) -> T) throws(KeychainError) -> T {
        let progress = OperationProgress { done, total in show(what, percent: done, of: total) }
        defer { Progress.done() }
        return try OperationProgress.$current.withValue(progress) { Result { () throws(KeychainError) in try body() } }.get()
    }

    static func done() {
        if shown { Terminal.writeError("\n") }
        started = nil
        shown = false
    }
}
