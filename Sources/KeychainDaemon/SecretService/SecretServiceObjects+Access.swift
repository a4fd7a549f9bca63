import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus
import KeychainThreads

/// Who reads what through the Secret Service, in the API's own terms: an item is *unlocked* for a caller when its
/// keychain is unlocked and the caller's program may read it (it is on the item's trusted-application list, or the
/// user allowed it for this connection). Everything else is *locked* for that caller, and Unlock turns it into a
/// prompt: the keychain's password, then Deny / Allow / Always Allow for each item of another program.
extension SecretServiceObjects {
    /// What the user granted this connection about `id` (Allow in an Unlock prompt).
    func grants(for id: UUID) -> AccessGrants {
        AccessGrants(consentedItems: server.isAllowed(id, for: caller) ? [id] : [])
    }

    /// Whether the caller's program may use `item` without asking (the evaluator's trusted-application rule).
    func isReadable(_ item: Item) -> Bool {
        !AccessEvaluator.needsConsent(.readSecret, on: item, by: service.caller, grants: grants(for: item.uuid))
    }

    /// The item, when it is unlocked for the caller (IsLocked otherwise; NoSuchObject when it is not there).
    func unlockedItem(_ keychain: KeychainReference, _ id: UUID) throws -> Item {
        guard !isLocked(keychain) else { throw Failure.isLocked }
        let item = try found(keychain, id).item
        guard isReadable(item) else { throw Failure.isLocked }
        return item
    }

    /// Unlock(objects): what is unlocked for the caller already, and a prompt for the rest ("/" when none).
    func unlock(_ paths: [DBusValue]) throws -> [DBusValue] {
        var done: [String] = []
        var keychains: [(KeychainReference, [String])] = []  // locked keychains, with the collection paths asked
        var items: [(String, KeychainReference, UUID)] = []  // items that may need the keychain or a yes
        var sessionAsks: [(String, UUID)] = []  // another program's items of the session collection
        for case .objectPath(let path) in paths {
            if path == SecretSessionCollection.path { done.append(path) }  // never locked
            if let id = SecretSessionCollection.itemID(path), let item = sessionItems.item(id) {
                if isReadable(item, id) { done.append(path) } else { sessionAsks.append((path, id)) }
                continue
            }
            guard let (keychain, id) = try? resolve(path) else { continue }
            let locked = isLocked(keychain)
            if locked, !keychains.contains(where: { $0.0 == keychain }) { keychains.append((keychain, [])) }
            if let id {
                if !locked, let item = try? found(keychain, id).item, isReadable(item) { done.append(path) } else {
                    items.append((path, keychain, id))
                }
            } else if locked {
                if let index = keychains.firstIndex(where: { $0.0 == keychain }) { keychains[index].1.append(path) }
            } else {
                done.append(path)
            }
        }
        let unlocked = DBusValue.array(elementSignature: "o", done.map { .objectPath($0) })
        guard !keychains.isEmpty || !items.isEmpty || !sessionAsks.isEmpty else { return [unlocked, .objectPath("/")] }
        let prompt = server.makePrompt(owner: caller, emptyResult: .array(elementSignature: "o", [])) {
            [objects = self, done, keychains, items, sessionAsks] prompter, isDismissed in
            guard let prompter else { return nil }  // nobody to ask: locked it stays, and the client is told at once
            var result = done
            for (keychain, collectionPaths) in keychains {
                guard objects.isLocked(keychain) else { result += collectionPaths; continue }  // unlocked meanwhile
                switch objects.askToUnlock(keychain, prompter: prompter, isDismissed: isDismissed) {
                case .unlocked: result += collectionPaths
                case .refused: continue
                case .dismissed: return nil
                }
            }
            for (path, keychain, id) in items where !objects.isLocked(keychain) {
                guard let item = try? objects.found(keychain, id).item else { continue }
                if objects.isReadable(item) {
                    result.append(path)
                    continue
                }
                let changed = objects.service.caller.application.map { item.applicationAccess?.trustedEarlierBuild(of: $0) == true }
                switch Asker(prompter: prompter).confirm(objects.consentQuestion(label: item.displayName, changed: changed == true)) {
                case .allow:
                    guard !isDismissed() else { return nil }
                    objects.server.allow(id, for: objects.caller)
                    result.append(path)
                case .alwaysAllow:
                    guard !isDismissed() else { return nil }
                    if objects.rememberTrust(keychain, id) { result.append(path) }
                case .deny, .cancelled: continue
                case .unavailable: return nil
                }
            }
            for (path, id) in sessionAsks {
                guard let item = objects.sessionItems.item(id) else { continue }
                let changed = objects.service.caller.application.map { item.access?.trustedEarlierBuild(of: $0) == true }
                switch Asker(prompter: prompter).confirm(objects.consentQuestion(label: item.label, changed: changed == true)) {
                case .allow:
                    guard !isDismissed() else { return nil }
                    objects.server.allow(id, for: objects.caller)
                    result.append(path)
                case .alwaysAllow:
                    guard !isDismissed(), let application = objects.service.caller.application else { return nil }
                    objects.sessionItems.update(id) { $0.access = $0.access?.trusting(application) }
                    result.append(path)
                case .deny, .cancelled: continue
                case .unavailable: return nil
                }
            }
            return .array(elementSignature: "o", result.map { .objectPath($0) })
        }
        return [unlocked, .objectPath(prompt)]
    }

    enum UnlockOutcome { case unlocked, refused, dismissed }

    /// How long a search waits for the user to unlock a keychain before it answers with what is unlocked by then
    /// (the question stays up): under libsecret's 25-second D-Bus timeout.
    static let searchPatience: TimeInterval = 20

    /// A search over locked keychains: their attributes are encrypted and cannot be matched, so the user is asked
    /// for each one's password first (as KeePassXC's "unlock before search"); libsecret then finds the items
    /// unlocked, as it would with gnome-keyring. Nobody to ask: the search answers at once without them.
    func searchAfterUnlocking(_ keychains: [KeychainReference],
                              body: @escaping @Sendable (SecretServiceObjects) throws -> [DBusValue]) throws -> [DBusValue]
    {
        let locked = keychains.filter { (try? service.state(of: $0)).map { $0.isLocked && $0.hasPassword } == true }
        guard !locked.isEmpty, let prompter = server.desktopPrompter() else { return try body(self) }
        throw SecretServiceServer.ReplyLater { [objects = self] in
            let answered = DispatchSemaphore(value: 0)
            let asking: @Sendable () -> Void = {
                for keychain in locked where objects.isLocked(keychain) {
                    if objects.askToUnlock(keychain, prompter: prompter, isDismissed: { false }) == .dismissed { break }
                }
                answered.signal()
            }
            if DetachedThread.start(name: "keychaind-prompt", stackSize: 1 << 20, asking) {
                _ = answered.wait(timeout: .now() + Self.searchPatience)
            }
            return try body(objects)
        }
    }

    /// Asks for `keychain`'s password (three tries) and unlocks it for every client of keychaind. While one
    /// question about a keychain is showing, others that need it wait for its answer instead of asking again.
    func askToUnlock(_ keychain: KeychainReference, prompter: any Prompter,
                     isDismissed: @escaping @Sendable () -> Bool) -> UnlockOutcome {
        guard server.claimUnlocking(keychain.path) else {
            while server.isUnlocking(keychain.path) && !isDismissed() { usleep(50_000) }
            return isLocked(keychain) ? .refused : .unlocked
        }
        defer { server.releaseUnlocking(keychain.path) }
        let program = service.caller.application?.path ?? "A program"
        let gate = DismissiblePasswordGate(inner: ServicePasswordGate(service: service, keychain: keychain),
                                           isDismissed: isDismissed)
        do throws(KeychainError) {
            try Asker(prompter: prompter).unlock(gate, prompter: prompter, description:
                "\(program) wants to use the keychain \u{201C}\(Self.name(of: keychain))\u{201D}. Enter its password to unlock it.")
            server.changed(.unlock, keychain, by: caller)
            return .unlocked
        } catch {
            return error.status == .userCanceled || error.status == .interactionNotAllowed ? .dismissed : .refused
        }
    }

    func consentQuestion(label: String, changed: Bool) -> String {
        Asker.consentQuestion(program: service.caller.application?.path ?? "A program", item: label,
                              operation: .readSecret, changed: changed)
    }

    /// Always Allow: the caller's program joins the item's trusted applications, so no later process of that
    /// program is asked, even after a restart.
    func rememberTrust(_ keychain: KeychainReference, _ id: UUID) -> Bool {
        (try? service.trust(item: id, in: keychain)) != nil
    }
}

/// A prompt's password gate: once the prompt is dismissed, an answer that arrives after it unlocks nothing.
struct DismissiblePasswordGate: PasswordGate {
    let inner: ServicePasswordGate
    let isDismissed: @Sendable () -> Bool

    var keychainName: String { inner.keychainName }
    var keychainPath: String { inner.keychainPath }

    func unlock(password: SecretBytes) throws(KeychainError) {
        guard !isDismissed() else { throw KeychainError(.userCanceled, "the prompt was dismissed") }
        try inner.unlock(password: password)
    }

    func authenticateOwner(password: SecretBytes, context: AuthenticationContext?) throws(KeychainError) -> Bool {
        guard !isDismissed() else { throw KeychainError(.userCanceled, "the prompt was dismissed") }
        return try inner.authenticateOwner(password: password, context: context)
    }
}
