#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore
import KeychainInterface
import SecurityCommandLine

/// backup-keychain and restore-keychain (beyond macOS's `security`; Apple's rules for what a backup holds).
struct BackupCommands {
    let session: Session

    func backUp(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, CommandFlags.backupKeychain)
        guard opts.operands.isEmpty, let output = opts.value("o") else { throw .usage }
        let path = CertificateCommands.absolute(output)
        do throws(KeychainError) {
            let keychain = try session.keychain(opts.value("k"))
            let password = try backupPassword(opts, newOne: true)
            let report = try Progress.around("backing up") {
                () throws(KeychainError) in try session.service.backUp(keychain, to: path, password: password)
            }
            var line = "Backed up \(Self.items(report.items)) of \(keychain.fileName) to \(path)"
            if report.thisDeviceOnly > 0 {
                line += " (\(report.thisDeviceOnly) of them restore only on this device)"
            }
            Terminal.writeOut(line + ".\n")
            Self.writeLeftOut(report)
        } catch {
            throw .status(error, api: "backup-keychain")
        }
        return 0
    }

    func restore(_ arguments: [String]) throws(CommandError) -> Int32 {
        let opts = try parse(arguments, CommandFlags.restoreKeychain)
        guard opts.operands.isEmpty, let input = opts.value("i") else { throw .usage }
        let path = CertificateCommands.absolute(input)
        do throws(KeychainError) {
            guard FileManager.default.fileExists(atPath: path) else {
                throw KeychainError(.param, "no backup file at \(path)")
            }
            let password = try backupPassword(opts, newOne: false)
            let keychain = try session.keychain(opts.value("k"))
            let report = try Progress.around("restoring") {
                () throws(KeychainError) in try session.service.restore(from: path, password: password, into: keychain)
            }
            var line = "Restored \(Self.items(report.items)) into \(keychain.fileName)"
            if report.kept > 0 { line += "; kept \(report.kept) whose copy here is as new or newer" }
            Terminal.writeOut(line + ".\n")
            if report.skippedOtherDevice > 0 {
                Terminal.writeOut("Skipped \(Self.items(report.skippedOtherDevice)) that restore only on the device "
                                  + "that made the backup (…ThisDeviceOnly).\n")
            }
            Self.writeLeftOut(report)
        } catch {
            throw .status(error, api: "restore-keychain")
        }
        return 0
    }

    /// The backup password: from standard input's first line with `-P -`, else asked on the terminal (twice for a
    /// new backup). Never from the command line, where every user's `ps` shows it.
    private func backupPassword(_ opts: Getopt, newOne: Bool) throws(KeychainError) -> SecretBytes {
        let password: SecretBytes?
        if let source = opts.value("P") {
            guard source == "-" else {
                throw KeychainError(.param, "the backup password is never taken from the command line: "
                                    + "-P - reads it from standard input")
            }
            password = Terminal.readSecretFromStandardInput()
        } else {
            guard Terminal.hasTerminal else {
                throw KeychainError(.interactionNotAllowed,
                                    "no terminal to ask the backup password on: give it on standard input with -P -")
            }
            if newOne {
                password = Terminal.newPassword(prompt: "password for the backup: ",
                                                retype: "retype password for the backup: ")
            } else {
                password = Terminal.readSecret(prompt: "password of the backup: ")
            }
        }
        guard let password else { throw KeychainError(.userCanceled, "no backup password was given") }
        guard !password.isEmpty else { throw KeychainError(.param, "a backup needs a password") }
        return password
    }

    private static func items(_ n: Int) -> String { n == 1 ? "1 item" : "\(n) items" }

    private static func writeLeftOut(_ report: BackupReport) {
        if report.leftOutPasscode > 0 {
            Terminal.writeOut("Left out \(items(report.leftOutPasscode)) that exist only while a password is set "
                              + "(WhenPasscodeSetThisDeviceOnly: never in a backup).\n")
        }
        if report.leftOutApplicationPassword > 0 {
            Terminal.writeOut("Left out \(items(report.leftOutApplicationPassword)) behind an application password "
                              + "(it is not known to the keychain).\n")
        }
    }

    private func parse(_ arguments: [String], _ spec: String) throws(CommandError) -> Getopt {
        do { return try Getopt(arguments, spec: spec) } catch { throw .usage }
    }
}
