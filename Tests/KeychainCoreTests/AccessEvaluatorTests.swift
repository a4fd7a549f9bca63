import Foundation
import KeychainCore
import Testing

/// The one access decision, as a table: caller, operation, item, keychain, grants and circumstances in; allow,
/// leave out, deny or the next requirement out.
@Suite("Access evaluator")
struct AccessEvaluatorTests {
    static let creator = TrustedApplication(path: "/opt/app/creator", digest: Data(repeating: 1, count: 32))
    static let other = TrustedApplication(path: "/usr/bin/other", digest: Data(repeating: 2, count: 32))
    static let rebuilt = TrustedApplication(path: "/opt/app/creator", digest: Data(repeating: 3, count: 32))

    static func item(group: String = "G", trusted: [TrustedApplication]? = [creator], flags: AccessControl.Flags? = nil,
                     keyAttributes: [String: AttributeValue]? = nil) -> Item {
        var attributes: [String: AttributeValue] = ["agrp": .string(group), "labl": .string("Item")]
        var itemClass = ItemClass.genericPassword
        if let keyAttributes {
            itemClass = .key
            attributes.merge(keyAttributes) { $1 }
        }
        return Item(itemClass: itemClass, attributes: attributes,
                    accessControl: flags.map { try! AccessControl(protection: .whenUnlocked, flags: $0) },
                    applicationAccess: trusted.map { .trusted($0) })
    }

    static func decide(_ operation: ItemOperation, _ item: Item, caller: TrustedApplication? = creator,
                       groups: [String] = ["G"], password: Bool = true, sensor: Bool = false,
                       grants: AccessGrants = AccessGrants(), ui: AuthenticationUI = .allow,
                       contextAuthenticated: Bool = false, invalidated: Bool = false) -> AccessDecision {
        AccessEvaluator.decide(
            operation, on: item, by: Caller(accessGroups: groups, application: caller),
            keychain: KeychainCapabilities(hasPassword: password, biometryAvailable: sensor),
            grants: grants, circumstances: CallCircumstances(interaction: ui, contextAuthenticated: contextAuthenticated,
                                                             contextInvalidated: invalidated))
    }

    @Test("the trusted-application list: the creator does anything; another program sees attributes and is asked for the rest")
    func trustedPrograms() {
        let item = Self.item()
        for operation in ItemOperation.allCases {
            #expect(Self.decide(operation, item) == .allow, "\(operation)")
        }
        #expect(Self.decide(.readAttributes, item, caller: Self.other) == .allow)
        for operation in [ItemOperation.readSecret, .change, .delete, .changeAccess, .useKey] {
            #expect(Self.decide(operation, item, caller: Self.other) == .needs(.consent(Self.other, changed: false)),
                    "\(operation)")
            // UI Skip leaves it out; UI Fail (or a context that forbids interaction) is errSecInteractionNotAllowed.
            #expect(Self.decide(operation, item, caller: Self.other, ui: .skip) == .leaveOut)
            #expect(Self.decide(operation, item, caller: Self.other, ui: .fail) == .deny(KeychainError(.interactionNotAllowed)))
            // A yes for this item (Allow) lets it through; a yes for another item does not.
            #expect(Self.decide(operation, item, caller: Self.other, grants: AccessGrants(consentedItems: [item.uuid])) == .allow)
            #expect(Self.decide(operation, item, caller: Self.other, grants: AccessGrants(consentedItems: [UUID()]))
                    == .needs(.consent(Self.other, changed: false)))
        }
    }

    @Test("a rebuilt program is asked, and told it changed; any program and an unknown caller are not asked")
    func changedAndOpenItems() {
        #expect(Self.decide(.readSecret, Self.item(), caller: Self.rebuilt) == .needs(.consent(Self.rebuilt, changed: true)))
        #expect(Self.decide(.delete, Self.item(), caller: Self.rebuilt) == .needs(.consent(Self.rebuilt, changed: true)))
        // `-A`: every program; nil list: an item from before lists existed.
        let anyProgram = Item(itemClass: .genericPassword, attributes: ["agrp": .string("G")], applicationAccess: .anyApplication)
        #expect(Self.decide(.change, anyProgram, caller: Self.other) == .allow)
        #expect(Self.decide(.readSecret, Self.item(trusted: nil), caller: Self.other) == .allow)
        // `-T ""`: nobody, the creator included, is trusted.
        #expect(Self.decide(.readSecret, Self.item(trusted: []), caller: Self.creator) == .needs(.consent(Self.creator, changed: false)))
        // Embedded mode: the calling program is not known for certain, so lists are not enforced.
        #expect(Self.decide(.readSecret, Self.item(), caller: nil) == .allow)
    }

    @Test("access groups: another group's item does not exist for the caller; the wildcard sees all; token is read-only")
    func groups() {
        let item = Self.item(group: "H")
        #expect(Self.decide(.readSecret, item) == .deny(KeychainError(.itemNotFound)))
        #expect(Self.decide(.readSecret, item, groups: ["G", Caller.wildcardGroup]) == .allow)
        let token = Self.item(group: Caller.tokenGroup, trusted: nil)
        let caller = Caller(accessGroups: ["G", Caller.tokenGroup])
        #expect(AccessEvaluator.isVisible(group: Caller.tokenGroup, to: caller, for: .search))
        #expect(!AccessEvaluator.isVisible(group: Caller.tokenGroup, to: caller, for: .update))
        #expect(Self.decide(.delete, token, groups: ["G", Caller.tokenGroup]) == .deny(KeychainError(.itemNotFound)))
        #expect(throws: KeychainError(.missingEntitlement)) { try AccessEvaluator.checkWritable(Caller.tokenGroup, caller: caller) }
        #expect(throws: KeychainError(.missingEntitlement)) { try AccessEvaluator.checkReadable("H", caller: caller) }
    }

    @Test("the Secret portal's group is written by keychaind alone: not even the wildcard adds into it, yet it is seen")
    func portalGroupIsKeychaindWritten() {
        let tools = Caller(accessGroups: ["security", Caller.wildcardGroup])
        #expect(throws: KeychainError(.missingEntitlement)) {
            try AccessEvaluator.checkWritable(Caller.portalSecretGroup, caller: tools)
        }
        #expect(AccessEvaluator.isVisible(group: Caller.portalSecretGroup, to: tools, for: .search))
        #expect(!Caller.isKeychaindOwn(Caller.portalSecretGroup))  // listed, and backed up
    }

    @Test("access control: presence for reads, changes and access changes; none for a delete; the context and grants count")
    func accessControl() {
        let item = Self.item(flags: [.userPresence])
        for operation in [ItemOperation.readAttributes, .readSecret, .change, .changeAccess] {
            #expect(Self.decide(operation, item) == .needs(.ownerAuthentication([[.password]])), "\(operation)")
        }
        #expect(Self.decide(.delete, item) == .allow)
        #expect(Self.decide(.readSecret, item, grants: AccessGrants(ownerAuthenticated: true)) == .allow)
        #expect(Self.decide(.readSecret, item, contextAuthenticated: true) == .allow)
        #expect(Self.decide(.readSecret, item, contextAuthenticated: true, invalidated: true) == .deny(KeychainError(.authFailed)))
        #expect(Self.decide(.readSecret, item, ui: .skip) == .leaveOut)
        #expect(Self.decide(.readSecret, item, ui: .fail) == .deny(KeychainError(.interactionNotAllowed)))
        // With a sensor, user presence is either; biometry alone needs the sensor.
        #expect(Self.decide(.readSecret, item, sensor: true) == .needs(.ownerAuthentication([[.biometry], [.password]])))
        #expect(Self.decide(.readSecret, Self.item(flags: [.biometryAny])) == .deny(KeychainError(.authFailed)))
        #expect(Self.decide(.readSecret, Self.item(flags: [.biometryAny, .or, .devicePasscode]))
                == .needs(.ownerAuthentication([[.password]])))
        #expect(Self.decide(.readSecret, Self.item(flags: [.biometryAny, .and, .devicePasscode]), sensor: true)
                == .needs(.ownerAuthentication([[.biometry, .password]])))
        // No passcode on this "device": the passcode constraint cannot be met.
        #expect(Self.decide(.readSecret, Self.item(flags: [.devicePasscode]), password: false) == .deny(KeychainError(.authFailed)))
        // PrivateKeyUsage moves the constraint to signing: using the key asks, reading its attributes does not.
        let key = Self.item(flags: [.userPresence, .privateKeyUsage], keyAttributes: ["kcls": .number(1)])
        #expect(Self.decide(.readAttributes, key) == .allow)
        #expect(Self.decide(.useKey, key) == .needs(.ownerAuthentication([[.password]])))
    }

    @Test("an application password is needed for everything but a delete, per item; the program's yes comes first")
    func applicationPassword() {
        let item = Self.item(flags: [.applicationPassword])
        #expect(Self.decide(.readAttributes, item) == .needs(.applicationPassword))
        #expect(Self.decide(.delete, item) == .allow)
        let given = AccessGrants(applicationPasswords: [item.uuid: SecretBytes(utf8: "pw")])
        #expect(Self.decide(.readSecret, item, grants: given) == .allow)
        // Given for another item: still needed here.
        #expect(Self.decide(.readSecret, item, grants: AccessGrants(applicationPasswords: [UUID(): SecretBytes(utf8: "pw")]))
                == .needs(.applicationPassword))
        // Another program is asked about first, before anyone types a password for it.
        #expect(Self.decide(.readSecret, item, caller: Self.other) == .needs(.consent(Self.other, changed: false)))
        #expect(Self.decide(.readSecret, Self.item(flags: [.userPresence]), caller: Self.other)
                == .needs(.consent(Self.other, changed: false)))
    }

    @Test("a private key that must not leave is never read or exported, only used; its protection only tightens")
    func keys() throws {
        let sealed = Self.item(keyAttributes: ["kcls": .number(1), "extr": .number(0)])
        #expect(Self.decide(.readSecret, sealed) == .deny(KeychainError(.keyIsSensitive)))
        #expect(Self.decide(.exportKey, sealed) == .deny(KeychainError(.keyIsSensitive)))
        #expect(Self.decide(.useKey, sealed) == .allow)
        let open = Self.item(keyAttributes: ["kcls": .number(1), "extr": .number(1)])
        #expect(Self.decide(.exportKey, open) == .allow)
        var loosened = sealed
        loosened.attributes["extr"] = .number(1)
        #expect(throws: KeychainError(.param)) { try AccessEvaluator.checkKeyProtectionChange(from: sealed, to: loosened) }
        var sensitive = open
        sensitive.attributes["sens"] = .number(1)
        var insensitive = sensitive
        insensitive.attributes["sens"] = .number(0)
        #expect(throws: KeychainError(.param)) { try AccessEvaluator.checkKeyProtectionChange(from: sensitive, to: insensitive) }
        // Tightening is fine.
        try AccessEvaluator.checkKeyProtectionChange(from: open, to: sealed)
    }
}
