#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore
import Synchronization

/// The keychain's side of a password the ``Asker`` obtains: unlocking, or the owner's proof of presence.
public protocol PasswordGate: Sendable {
    /// The keychain's name as a question shows it.
    var keychainName: String { get }
    /// The keychain file's path, as the access log names it.
    var keychainPath: String { get }
    /// Unlocks with the keychain password; a wrong one is errSecAuthFailed (counted toward the back-off).
    func unlock(password: SecretBytes) throws(KeychainError)
    /// Checks the keychain password as the owner's proof of presence and marks `context` authenticated; false
    /// for a wrong one (counted toward the back-off).
    func authenticateOwner(password: SecretBytes, context: AuthenticationContext?) throws(KeychainError) -> Bool
}

/// Every answer's keychain side, Always Allow included. The embedded service gives one per keychain file;
/// nothing here asks anyone.
public protocol AskerGate: PasswordGate {
    /// The keychain's biometric sensor (none on a plain Linux machine).
    var authenticator: any Authenticator { get }
    /// Always Allow: the program joins the item's trusted applications.
    func trust(_ application: TrustedApplication, item: UUID, grants: AccessGrants) throws(KeychainError)
}

/// The one place that asks the user anything about keychain access: which question, its words, how many tries,
/// through which prompter. Every door uses it (the embedded service, keychaind's connections, the Secret Service,
/// LocalAuthentication); storage only reports what it needs (``PendingAccess``) and takes the grants.
public struct Asker: Sendable {
    /// Who asks for passwords; nil: nobody can be asked, and every requirement is errSecInteractionNotAllowed.
    public let prompter: (any Prompter)?
    /// Who asks for a decision (Deny / Allow / Always Allow, a group claim). keychaind gives it only a surface the
    /// asking program cannot answer itself (the session's display, a login terminal): a yes is worth something to
    /// the program that asks, a password it does not know is not.
    public var confirmer: (any Prompter)? { confirmerSource.prompter }
    private let confirmerSource: PrompterSource

    /// An asker whose decisions go where its passwords go (a program asking on its own behalf, in-process).
    public init(prompter: (any Prompter)?) {
        self.init(prompter: prompter, confirmer: prompter)
    }

    public init(prompter: (any Prompter)?, confirmer: (any Prompter)?) {
        self.prompter = prompter
        self.confirmerSource = PrompterSource(confirmer)
    }

    /// An asker that works out where decisions go at the first one it asks (then keeps it): keychaind's clients
    /// seldom need one, and finding the place reads files (the kernel's TIOCSTI setting, utmp).
    public init(prompter: (any Prompter)?, confirmerAtFirstUse find: @escaping @Sendable () -> (any Prompter)?) {
        self.prompter = prompter
        self.confirmerSource = PrompterSource(find)
    }

    /// Tries per question: a keychain password to unlock, the owner's password, an application password.
    static let unlockTries = 3
    static let passwordTries = 5
    /// How often one requirement of one item may be met in one call before the call gives up.
    static let repeatsAllowed = 3

    struct PendingKey: Hashable {
        var requirement: AccessRequirement
        var item: UUID?
    }
    /// The key under which the tries for a new item's application password are counted.
    static let newItem = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

    /// What one call is, as its questions describe it.
    public struct Call: Sendable {
        /// The calling program, when it is known for certain (keychaind's peer); nil: "An application".
        public var program: String?
        /// `kSecUseOperationPrompt`, or the context's localized reason: shown as the question's description.
        public var operationPrompt: String?
        /// How the call may involve the user; only Allow asks.
        public var interaction: AuthenticationUI
        /// The call's authentication context: its own prompter (an LAContext made with one) goes first, and the
        /// owner's authentication and application password are kept in it for its later calls.
        public var context: AuthenticationContext?

        public init(program: String? = nil, operationPrompt: String? = nil, interaction: AuthenticationUI = .allow,
                    context: AuthenticationContext? = nil) {
            self.program = program
            self.operationPrompt = operationPrompt
            self.interaction = interaction
            self.context = context
        }

        /// The call a parsed query describes.
        public init(_ query: ItemQuery, program: String?) {
            var interaction = query.authenticationUI
            if interaction == .allow && query.authenticationContext?.interactionNotAllowed == true { interaction = .fail }
            let reason = query.authenticationContext?.localizedReason
            self.init(program: program,
                      operationPrompt: query.operationPrompt.flatMap { $0.isEmpty ? nil : $0 } ?? reason.flatMap { $0.isEmpty ? nil : $0 },
                      interaction: interaction, context: query.authenticationContext)
        }
    }

    /// Runs `body` with the grants obtained so far; each time it stops for something only the user can give, asks
    /// for it, checks the answer through `gate`, and runs it again. Nobody is asked while `body` runs, so nothing
    /// (a transaction, a lock) is held during a question.
    public func run<T>(_ call: Call, gate: some AskerGate, grants initial: AccessGrants = AccessGrants(),
                       _ body: (AccessGrants) throws(KeychainError) -> T) throws(KeychainError) -> T {
        var grants = initial
        var applicationPasswordTries: [UUID: Int] = [:]
        // How often each requirement was met: one that comes back right after it was met (a keychain locked
        // again at once, a trust that did not stick) is given up on after a few rounds rather than asked forever.
        var met: [PendingKey: Int] = [:]
        while true {
            do {
                return try body(grants)
            } catch {
                guard let pending = error.pending else { throw error }
                let key = PendingKey(requirement: pending.requirement, item: pending.item)
                if pending.requirement != .applicationPassword {  // those count their own tries
                    guard met[key, default: 0] < Self.repeatsAllowed else {
                        throw KeychainError(.authFailed, "the same requirement came back after it was met")
                    }
                    met[key, default: 0] += 1
                }
                do throws(KeychainError) {
                    let outcome = try obtain(pending, for: call, gate: gate, grants: &grants,
                                             applicationPasswordTries: &applicationPasswordTries, original: error)
                    AccessTrail.noteQuestion(pending.requirement, item: pending.item, itemName: pending.itemName,
                                             keychain: gate.keychainPath, outcome: outcome)
                } catch let refused {
                    AccessTrail.noteQuestion(pending.requirement, item: pending.item, itemName: pending.itemName,
                                             keychain: gate.keychainPath, outcome: Self.outcome(of: refused, pending.requirement))
                    throw refused
                }
            }
        }
    }

    /// How a question ended that ended in `error`, for the access log.
    static func outcome(of error: KeychainError, _ requirement: AccessRequirement) -> AccessLogRecord.Outcome {
        switch error.status {
        case .userCanceled: .cancelled
        case .interactionNotAllowed: .nobodyToAsk
        case .authFailed: if case .consent = requirement { .answeredDeny } else { .failedAnswer }
        default: .failed
        }
    }

    /// Obtains what `pending` needs; returns how the question ended (for the access log).
    private func obtain(_ pending: PendingAccess, for call: Call, gate: some AskerGate, grants: inout AccessGrants,
                        applicationPasswordTries: inout [UUID: Int], original: KeychainError) throws(KeychainError)
        -> AccessLogRecord.Outcome
    {
        let nobody: KeychainError = original.status == .interactionNotAllowed ? original : .interactionNotAllowed(original.message)
        guard call.interaction == .allow else { throw nobody }
        // Passwords: the call's own context prompter (an LAContext made with one, in-process), else this asker's.
        let passwords = call.context?.prompter ?? prompter
        switch pending.requirement {
        case .keychainPassword:
            guard let prompter = passwords else { throw nobody }
            try unlock(gate, prompter: prompter, description: call.operationPrompt ?? unlockQuestion(call.program, gate))
        case .ownerAuthentication(let alternatives):
            // Biometry needs no prompter; the password does.
            try authenticateOwner(alternatives, call: call, gate: gate, prompter: passwords)
            grants.ownerAuthenticated = true
        case .consent(let application, let changed):
            guard let item = pending.item else { throw original }
            // The call's own context prompter (an LAContext made with one, in-process) or this asker's confirmer.
            guard let confirmer = call.context?.prompter ?? confirmer else {
                throw .interactionNotAllowed("nobody can be asked whether \(application.path) may use the item")
            }
            switch confirmer.requestConfirmation(ConfirmationRequest(
                description: Self.consentQuestion(program: application.path, item: pending.itemName,
                                                  operation: pending.operation, changed: changed))) {
            case .allow:
                grants.consentedItems.insert(item)
                return .answeredAllow
            case .alwaysAllow:
                try gate.trust(application, item: item, grants: grants)
                grants.consentedItems.insert(item)
                return .answeredAlwaysAllow
            case .deny: throw KeychainError(.authFailed, "the user denied \(application.path) access to the item")
            case .cancelled: throw KeychainError(.userCanceled)
            case .unavailable: throw .interactionNotAllowed("no way to ask whether \(application.path) may use the item")
            }
        case .applicationPassword:
            // Tries are counted per item (a search may open several items, each with its own password).
            let key = pending.item ?? Self.newItem
            applicationPasswordTries[key, default: 0] += 1
            guard applicationPasswordTries[key, default: 0] <= Self.passwordTries else { throw KeychainError(.authFailed) }
            let isNew = pending.item == nil
            let request = PasswordRequest(
                kind: .applicationPassword,
                description: call.operationPrompt ?? (isNew ? "Choose the item's application password."
                                                            : "An application wants to use an item protected by its own password."),
                prompt: "Application password:", error: pending.retry ? "Wrong password, try again." : nil)
            guard let prompter = passwords else { throw nobody }
            switch prompter.requestPassword(request) {
            case .entered(let password):
                if let item = pending.item {
                    grants.applicationPasswords[item] = password  // the context keeps it once it opened the item
                } else {
                    grants.newItemApplicationPassword = password
                    call.context?.setApplicationPassword(password)
                }
            case .cancelled: throw KeychainError(.userCanceled)
            case .unavailable: throw .interactionNotAllowed("no way to ask for the application password")
            }
        }
        return .given
    }

    /// Asks for the keychain's password and unlocks it (three tries).
    public func unlock(_ gate: some PasswordGate, prompter: any Prompter, description: String) throws(KeychainError) {
        var complaint: String?
        for _ in 0..<Self.unlockTries {
            switch prompter.requestPassword(PasswordRequest(kind: .keychainPassword, description: description,
                                                            prompt: "Password:", error: complaint)) {
            case .cancelled: throw KeychainError(.userCanceled)
            case .unavailable: throw .interactionNotAllowed("the keychain is locked")
            case .entered(let password):
                do throws(KeychainError) {
                    try gate.unlock(password: password)
                    return
                } catch {
                    guard error.status == .authFailed else { throw error }
                    complaint = "Wrong password, try again."
                }
            }
        }
        throw KeychainError(.authFailed)
    }

    /// The owner proves presence by one of `alternatives` (each step in turn: the sensor, the keychain password).
    public func authenticateOwner(_ alternatives: [[AuthenticationStep]], call: Call, gate: some AskerGate,
                                  prompter: (any Prompter)?) throws(KeychainError) {
        let reason = call.operationPrompt ?? "Authenticate to use a protected item."
        var passed: Set<AuthenticationStep> = []
        for steps in alternatives {
            var met = true
            for step in steps where !passed.contains(step) {
                switch step {
                case .biometry:
                    switch gate.authenticator.authenticate(reason: reason) {
                    case .success: passed.insert(.biometry)
                    case .cancelled: throw KeychainError(.userCanceled)
                    case .failure: met = false
                    }
                case .password:
                    guard let prompter else { throw .interactionNotAllowed("the item needs authentication and nobody can be asked") }
                    try askOwnerPassword(call: call, gate: gate, prompter: prompter,
                                         fallback: "An application wants to use a protected keychain item.")
                    passed.insert(.password)
                }
                if !met { break }
            }
            if met {
                call.context?.markOwnerAuthenticated()
                return
            }
        }
        throw KeychainError(.authFailed)
    }

    /// Asks for the keychain password as the owner's proof (five tries; the back-off, shared with unlocking, ends
    /// the question at once). Cancel is errSecUserCanceled; five wrong answers errSecAuthFailed.
    public func askOwnerPassword(call: Call, gate: some PasswordGate, prompter: any Prompter, fallback: String)
        throws(KeychainError)
    {
        var complaint: String?
        for _ in 0..<Self.passwordTries {
            switch prompter.requestPassword(PasswordRequest(
                kind: .keychainPassword, description: call.operationPrompt ?? fallback, prompt: "Keychain password:",
                error: complaint)) {
            case .cancelled: throw KeychainError(.userCanceled)
            case .unavailable: throw .interactionNotAllowed("no way to ask for the password")
            case .entered(let typed):
                if try gate.authenticateOwner(password: typed, context: call.context) { return }
                complaint = "Wrong password, try again."
            }
        }
        throw KeychainError(.authFailed)
    }

    /// Asks for a decision (the Deny / Allow / Always Allow question) through this asker's confirmer; none:
    /// unavailable.
    public func confirm(_ description: String) -> ConfirmationResponse {
        confirmer?.requestConfirmation(ConfirmationRequest(description: description)) ?? .unavailable
    }

    /// A new password, typed twice (three tries to make them match); nil when cancelled or nobody answers.
    public func chooseNewPassword(description: String) -> SecretBytes? {
        guard let prompter else { return nil }
        var complaint: String?
        for _ in 0..<Self.unlockTries {
            guard case .entered(let first) = prompter.requestPassword(PasswordRequest(
                kind: .keychainPassword, description: description, prompt: "Password:", error: complaint)),
                case .entered(let second) = prompter.requestPassword(PasswordRequest(
                    kind: .keychainPassword, description: description, prompt: "Repeat:"))
            else { return nil }
            if first == second { return first }
            complaint = "The passwords did not match, try again."
        }
        return nil
    }

    // MARK: - The words

    func unlockQuestion(_ program: String?, _ gate: some PasswordGate) -> String {
        "\(program ?? "An application") wants to use the keychain \u{201C}\(gate.keychainName)\u{201D}. Enter its password to unlock it."
    }

    /// The Deny / Allow / Always Allow question about an item of another program.
    public static func consentQuestion(program: String, item: String, operation: ItemOperation?, changed: Bool) -> String {
        let verb = switch operation {
        case .change?: "change"
        case .delete?: "delete"
        case .changeAccess?: "change the access to"
        case .useKey?: "use the key of"
        case .exportKey?: "export the key of"
        default: "use the secret of"
        }
        var text = "\(program) wants to \(verb) \u{201C}\(item)\u{201D} in your keychain."
        if changed { text += " The program has changed since it was last allowed." }
        return text
    }
}

/// A keychain reached through any ``KeychainService`` (in-process or keychaind), for the owner's password.
public struct ServicePasswordGate: PasswordGate {
    public let service: any KeychainService
    public let keychain: KeychainReference?

    public init(service: any KeychainService, keychain: KeychainReference?) {
        self.service = service
        self.keychain = keychain
    }

    public var keychainName: String { URL(fileURLWithPath: keychainPath).deletingPathExtension().lastPathComponent }
    public var keychainPath: String { (keychain ?? service.defaultKeychain()).path }

    public func unlock(password: SecretBytes) throws(KeychainError) {
        try service.unlock(keychain ?? service.defaultKeychain(), password: password)
    }

    public func authenticateOwner(password: SecretBytes, context: AuthenticationContext?) throws(KeychainError) -> Bool {
        try service.authenticateOwner(password, for: context ?? AuthenticationContext(), in: keychain)
    }
}

/// A prompter given, or found by a closure at its first use and then kept.
private final class PrompterSource: Sendable {
    private let find: (@Sendable () -> (any Prompter)?)?
    private let found: Mutex<(any Prompter)??>

    init(_ prompter: (any Prompter)?) {
        find = nil
        found = Mutex(.some(prompter))
    }

    init(_ find: @escaping @Sendable () -> (any Prompter)?) {
        self.find = find
        found = Mutex(nil)
    }

    var prompter: (any Prompter)? {
        // Finding it reads files and asks nobody: done under the lock, so that it is found once.
        found.withLock { found in
            if let known = found { return known }
            let made = find?()
            found = .some(made)
            return made
        }
    }
}
