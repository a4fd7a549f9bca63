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

/// Which keychains a command works on, through the keychain service, unlocked on demand.
final class Session {
    private let makeService: () throws(KeychainError) -> any KeychainService
    private var connected: (any KeychainService)?
    /// States read with the search list by ``searchList(_:)``, used once by ``unlockIfNeeded(_:)`` instead of asking
    /// again (one round trip to keychaind fewer per keychain searched).
    private var freshStates: [ListedKeychain] = []

    init(makeService: @escaping () throws(KeychainError) -> any KeychainService) {
        self.makeService = makeService
    }

    /// The keychain service (keychaind or in-process, as the executable decided), made at first use. Embedded, the
    /// tool sees every access group (like macOS's tool on the file keychain) and what it adds lands in `security`;
    /// through keychaind, the daemon decides the same for the installed tool.
    var service: any KeychainService {
        if let connected { return connected }
        do {
            let made = try makeService()
            connected = made
            return made
        } catch {
            Terminal.writeError("security: \(error.message)\n")
            exit(Int32(truncatingIfNeeded: error.status.rawValue) & 0xff)
        }
    }

    /// A keychain by name or path that exists; nil means the default keychain (the login keychain is created on
    /// first use, with a password asked on the terminal when there is one).
    func keychain(_ nameOrPath: String?) throws(KeychainError) -> KeychainReference {
        try service.existingKeychain(nameOrPath.map { service.resolve($0) }, creatingLoginWith: chooseLoginPassword)
    }

    /// Closes what this command opened, before the process exits.
    func closeAll() { connected?.close() }

    /// The keychains a search visits: the ones named, else the search list (the default keychain if none exists).
    func searchList(_ names: [String]) throws(KeychainError) -> [KeychainReference] {
        if !names.isEmpty { return try names.map { name throws(KeychainError) in try keychain(name) } }
        var found: [KeychainReference] = []
        for listed in try service.listedKeychains() where listed.state.exists {
            freshStates.append(listed)
            found.append(listed.keychain)
        }
        if found.isEmpty { found.append(try keychain(nil)) }
        return found
    }

    /// Asks for the password on the terminal when a locked keychain must be read; without one, it stays locked
    /// and the read fails with errSecInteractionNotAllowed.
    func unlockIfNeeded(_ keychain: KeychainReference) throws(KeychainError) {
        let state: KeychainState
        if let fresh = freshStates.firstIndex(where: { $0.keychain == keychain }) {
            state = freshStates.remove(at: fresh).state
        } else {
            state = try service.state(of: keychain)
        }
        guard state.hasPassword, state.isLocked else { return }
        guard let password = try askUnlockPassword(label: "\"\(keychain.path)\"") else { return }
        try service.unlock(keychain, password: password)
    }

    /// The unlock password: through pinentry when `KEYCHAIN_PROMPTER=pinentry` (or a graphical session without a
    /// terminal), else on the terminal as macOS asks; nil when nobody can be asked.
    func askUnlockPassword(label: String) throws(KeychainError) -> SecretBytes? {
        let environment = ProcessEnvironment.current()
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

    /// The password of a login keychain created at first use: asked on the terminal, else none (said so).
    private func chooseLoginPassword() -> SecretBytes? {
        let path = service.loginKeychain().path
        guard Terminal.hasTerminal && Terminal.standardInputIsTerminal else {
            Terminal.writeError("security: created \(path) without a password (no terminal to ask for one)\n")
            return nil
        }
        Terminal.writeError("A login keychain is being created at \(path).\n")
        return Terminal.newPassword(
            prompt: "password for new keychain (empty for none): ", retype: "retype password for new keychain: ")
    }
}
