#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An item's access control (`SecAccessControl`): its accessibility plus flags that demand more than an
/// unlocked keychain (semantics §5.1).
public struct AccessControl: Sendable, Hashable {
    public let protection: Accessibility
    public let flags: Flags
    /// For BiometryCurrentSet: the enrolment the item was bound to when it was stored (set by the engine).
    public var boundEnrolment: Data?

    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt64
        public init(rawValue: UInt64) { self.rawValue = rawValue }
        public static let userPresence = Flags(rawValue: 1 << 0)
        public static let biometryAny = Flags(rawValue: 1 << 1)
        public static let biometryCurrentSet = Flags(rawValue: 1 << 3)
        public static let devicePasscode = Flags(rawValue: 1 << 4)
        public static let companion = Flags(rawValue: 1 << 5)
        public static let or = Flags(rawValue: 1 << 14)
        public static let and = Flags(rawValue: 1 << 15)
        public static let privateKeyUsage = Flags(rawValue: 1 << 30)
        public static let applicationPassword = Flags(rawValue: 1 << 31)

        /// The flags that are constraints someone must satisfy (as opposed to modifiers).
        public static let constraints: Flags = [.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode,
                                                .companion]
    }

    /// Validates as `SecAccessControlCreateWithFlags` does; rejected combinations give `errSecParam`.
    public init(protection: Accessibility, flags: Flags) throws(KeychainError) {
        if flags.contains(.or) && flags.contains(.and) { throw .param("access control: both Or and And") }
        if flags.contains(.biometryAny) && flags.contains(.biometryCurrentSet) {
            throw .param("access control: both BiometryAny and BiometryCurrentSet")
        }
        if flags.contains(.userPresence) {
            let allowed: Flags = [.userPresence, .applicationPassword, .privateKeyUsage]
            if !flags.subtracting(allowed).isEmpty {
                throw .param("access control: UserPresence combined with other constraints")
            }
        }
        let known: Flags = Flags.constraints.union([.or, .and, .privateKeyUsage, .applicationPassword])
        if !flags.subtracting(known).isEmpty { throw .param("access control: unknown flags") }
        self.protection = protection
        self.flags = flags
    }

    /// An operation on a protected item (Apple's ACL operation codes, semantics §5.2).
    public enum Operation: String, Sendable, CaseIterable {
        case decrypt = "od", encrypt = "oe", delete = "odel", changeACL = "dacl", sign = "osgn"
    }

    /// What an operation requires.
    public enum Constraint: Sendable, Hashable {
        case allowed
        /// The listed constraints: any one of them (`Or`) or all of them.
        case requires(Flags, anyOf: Bool)
    }

    /// The ACL map `SecAccessControlCreateWithFlags` builds from the flags (semantics §5.2): with constraints and no
    /// PrivateKeyUsage, `od` carries them and `oe`, `odel` are true; with PrivateKeyUsage, signing carries them and
    /// `odel` is true; with no constraints everything is allowed (`dacl = true`). Changing the ACL goes through an
    /// update, which decrypts the item first, so it needs what `od` needs.
    public func constraint(for operation: Operation) -> Constraint {
        let required = flags.intersection(Self.Flags.constraints)
        guard !required.isEmpty else { return .allowed }
        let guarded: Set<Operation> = flags.contains(.privateKeyUsage) ? [.sign] : [.decrypt, .changeACL]
        return guarded.contains(operation) ? .requires(required, anyOf: flags.contains(.or)) : .allowed
    }

    /// The constraints reading the item's secret needs (Apple's `od` operation).
    public var readConstraints: Flags {
        if case .requires(let required, _) = constraint(for: .decrypt) { return required }
        return []
    }

    /// True when any one constraint suffices (`Or`); otherwise all are needed (`And`, or several without either).
    public var anyConstraintSuffices: Bool { flags.contains(.or) }

    /// True when the item key is wrapped a second time under a key derived from an application password.
    public var needsApplicationPassword: Bool { flags.contains(.applicationPassword) }

    /// True when the object carries an ACL map. Every object `SecAccessControlCreateWithFlags` makes has one
    /// (flags 0 give `dacl = true`), which is why access control and synchronizable exclude each other.
    public var hasACL: Bool { true }
}
