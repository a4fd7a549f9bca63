import Foundation
import KeychainCore
import Synchronization

/// Access decisions applied: storage asks ``AccessEvaluator`` about each item a call touches and follows the answer.
/// It never asks anyone: what the user must give comes back as a ``PendingAccess`` error, which the service layer's
/// Asker obtains before running the call again with the new grant.
extension KeychainFile {
    /// What this keychain can offer toward a requirement.
    var capabilities: KeychainCapabilities {
        KeychainCapabilities(hasPassword: hasPassword, biometryAvailable: configuration.authenticator.isAvailable,
                             enrolmentFingerprint: configuration.authenticator.enrolmentFingerprint)
    }

    /// How the call may involve the user, and what its authentication context proved already. A context's reuse
    /// duration counts an unlock of this keychain within it as the owner's authentication. No query (a listing):
    /// nobody is asked.
    func circumstances(_ query: ItemQuery?) -> CallCircumstances {
        guard let query else { return CallCircumstances(interaction: .fail) }
        let context = query.authenticationContext
        var interaction = query.authenticationUI
        if interaction == .allow && context?.interactionNotAllowed == true { interaction = .fail }
        var authenticated = context?.isOwnerAuthenticated == true
        if let context, !authenticated, context.reuseDuration > 0,
           configuration.clock().timeIntervalSince(keys.withLock { $0.lastPasswordEntry }) <= context.reuseDuration
        {
            authenticated = true  // marked on the context only when an item relied on it (permit)
        }
        return CallCircumstances(interaction: interaction, contextAuthenticated: authenticated,
                                 contextInvalidated: context?.isInvalidated == true)
    }

    /// Whether `operation` on `item` goes ahead (true) or the item is left out (false, UI Skip); a denial or a
    /// requirement is thrown.
    func permit(_ operation: ItemOperation, _ item: Item, caller: Caller, grants: AccessGrants,
                query: ItemQuery?) throws(KeychainError) -> Bool {
        var grants = grants
        if grants.applicationPassword(for: item.uuid) == nil, let password = query?.authenticationContext?.applicationPassword {
            grants.applicationPasswords[item.uuid] = password
        }
        let circumstances = circumstances(query)
        let decision = AccessEvaluator.decide(operation, on: item, by: caller, keychain: capabilities,
                                              grants: grants, circumstances: circumstances)
        // An unlock within the context's reuse window met the item's constraint: from now on the context counts as
        // authenticated, as Apple's does once it served an item.
        if decision == .allow, circumstances.contextAuthenticated, let context = query?.authenticationContext,
           !context.isOwnerAuthenticated
        {
            var without = circumstances
            without.contextAuthenticated = false
            if case .needs(.ownerAuthentication) = AccessEvaluator.decide(
                operation, on: item, by: caller, keychain: capabilities, grants: grants, circumstances: without)
            {
                context.markOwnerAuthenticated()
            }
        }
        AccessTrail.note(operation, item, keychain: filePath, decision: decision)
        return try follow(decision, item: item, operation: operation)
    }

    /// Follows a decision about `item` (nil: an item being added).
    func follow(_ decision: AccessDecision, item: Item?, operation: ItemOperation? = nil, retry: Bool = false)
        throws(KeychainError) -> Bool
    {
        switch decision {
        case .allow: return true
        case .leaveOut: return false
        case .deny(let error): throw error
        case .needs(let requirement):
            throw .needs(PendingAccess(requirement, item: item?.uuid, itemName: item?.displayName ?? "",
                                       operation: operation, retry: retry))
        }
    }

    /// Whether reading `item` may need (or be refused) more than the call brings: read constraints or an
    /// application password.
    func mayNeedAuthentication(_ item: Item) -> Bool {
        guard let ac = item.accessControl else { return false }
        return !ac.readConstraints.isEmpty || ac.needsApplicationPassword
    }

    /// Binds a BiometryCurrentSet item to the enrolment current now (nothing enrolled: nothing to bind).
    func bindEnrolment(_ item: inout Item) throws(KeychainError) {
        guard var ac = item.accessControl, ac.flags.contains(.biometryCurrentSet) else { return }
        ac.boundEnrolment = configuration.authenticator.enrolmentFingerprint
        item.accessControl = ac
    }

    /// The application password that protects `item` as it is written: the call's grant (for this item, or the
    /// one chosen for a new item) or its context's credential; none yet is a requirement (the Asker has the user
    /// choose one).
    func applicationPasswordForWriting(_ item: Item, _ query: ItemQuery, grants: AccessGrants) throws(KeychainError)
        -> SecretBytes?
    {
        guard item.accessControl?.needsApplicationPassword == true else { return nil }
        if let password = grants.applicationPassword(for: item.uuid) ?? grants.newItemApplicationPassword
            ?? query.authenticationContext?.applicationPassword
        {
            return password
        }
        let decision = AccessEvaluator.requirementDecision(.applicationPassword, circumstances(query))
        if case .needs = decision { _ = try follow(decision, item: nil) }
        throw .interactionNotAllowed("the item needs an application password")
    }

    /// The application password for `item`: the call's grant for it, else the context's credential.
    func applicationPassword(for item: UUID, query: ItemQuery?, grants: AccessGrants) -> SecretBytes? {
        grants.applicationPassword(for: item) ?? query?.authenticationContext?.applicationPassword
    }
}
