import Crypto
import Foundation
import GRDB
import KeychainCore
import Logging
import Synchronization

/// Access control at read and write: which constraints an item's ACL puts on an operation, how each can be met here
/// (keychain password, sensor, application password), and asking the user.
extension KeychainFile {
    /// Decides whether a protected item may be read (Apple's `od` operation), asking the user when the call allows
    /// it. Returns false when the item is to be left out (UI Skip).
    ///
    /// UserPresence and DevicePasscode are met by the keychain password (the device passcode here); biometry and a
    /// companion device are not available on this machine, as on a Mac without a sensor.
    /// `db` is the transaction to read the keybag through when called inside one (writes), nil otherwise (a search
    /// authorises after its read transaction ended).
    func authorize(_ item: Item, _ query: ItemQuery, db: Database?,
                   for operation: AccessControl.Operation = .decrypt) throws(KeychainError) -> Bool {
        guard let ac = item.accessControl else { return true }
        guard case .requires(let constraints, _) = ac.constraint(for: operation) else { return true }
        let context = query.authenticationContext
        if context?.isInvalidated == true { throw KeychainError(.authFailed, "the authentication context was invalidated") }
        if context?.isOwnerAuthenticated == true { return true }
        if let context, context.reuseDuration > 0 {
            let last = keys.withLock { $0.lastPasswordEntry }
            if configuration.clock().timeIntervalSince(last) <= context.reuseDuration {
                context.markOwnerAuthenticated()
                return true
            }
        }
        // UI Skip leaves out every item that would need authentication, whatever could satisfy it.
        if query.authenticationUI == .skip { return false }

        // What can meet each constraint here: biometry needs a sensor (and, for CurrentSet, the enrolment the item
        // was bound to); the device passcode is the keychain password; user presence is either; no companion.
        let authenticator = configuration.authenticator
        let enrolmentIntact = ac.boundEnrolment != nil && authenticator.enrolmentFingerprint == ac.boundEnrolment
        let individual: [AccessControl.Flags] = [.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .companion]
            .filter { constraints.contains($0) }
        func meetable(_ flag: AccessControl.Flags) -> Bool {
            switch flag {
            case .biometryAny: authenticator.isAvailable
            case .biometryCurrentSet: authenticator.isAvailable && enrolmentIntact
            case .devicePasscode: hasPassword
            case .userPresence: authenticator.isAvailable || hasPassword
            default: false
            }
        }
        let possible = ac.anyConstraintSuffices ? individual.contains(where: meetable) : individual.allSatisfy(meetable)
        guard possible else {
            throw KeychainError(.authFailed, hasPassword ? "biometry or a companion device is needed and not available"
                                                          : "the keychain has no password (no passcode set)")
        }
        if query.authenticationUI == .fail || context?.interactionNotAllowed == true {
            throw KeychainError.interactionNotAllowed("the item needs authentication")
        }

        var biometryPassed = false
        var passwordPassed = false
        func biometry() throws(KeychainError) -> Bool {
            if biometryPassed { return true }
            switch authenticator.authenticate(reason: promptText(query, fallback: "Authenticate to use a protected item.")) {
            case .success: biometryPassed = true
            case .cancelled: throw KeychainError(.userCanceled)
            case .failure: break
            }
            return biometryPassed
        }
        func password() throws(KeychainError) -> Bool {
            if passwordPassed { return true }
            guard let prompter = try interaction(query) else { return false }
            _ = try ask(prompter, kind: .keychainPassword, query: query,
                    fallback: "An application wants to use a protected keychain item.") { typed throws(KeychainError) in
                // A wrong answer asks again; the back-off (shared with unlocking) ends the prompt at once.
                try ownerPasswordMatches(typed, db: db) ? true : nil
            }
            passwordPassed = true
            return true
        }
        func satisfy(_ flag: AccessControl.Flags) throws(KeychainError) -> Bool {
            switch flag {
            case .biometryAny, .biometryCurrentSet: return try biometry()
            case .devicePasscode: return try password()
            case .userPresence:
                if authenticator.isAvailable, try biometry() { return true }
                return hasPassword ? try password() : false
            default: return false
            }
        }
        if ac.anyConstraintSuffices {
            for flag in individual where meetable(flag) {
                if try satisfy(flag) {
                    context?.markOwnerAuthenticated()
                    return true
                }
            }
            throw KeychainError(.authFailed)
        }
        for flag in individual {
            guard try satisfy(flag) else { throw KeychainError(.authFailed) }
        }
        context?.markOwnerAuthenticated()
        return true
    }

    /// Binds a BiometryCurrentSet item to the enrolment current now (nothing enrolled: nothing to bind).
    func bindEnrolment(_ item: inout Item) throws(KeychainError) {
        guard var ac = item.accessControl, ac.flags.contains(.biometryCurrentSet) else { return }
        ac.boundEnrolment = configuration.authenticator.enrolmentFingerprint
        item.accessControl = ac
    }

    /// The prompter a call may use: nil means leave the item out (UI Skip); no way to ask is an error.
    func interaction(_ query: ItemQuery) throws(KeychainError) -> (any Prompter)? {
        if query.authenticationUI == .skip { return nil }
        if query.authenticationUI == .fail || query.authenticationContext?.interactionNotAllowed == true {
            throw KeychainError.interactionNotAllowed("the item needs authentication")
        }
        guard let prompter = query.authenticationContext?.prompter ?? configuration.prompter else {
            throw KeychainError.interactionNotAllowed("the item needs authentication and nobody can be asked")
        }
        return prompter
    }

    func promptText(_ query: ItemQuery?, fallback: String) -> String {
        if let prompt = query?.operationPrompt, !prompt.isEmpty { return prompt }
        if let reason = query?.authenticationContext?.localizedReason, !reason.isEmpty { return reason }
        return fallback
    }

    /// The application password an item needs to be written, from the context or, if allowed, asked for.
    func applicationPasswordForWriting(_ item: Item, _ query: ItemQuery) throws(KeychainError) -> SecretBytes? {
        guard item.accessControl?.needsApplicationPassword == true else { return nil }
        if let password = query.authenticationContext?.applicationPassword { return password }
        guard let prompter = try interaction(query) else { throw KeychainError.interactionNotAllowed() }
        let request = PasswordRequest(
            kind: .applicationPassword, description: promptText(query, fallback: "Choose the item's application password."),
            prompt: "Application password:")
        switch prompter.requestPassword(request) {
        case .entered(let password):
            query.authenticationContext?.setApplicationPassword(password)
            return password
        case .cancelled: throw KeychainError(.userCanceled)
        case .unavailable: throw KeychainError.interactionNotAllowed("no way to ask for the application password")
        }
    }

    /// Opens the application-password layer with the context's password, or asks (five tries).
    func unwrapApplicationLayer(_ inner: Data, item: Item, query: ItemQuery?, header: FileHeader, uuid: Data,
                                        generation: Int64) throws(KeychainError) -> Data {
        let aad = ApplicationPasswordLayer.aad(header: header, uuid: uuid, generation: generation)
        let context = query?.authenticationContext
        if let password = context?.applicationPassword {
            if let key = try? ApplicationPasswordLayer.unwrap(inner, password: password, aad: aad) { return key }
            // A wrong password is dropped from the context and the user is asked again (Apple's retry loop).
            context?.setApplicationPassword(nil)
        }
        guard let query, let prompter = try interaction(query) else { throw KeychainError.interactionNotAllowed() }
        return try ask(prompter, kind: .applicationPassword, query: query,
                       fallback: "An application wants to use an item protected by its own password.") { typed in
            guard let key = try? ApplicationPasswordLayer.unwrap(inner, password: typed, aad: aad) else { return nil }
            context?.setApplicationPassword(typed)
            return key
        }
    }

    /// Asks for a password up to five times; `check` returns nil for a wrong one. Cancel is errSecUserCanceled, no
    /// way to ask errSecInteractionNotAllowed, five wrong answers errSecAuthFailed (and nothing lasting).
    func ask<T>(_ prompter: any Prompter, kind: PasswordRequest.Kind, query: ItemQuery, fallback: String,
                        check: (SecretBytes) throws(KeychainError) -> T?) throws(KeychainError) -> T {
        var error: String?
        for _ in 0..<5 {
            let request = PasswordRequest(
                kind: kind, description: promptText(query, fallback: fallback),
                prompt: kind == .keychainPassword ? "Keychain password:" : "Application password:", error: error)
            switch prompter.requestPassword(request) {
            case .cancelled: throw KeychainError(.userCanceled)
            case .unavailable: throw KeychainError.interactionNotAllowed("no way to ask for the password")
            case .entered(let typed):
                if let value = try check(typed) { return value }
                error = "Wrong password, try again."
            }
        }
        throw KeychainError(.authFailed)
    }
}
