#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// macOS's two keychain models, as they meet here. A data-protection item (iOS's only kind) is seen only by callers
/// entitled to its access group. A file keychain's item is seen by every program. For both, the trusted-application
/// list (macOS's ACL) decides which programs use an item they see without the user's yes.
public enum AccessModel: UInt8, Sendable, Hashable {
    case groups = 0
    case applications = 1
}

/// What a caller does with an item: the operations an access group, a trusted-application list or an access
/// control governs.
public enum ItemOperation: Sendable, Hashable, CaseIterable {
    /// The item shows up in a search (its attributes, references).
    case readAttributes
    /// Its secret is handed to the caller.
    case readSecret
    /// Its attributes or secret are changed (`SecItemUpdate`, an add that updates its duplicate).
    case change
    case delete
    /// Its access (access control, trusted applications, access group) is changed.
    case changeAccess
    /// A private-key operation run where the key lives; the key never leaves.
    case useKey
    /// A private key's bytes leave the keychain (a read of its data, a PKCS#12 export).
    case exportKey

    /// Whether the operation hands out or relies on the secret, so the program must be one the item trusts.
    var needsTrustedProgram: Bool { self != .readAttributes }

    /// The operations of the item's ACL map (semantics §5.2) that this one performs. Every operation but a
    /// delete decrypts the item first (Apple decrypts an access-controlled item even for an attribute read).
    var aclOperations: [AccessControl.Operation] {
        switch self {
        case .readAttributes, .readSecret, .change, .exportKey: [.decrypt]
        case .changeAccess: [.decrypt, .changeACL]
        case .delete: [.delete]
        case .useKey: [.decrypt, .sign]
        }
    }
}

/// One way the owner proves presence; an ``AccessRequirement/ownerAuthentication(_:)`` lists alternatives of steps.
public enum AuthenticationStep: Sendable, Hashable {
    /// The biometric sensor (Touch ID's place).
    case biometry
    /// The keychain password (the device passcode here).
    case password
}

/// What must happen before an operation may go ahead; the one ``Asker`` of the service layer obtains it.
public enum AccessRequirement: Sendable, Hashable {
    /// The keychain (or the item's class key) is locked: its password unlocks it.
    case keychainPassword
    /// The owner proves presence: any one of the alternatives, each a sequence of steps that must all succeed.
    case ownerAuthentication([[AuthenticationStep]])
    /// The user agrees that this program uses the item (Deny / Allow / Always Allow); `changed` when an earlier
    /// build of the program was trusted ("has changed since you allowed it").
    case consent(TrustedApplication, changed: Bool)
    /// The item's own application password (to open it, or, for a new item, to protect it).
    case applicationPassword
}

/// The evaluator's answer.
public enum AccessDecision: Sendable, Hashable {
    case allow
    /// Left out of the result without a word (kSecUseAuthenticationUISkip).
    case leaveOut
    case deny(KeychainError)
    case needs(AccessRequirement)
}

/// What has been proved or agreed for a call so far: the answers the ``Asker`` obtained, or a decision a prompt of
/// the Secret Service already got. Storage takes these; it never asks anyone.
public struct AccessGrants: Sendable {
    /// The owner proved presence (keychain password or sensor) for this call.
    public var ownerAuthenticated = false
    /// Items the user allowed the calling program to use (Allow): for one call, or for one Secret Service
    /// connection when its prompt got the yes.
    public var consentedItems: Set<UUID> = []
    /// Application passwords given for this call, per item (checked against the item by opening it).
    public var applicationPasswords: [UUID: SecretBytes] = [:]
    /// The application password chosen for an item being added.
    public var newItemApplicationPassword: SecretBytes?

    public init(ownerAuthenticated: Bool = false, consentedItems: Set<UUID> = [],
                applicationPasswords: [UUID: SecretBytes] = [:]) {
        self.ownerAuthenticated = ownerAuthenticated
        self.consentedItems = consentedItems
        self.applicationPasswords = applicationPasswords
    }

    /// The application password given for `item`.
    public func applicationPassword(for item: UUID) -> SecretBytes? { applicationPasswords[item] }
}

/// What the keychain can offer toward a requirement: a password to check, a sensor to ask.
public struct KeychainCapabilities: Sendable, Hashable {
    public var hasPassword: Bool
    public var biometryAvailable: Bool
    /// The enrolled set now; a BiometryCurrentSet item bound to another one cannot be opened by biometry.
    public var enrolmentFingerprint: Data?

    public init(hasPassword: Bool, biometryAvailable: Bool = false, enrolmentFingerprint: Data? = nil) {
        self.hasPassword = hasPassword
        self.biometryAvailable = biometryAvailable
        self.enrolmentFingerprint = enrolmentFingerprint
    }
}

/// How a call may involve the user: `kSecUseAuthenticationUI`, with a context that forbids interaction taken as
/// Fail; and what its context already proved.
public struct CallCircumstances: Sendable {
    public var interaction: AuthenticationUI
    /// The context's owner authentication is still good (authenticated, or an unlock within its reuse duration).
    public var contextAuthenticated: Bool
    public var contextInvalidated: Bool

    public init(interaction: AuthenticationUI = .allow, contextAuthenticated: Bool = false, contextInvalidated: Bool = false) {
        self.interaction = interaction
        self.contextAuthenticated = contextAuthenticated
        self.contextInvalidated = contextInvalidated
    }
}

/// The one place where the keychain decides who may do what with an item (issue: the boundary holds).
///
/// Inputs are values only: the caller (its access groups and, when known for certain, its program), the operation,
/// the item (group, trusted applications, access control, key attributes), what the keychain can offer, what the
/// call has proved or been granted, and how it may involve the user. The output is allow, leave out, deny with
/// Apple's status, or the one requirement to meet next. No I/O: storage applies it, the Asker obtains what it needs.
public enum AccessEvaluator {
    // MARK: - The whole keychain

    /// Whether `caller` may act on the whole keychain at once: back it up, restore into it, let a rebuilt program
    /// into the groups it claims. Only the keychain's own `security` command (of the tools that see every group,
    /// the one a person types), and in-process the process itself, which opens the files with its own keys anyway.
    public static func mayActOnWholeKeychain(_ caller: Caller) -> Bool {
        guard caller.hasWildcard else { return false }
        guard let program = caller.application?.path else { return true }
        return program.hasSuffix("/security") && caller.accessGroups.first == "security"
    }

    // MARK: - Access groups (semantics §3.2, §3.3)

    /// Whether `caller` may read items of `group` (a query that names a group it may not: errSecMissingEntitlement).
    public static func mayRead(group: String, caller: Caller) -> Bool {
        caller.hasWildcard || caller.accessGroups.contains(group)
    }

    /// Refuses a query that names a group the caller may not read.
    public static func checkReadable(_ group: String, caller: Caller) throws(KeychainError) {
        if mayRead(group: group, caller: caller) { return }
        throw KeychainError(.missingEntitlement, "access group not entitled")
    }

    /// Refuses an add, update or move into a group the caller may not write (`com.apple.token` is read-only).
    public static func checkWritable(_ group: String, caller: Caller) throws(KeychainError) {
        if group == Caller.tokenGroup { throw KeychainError(.missingEntitlement, "access group is read-only") }
        if Caller.isKeychaindWritten(group) { throw KeychainError(.missingEntitlement, "access group is keychaind's own") }
        try checkReadable(group, caller: caller)
    }

    /// Which model a new item lives by. A file keychain's (its trusted applications alone) when it is added where
    /// the calling program is known (through keychaind) and the add asks for nothing of data protection; access
    /// groups for `kSecUseDataProtectionKeychain`, synchronizable items, an explicit `kSecAttrAccessGroup`, and in
    /// embedded mode (no list is kept there).
    public static func accessModel(for query: ItemQuery, applicationAccess: ApplicationAccess?) -> AccessModel {
        guard applicationAccess != nil, !query.dataProtectionKeychain, query.sync != .synchronizable,
              query.accessGroup == nil
        else { return .groups }
        return .applications
    }

    /// Whether `item` exists at all for `caller` doing `operation`: a file keychain's item exists for every
    /// program; a data-protection item only for callers entitled to its group (update and delete never touch
    /// `com.apple.token`).
    public static func isVisible(_ item: Item, to caller: Caller, for operation: Operation) -> Bool {
        guard !Caller.isKeychaindOwn(item.accessGroup) else { return false }  // keychaind's own keys: no caller's
        return item.accessModel == .applications || isVisible(group: item.accessGroup, to: caller, for: operation)
    }

    /// Whether an item of `group` exists at all for `caller` doing `operation`: items of other groups are not
    /// found; update and delete never touch `com.apple.token`.
    public static func isVisible(group: String, to caller: Caller, for operation: Operation) -> Bool {
        if Caller.isKeychaindOwn(group) { return false }
        if caller.hasWildcard { return true }
        if (operation == .update || operation == .delete) && group == Caller.tokenGroup { return false }
        return caller.accessGroups.contains(group)
    }

    // MARK: - Key attributes (semantics §5.2)

    /// A change of a key's protection that would loosen it: `kSecAttrIsExtractable` only goes from true to false
    /// and `kSecAttrIsSensitive` only from false to true, as CSSM's key attributes only tighten on macOS.
    public static func checkKeyProtectionChange(from old: Item, to new: Item) throws(KeychainError) {
        guard old.itemClass == .key else { return }
        if old.attributes["extr"]?.numberValue == 0 && new.attributes["extr"]?.numberValue != 0 {
            throw .param("a key that is not extractable stays so")
        }
        if old.attributes["sens"]?.numberValue == 1 && new.attributes["sens"]?.numberValue != 1 {
            throw .param("a sensitive key stays sensitive")
        }
    }

    /// A private-key operation the key was stored without (`kSecAttrCanSign`, `CanDecrypt`, `CanDerive` false) is
    /// refused at use, as Apple enforces a key's usage attributes (errSecKeyUsageIncorrect).
    public static func checkKeyUsage(_ item: Item, for use: KeyUse.Operation) throws(KeychainError) {
        let attribute: String? = switch use {
        case .sign: "sign"
        case .decrypt: "decr"
        case .keyExchange: "drve"
        case .copyPublicKey: nil
        }
        guard let attribute, item.attributes[attribute]?.numberValue == 0 else { return }
        throw KeychainError(.keyUsageIncorrect, "the key was stored without this use (\(attribute) is false)")
    }

    // MARK: - The decision

    /// Decides `operation` on `item` for `caller`.
    public static func decide(_ operation: ItemOperation, on item: Item, by caller: Caller,
                              keychain: KeychainCapabilities, grants: AccessGrants,
                              circumstances: CallCircumstances) -> AccessDecision {
        guard isVisible(item, to: caller, for: operation.queryOperation) else {
            return .deny(.itemNotFound())
        }
        if (operation == .readSecret || operation == .exportKey) && item.isNonExportablePrivateKey {
            return .deny(KeychainError(.keyIsSensitive, "a private key that is not extractable is used, never read"))
        }
        // The trusted-application list first: a program the item does not name is asked about (for anything beyond
        // seeing the item) before anyone types a password for it.
        if needsConsent(operation, on: item, by: caller, grants: grants), let application = caller.application,
           let access = item.applicationAccess
        {
            return requirementDecision(.consent(application, changed: access.trustedEarlierBuild(of: application)), circumstances)
        }
        // The item's access control: the owner proves presence for the operations its ACL map guards.
        if let requirement = ownerAuthentication(operation, item, keychain, grants, circumstances) {
            switch requirement {
            case .failure(let error): return .deny(error)
            case .requirement(let needed): return requirementDecision(needed, circumstances)
            }
        }
        // The application password opens the item key itself; every operation but a delete opens it.
        if item.accessControl?.needsApplicationPassword == true, operation != .delete,
           grants.applicationPassword(for: item.uuid) == nil
        {
            return requirementDecision(.applicationPassword, circumstances)
        }
        return .allow
    }

    /// Whether a program must be asked before it uses `item` for `operation`: the list part of ``decide``, for
    /// callers that only need to know (a Secret Service item's Locked property).
    public static func needsConsent(_ operation: ItemOperation, on item: Item, by caller: Caller,
                                    grants: AccessGrants) -> Bool {
        needsConsent(operation, access: item.applicationAccess, of: item.uuid, by: caller, grants: grants)
    }

    /// The same for an item known by its trusted-application list alone (the Secret Service's session items).
    public static func needsConsent(_ operation: ItemOperation, access: ApplicationAccess?, of item: UUID,
                                    by caller: Caller, grants: AccessGrants) -> Bool {
        guard operation.needsTrustedProgram, let application = caller.application, let access else { return false }
        return !access.trusts(application) && !grants.consentedItems.contains(item)
    }

    /// A requirement as the call may meet it: asked for, left out (UI Skip) or errSecInteractionNotAllowed.
    public static func requirementDecision(_ requirement: AccessRequirement, _ circumstances: CallCircumstances) -> AccessDecision {
        switch circumstances.interaction {
        case .allow: .needs(requirement)
        case .skip: .leaveOut
        case .fail: .deny(.interactionNotAllowed(reason(requirement)))
        }
    }

    static func reason(_ requirement: AccessRequirement) -> String {
        switch requirement {
        case .keychainPassword: "the keychain is locked"
        case .ownerAuthentication: "the item needs authentication"
        case .consent(let application, _): "\(application.path) is not trusted by the item"
        case .applicationPassword: "the item needs its application password"
        }
    }

    private enum OwnerOutcome { case failure(KeychainError), requirement(AccessRequirement) }

    /// The owner authentication `operation` needs under the item's access control, nil when none is needed.
    private static func ownerAuthentication(_ operation: ItemOperation, _ item: Item, _ keychain: KeychainCapabilities,
                                            _ grants: AccessGrants, _ circumstances: CallCircumstances) -> OwnerOutcome? {
        guard let ac = item.accessControl else { return nil }
        var required: AccessControl.Flags = []
        for aclOperation in operation.aclOperations {
            if case .requires(let flags, _) = ac.constraint(for: aclOperation) { required.formUnion(flags) }
        }
        guard !required.isEmpty else { return nil }
        if circumstances.contextInvalidated {
            return .failure(KeychainError(.authFailed, "the authentication context was invalidated"))
        }
        if grants.ownerAuthenticated || circumstances.contextAuthenticated { return nil }
        // UI Skip leaves out every item that would need authentication, whatever could satisfy it.
        if circumstances.interaction == .skip { return .requirement(.ownerAuthentication([])) }
        let sensor = keychain.biometryAvailable
        let currentSet = sensor && ac.boundEnrolment != nil && ac.boundEnrolment == keychain.enrolmentFingerprint
        // What can meet each constraint here: biometry needs a sensor (and, for CurrentSet, the enrolment the item
        // was bound to); the device passcode is the keychain password; user presence is either; no companion.
        func ways(_ flag: AccessControl.Flags) -> [AuthenticationStep] {
            switch flag {
            case .biometryAny: sensor ? [.biometry] : []
            case .biometryCurrentSet: currentSet ? [.biometry] : []
            case .devicePasscode: keychain.hasPassword ? [.password] : []
            case .userPresence: (sensor ? [.biometry] : []) + (keychain.hasPassword ? [.password] : [])
            default: []
            }
        }
        let individual = [AccessControl.Flags.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .companion]
            .filter { required.contains($0) }
        var alternatives: [[AuthenticationStep]]
        if ac.anyConstraintSuffices {
            alternatives = []
            for flag in individual { for step in ways(flag) where !alternatives.contains([step]) { alternatives.append([step]) } }
        } else if individual.allSatisfy({ !ways($0).isEmpty }) {
            // All of them: each constraint met in turn (user presence by its first way; a step met once counts for
            // every constraint it serves).
            var steps: [AuthenticationStep] = []
            for flag in individual { if let step = ways(flag).first, !steps.contains(step) { steps.append(step) } }
            alternatives = [steps]
            if individual == [.userPresence], keychain.hasPassword, sensor { alternatives = [[.biometry], [.password]] }
        } else {
            alternatives = []
        }
        guard !alternatives.isEmpty else {
            return .failure(KeychainError(.authFailed, keychain.hasPassword
                ? "biometry or a companion device is needed and not available"
                : "the keychain has no password (no passcode set)"))
        }
        return .requirement(.ownerAuthentication(alternatives))
    }
}

extension ItemOperation {
    /// The query operation whose visibility rule applies.
    var queryOperation: Operation {
        switch self {
        case .readAttributes, .readSecret, .useKey, .exportKey: .search
        case .change, .changeAccess: .update
        case .delete: .delete
        }
    }
}

extension ItemUpdate {
    /// Whether the update changes who may use the item or how it is protected (macOS's "change ACL" authorisation).
    public var changesAccess: Bool { accessGroup != nil || accessibility != nil || accessControl != nil }
}
