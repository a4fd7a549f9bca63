#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The engine's `LAContext`: the credentials a caller has supplied or proved, how it may interact with the user,
/// and the prompter that asks. One context can satisfy several protected items with one authentication.
public final class AuthenticationContext: Sendable, Hashable {
    /// Apple's `LATouchIDAuthenticationMaximumAllowableReuseDuration`.
    public static let maximumReuseDuration: TimeInterval = 300

    struct State: Sendable {
        var applicationPassword: SecretBytes?
        var ownerAuthenticated = false
        var interactionNotAllowed = false
        var reuseDuration: TimeInterval = 0
        var invalidated = false
        var localizedReason = ""
    }

    private let state = Mutex(State())
    public let prompter: (any Prompter)?
    /// Names the context across processes: keychaind keeps its own context under this id, and only there can it
    /// become authenticated.
    public let id: UUID

    public init(id: UUID = UUID(), prompter: (any Prompter)? = nil) {
        self.id = id
        self.prompter = prompter
    }

    /// What a client tells keychaind about its context at each call: everything but whether the owner proved
    /// presence, which only the daemon decides.
    public struct Snapshot: Sendable {
        public var id: UUID
        public var applicationPassword: SecretBytes?
        public var interactionNotAllowed: Bool
        public var reuseDuration: TimeInterval
        public var localizedReason: String
        public var invalidated: Bool

        public init(id: UUID, applicationPassword: SecretBytes?, interactionNotAllowed: Bool,
                    reuseDuration: TimeInterval, localizedReason: String, invalidated: Bool) {
            self.id = id
            self.applicationPassword = applicationPassword
            self.interactionNotAllowed = interactionNotAllowed
            self.reuseDuration = reuseDuration
            self.localizedReason = localizedReason
            self.invalidated = invalidated
        }
    }

    public var snapshot: Snapshot {
        state.withLock {
            Snapshot(id: id, applicationPassword: $0.applicationPassword, interactionNotAllowed: $0.interactionNotAllowed,
                     reuseDuration: $0.reuseDuration, localizedReason: $0.localizedReason, invalidated: $0.invalidated)
        }
    }

    /// Takes a client's snapshot (keychaind's copy of a client's context); invalidation is for good.
    public func adopt(_ snapshot: Snapshot) {
        state.withLock {
            $0.applicationPassword = snapshot.applicationPassword
            $0.interactionNotAllowed = snapshot.interactionNotAllowed
            $0.reuseDuration = min(max(snapshot.reuseDuration, 0), Self.maximumReuseDuration)
            $0.localizedReason = snapshot.localizedReason
            if snapshot.invalidated {
                $0.invalidated = true
                $0.applicationPassword = nil
                $0.ownerAuthenticated = false
            }
        }
    }

    /// `LAContext.setCredential(_:type: .applicationPassword)`; nil removes it.
    public func setApplicationPassword(_ password: SecretBytes?) { state.withLock { $0.applicationPassword = password } }
    public var applicationPassword: SecretBytes? { state.withLock { $0.applicationPassword } }

    /// When true, anything that would ask the user fails with errSecInteractionNotAllowed instead.
    public var interactionNotAllowed: Bool {
        get { state.withLock { $0.interactionNotAllowed } }
        set { state.withLock { $0.interactionNotAllowed = newValue } }
    }

    /// How recent a keychain unlock may be to count as the user's authentication (0...300 seconds).
    public var reuseDuration: TimeInterval {
        get { state.withLock { $0.reuseDuration } }
        set { state.withLock { $0.reuseDuration = min(max(newValue, 0), Self.maximumReuseDuration) } }
    }

    public var localizedReason: String {
        get { state.withLock { $0.localizedReason } }
        set { state.withLock { $0.localizedReason = newValue } }
    }

    /// True once the owner proved presence through this context (until it is invalidated).
    public var isOwnerAuthenticated: Bool { state.withLock { $0.ownerAuthenticated && !$0.invalidated } }
    /// Set only by the engine, after it checked the keychain password (or a sensor) itself: nothing outside the
    /// package can declare a context authenticated.
    package func markOwnerAuthenticated() { state.withLock { $0.ownerAuthenticated = true } }

    public var isInvalidated: Bool { state.withLock { $0.invalidated } }

    /// `LAContext.invalidate()`: forgets every credential; later use fails.
    public func invalidate() {
        state.withLock {
            $0.invalidated = true
            $0.applicationPassword = nil
            $0.ownerAuthenticated = false
        }
    }

    public static func == (a: AuthenticationContext, b: AuthenticationContext) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// Asks the user for a password or a decision (a terminal, pinentry, or a test's script).
public protocol Prompter: Sendable {
    func requestPassword(_ request: PasswordRequest) -> PromptResponse
    func requestConfirmation(_ request: ConfirmationRequest) -> ConfirmationResponse
}

public struct PasswordRequest: Sendable {
    public enum Kind: Sendable { case keychainPassword, applicationPassword }
    public var kind: Kind
    /// The operation prompt (`kSecUseOperationPrompt`, `localizedReason`), shown as the description.
    public var description: String
    public var prompt: String
    /// Set when an earlier attempt was wrong.
    public var error: String?
    public init(kind: Kind, description: String, prompt: String, error: String? = nil) {
        self.kind = kind
        self.description = description
        self.prompt = prompt
        self.error = error
    }
}

public enum PromptResponse: Sendable {
    case entered(SecretBytes)
    case cancelled
    /// No way to ask (no terminal, no pinentry).
    case unavailable
}

public struct ConfirmationRequest: Sendable {
    public var description: String
    public init(description: String) { self.description = description }
}

public enum ConfirmationResponse: Sendable, Equatable {
    case deny, allow, alwaysAllow, cancelled, unavailable
}

/// A biometric sensor (Touch ID's place). A plain Linux machine has none: ``NoBiometrics``.
public protocol Authenticator: Sendable {
    /// False when there is no sensor or nothing is enrolled.
    var isAvailable: Bool { get }
    /// Identifies the enrolled set; it changes when fingers or faces are added or removed.
    var enrolmentFingerprint: Data? { get }
    /// Asks the user to authenticate; `reason` is the operation prompt.
    func authenticate(reason: String) -> AuthenticatorResult
}

public enum AuthenticatorResult: Sendable, Equatable {
    case success, failure, cancelled
}

/// The normal Linux case: no sensor, so biometry-only items behave as on a Mac without Touch ID.
public struct NoBiometrics: Authenticator {
    public init() {}
    public var isAvailable: Bool { false }
    public var enrolmentFingerprint: Data? { nil }
    public func authenticate(reason: String) -> AuthenticatorResult { .failure }
}
