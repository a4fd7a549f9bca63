import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage

/// Which keychains a command works on, opened once per process, unlocked on demand.
final class Session {
    let locations = KeychainLocations.current()
    lazy var preferences = KeychainPreferences(locations: locations)
    /// The tool sees every access group (like macOS's tool on the file keychain); what it adds lands in `security`.
    let caller = Caller(accessGroups: ["security", Caller.wildcardGroup])
    private var opened: [String: KeychainFile] = [:]

    var configuration: KeychainFile.Configuration { OpenKeychains.standardConfiguration(locations: locations) }

    /// A keychain by name or path; nil means the default keychain (created on first use).
    func keychain(_ nameOrPath: String?) throws(KeychainError) -> KeychainFile {
        let url = nameOrPath.map { locations.url(forKeychain: $0) } ?? preferences.defaultKeychain()
        if let file = opened[url.path] { return file }
        let file: KeychainFile
        if FileManager.default.fileExists(atPath: url.path) {
            file = try KeychainFile.open(at: url, configuration: configuration)
        } else if nameOrPath == nil && url == preferences.loginKeychain() {
            file = try createLogin(url)
        } else {
            throw KeychainError(.noSuchKeychain, url.lastPathComponent)
        }
        opened[url.path] = file
        return file
    }

    /// Closes what this command opened, before the process exits (see ``KeychainFile/close()``).
    func closeAll() {
        for file in opened.values { file.close() }
        opened.removeAll()
    }

    /// The keychains a search visits: the ones named, else the search list.
    func searchList(_ names: [String]) throws(KeychainError) -> [KeychainFile] {
        if !names.isEmpty { return try names.map { name throws(KeychainError) in try keychain(name) } }
        var files: [KeychainFile] = []
        for url in preferences.searchList() where FileManager.default.fileExists(atPath: url.path) {
            files.append(try keychain(url.path))
        }
        if files.isEmpty { files.append(try keychain(nil)) }
        return files
    }

    /// Asks for the password on the terminal when a locked keychain must be read; without one, it stays locked
    /// and the read fails with errSecInteractionNotAllowed.
    func unlockIfNeeded(_ file: KeychainFile) throws(KeychainError) {
        guard file.hasPassword, file.isLocked else { return }
        guard let password = try askUnlockPassword(label: "\"\(file.url.path)\"") else { return }
        try file.unlock(password: password)
    }

    /// The unlock password: through pinentry when `KEYCHAIN_PROMPTER=pinentry` (or a graphical session without a
    /// terminal), else on the terminal as macOS asks; nil when nobody can be asked.
    func askUnlockPassword(label: String) throws(KeychainError) -> SecretBytes? {
        let environment = ProcessInfo.processInfo.environment
        let wantsPinentry = environment["KEYCHAIN_PROMPTER"] == "pinentry"
            || (!Terminal.hasTerminal && environment["KEYCHAIN_PROMPTER"] == nil
                && (environment["DISPLAY"] != nil || environment["WAYLAND_DISPLAY"] != nil))
        if wantsPinentry, let prompter = DefaultPrompter.make(environment: environment.merging(["KEYCHAIN_PROMPTER": "pinentry"]) { _, new in new }) {
            let request = PasswordRequest(kind: .keychainPassword, description: "Enter the password to unlock the keychain \(label).",
                                          prompt: "Password:")
            switch prompter.requestPassword(request) {
            case .entered(let password): return password
            case .cancelled: throw KeychainError(.userCanceled)
            case .unavailable: return nil
            }
        }
        guard Terminal.hasTerminal else { return nil }
        return Terminal.readSecret(prompt: "password to unlock \(label): ")
    }

    private func createLogin(_ url: URL) throws(KeychainError) -> KeychainFile {
        var password: SecretBytes?
        if Terminal.hasTerminal && Terminal.standardInputIsTerminal {
            Terminal.writeError("A login keychain is being created at \(url.path).\n")
            password = Terminal.newPassword(
                prompt: "password for new keychain (empty for none): ", retype: "retype password for new keychain: ")
        } else {
            Terminal.writeError("security: created \(url.path) without a password (no terminal to ask for one)\n")
        }
        do {
            return try KeychainFile.create(at: url, password: password, settings: .never, configuration: configuration)
        } catch KeychainStatus.duplicateKeychain {
            return try KeychainFile.open(at: url, configuration: configuration)
        } catch {
            throw error
        }
    }
}
