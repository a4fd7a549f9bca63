import Foundation
import KeychainClient
import KeychainCore
import Security
import Synchronization

// LocalAuthentication on Linux. The "device owner" is whoever knows the keychain password (the passcode here);
// there is no biometric sensor or paired watch, so those policies report biometryNotAvailable, as a Mac without
// Touch ID does.

public let LAErrorDomain = "com.apple.LocalAuthentication"
public let LATouchIDAuthenticationMaximumAllowableReuseDuration: TimeInterval =
    AuthenticationContext.maximumReuseDuration

public enum LAPolicy: Int, Sendable {
    case deviceOwnerAuthenticationWithBiometrics = 1
    case deviceOwnerAuthentication = 2
    case deviceOwnerAuthenticationWithWatch = 3
    case deviceOwnerAuthenticationWithBiometricsOrWatch = 4
    case deviceOwnerAuthenticationWithWristDetection = 5
    case deviceOwnerAuthenticationWithCompanion = 6
}

public enum LACredentialType: Int, Sendable {
    case applicationPassword = 0
    case smartCardPIN = -3
}

public enum LAAccessControlOperation: Int, Sendable {
    case createItem = 0, useItem = 1, createKey = 2, useKeySign = 3, useKeyDecrypt = 4, useKeyKeyExchange = 5
}

public enum LABiometryType: Int, Sendable {
    case none = 0, touchID = 1, faceID = 2, opticID = 4
}

/// LocalAuthentication errors, with Apple's codes.
public struct LAError: Error, Hashable, Sendable, CustomNSError {
    public enum Code: Int, Sendable {
        case authenticationFailed = -1, userCancel = -2, userFallback = -3, systemCancel = -4, passcodeNotSet = -5
        case biometryNotAvailable = -6, biometryNotEnrolled = -7, biometryLockout = -8, appCancel = -9
        case invalidContext = -10, companionNotAvailable = -11, biometryNotPaired = -12
        case biometryDisconnected = -13, invalidDimensions = -14, notInteractive = -1004
        public static let touchIDNotAvailable = Code.biometryNotAvailable
        public static let touchIDNotEnrolled = Code.biometryNotEnrolled
        public static let touchIDLockout = Code.biometryLockout
        public static let watchNotAvailable = Code.companionNotAvailable
    }
    public let code: Code
    public init(_ code: Code) { self.code = code }
    public static var errorDomain: String { LAErrorDomain }
    public var errorCode: Int { code.rawValue }
    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: "\(code)"] }

    public static let authenticationFailed = Code.authenticationFailed, userCancel = Code.userCancel
    public static let passcodeNotSet = Code.passcodeNotSet, biometryNotAvailable = Code.biometryNotAvailable
    public static let invalidContext = Code.invalidContext, notInteractive = Code.notInteractive
}

extension LAError.Code {
    /// Lets callers write `catch LAError.userCancel { … }`.
    public static func ~= (code: Self, error: any Error) -> Bool { (error as? LAError)?.code == code }
}

/// `NSError **` as Apple's Swift overlay spells it (`var error: NSError?; canEvaluatePolicy(p, error: &error)`).
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?

/// The authentication context: pass it as `kSecUseAuthenticationContext` so that one successful evaluation (or an
/// application password set on it) satisfies the keychain items that ask for it.
open class LAContext: NSObject, AuthenticationContextProviding, @unchecked Sendable {
    // SAFETY: every mutable state lives in `engine` (Sendable) or behind `titles`' lock; an open NSObject subclass
    // cannot be checked Sendable by the compiler.
    package let engine: AuthenticationContext

    public override init() {
        engine = AuthenticationContext(prompter: DefaultPrompter.make())
        super.init()
    }

    /// A context that asks through `prompter` (tests, or an application with its own UI).
    public init(prompter: (any Prompter)?) {
        engine = AuthenticationContext(prompter: prompter)
        super.init()
    }

    open var localizedReason: String {
        get { engine.localizedReason }
        set { engine.localizedReason = newValue }
    }
    /// The button titles (pinentry has no place for them; kept for code that sets and reads them), under a lock:
    /// with `engine`, they are all the state there is.
    private let titles = Mutex<(fallback: String?, cancel: String?)>((nil, nil))
    open var localizedFallbackTitle: String? {
        get { titles.withLock { $0.fallback } }
        set { titles.withLock { $0.fallback = newValue } }
    }
    open var localizedCancelTitle: String? {
        get { titles.withLock { $0.cancel } }
        set { titles.withLock { $0.cancel = newValue } }
    }
    open var interactionNotAllowed: Bool {
        get { engine.interactionNotAllowed }
        set { engine.interactionNotAllowed = newValue }
    }
    open var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { engine.reuseDuration }
        set { engine.reuseDuration = newValue }
    }
    open var biometryType: LABiometryType { .none }
    open var evaluatedPolicyDomainState: Data? { nil }

    /// Whether `policy` can be evaluated now; biometric and companion policies cannot (no sensor, no watch).
    open func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        if let failure = precondition(for: policy) {
            error?.pointee = failure as NSError
            return false
        }
        return true
    }

    /// Asks for the keychain password (the passcode) through the prompter, up to five times.
    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String,
                             reply: @escaping @Sendable (Bool, (any Error)?) -> Void) {
        let outcome = evaluate(policy, reason: localizedReason)
        reply(outcome == nil, outcome)
    }

    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        if let failure = evaluate(policy, reason: localizedReason) { throw failure }
        return true
    }

    /// Evaluates an item's access control ahead of time, so a later `SecItemCopyMatching` with this context does not ask.
    open func evaluateAccessControl(_ accessControl: SecAccessControl, operation: LAAccessControlOperation,
                                    localizedReason: String, reply: @escaping @Sendable (Bool, (any Error)?) -> Void) {
        let flags = accessControlFlags(accessControl)
        if flags.intersection(AccessControl.Flags.constraints).isEmpty {
            reply(true, nil)
            return
        }
        let usable = flags.intersection([.userPresence, .devicePasscode])
        let others = flags.intersection(AccessControl.Flags.constraints).subtracting(usable)
        if flags.contains(.or) ? usable.isEmpty : !others.isEmpty {
            reply(false, LAError(.biometryNotAvailable))
            return
        }
        evaluatePolicy(.deviceOwnerAuthentication, localizedReason: localizedReason, reply: reply)
    }

    @discardableResult
    open func setCredential(_ credential: Data?, type: LACredentialType) -> Bool {
        guard type == .applicationPassword else { return false }
        engine.setApplicationPassword(credential.map { SecretBytes($0) })
        return true
    }

    open func isCredentialSet(_ type: LACredentialType) -> Bool {
        type == .applicationPassword && engine.applicationPassword != nil
    }

    open func invalidate() { engine.invalidate() }

    // MARK: - Evaluation

    private func precondition(for policy: LAPolicy) -> LAError? {
        if engine.isInvalidated { return LAError(.invalidContext) }
        switch policy {
        case .deviceOwnerAuthenticationWithBiometrics: return LAError(.biometryNotAvailable)
        case .deviceOwnerAuthenticationWithWatch, .deviceOwnerAuthenticationWithCompanion,
            .deviceOwnerAuthenticationWithWristDetection:
            return LAError(.companionNotAvailable)
        case .deviceOwnerAuthentication, .deviceOwnerAuthenticationWithBiometricsOrWatch:
            guard let service = try? KeychainClient.shared().service,
                let state = try? service.state(of: service.defaultKeychain()), state.hasPassword
            else {
                return LAError(.passcodeNotSet)
            }
            return nil
        }
    }

    private func evaluate(_ policy: LAPolicy, reason: String) -> LAError? {
        if let failure = precondition(for: policy) { return failure }
        if engine.isOwnerAuthenticated { return nil }
        if engine.interactionNotAllowed { return LAError(.notInteractive) }
        guard let prompter = engine.prompter, let client = try? KeychainClient.shared() else {
            return LAError(.notInteractive)
        }
        let call = Asker.Call(operationPrompt: reason.isEmpty ? engine.localizedReason : reason, context: engine)
        do throws(KeychainError) {
            try Asker(prompter: prompter).askOwnerPassword(
                call: call, gate: ServicePasswordGate(service: client.service, keychain: client.keychain),
                prompter: prompter, fallback: "")
            return nil
        } catch {
            switch error.status {
            case .userCanceled: return LAError(.userCancel)
            case .interactionNotAllowed: return LAError(.notInteractive)
            default: return LAError(.authenticationFailed)  // five wrong answers, or the back-off refuses to try
            }
        }
    }
}
