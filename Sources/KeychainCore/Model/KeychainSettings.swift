/// A keychain's auto-lock settings (`SecKeychainSettings`).
public struct KeychainSettings: Sendable, Hashable {
    /// Seconds of inactivity before the keychain locks; nil = never.
    public var lockInterval: Int?
    public var lockOnSleep: Bool

    public init(lockInterval: Int?, lockOnSleep: Bool) {
        self.lockInterval = lockInterval
        self.lockOnSleep = lockOnSleep
    }

    /// What Apple gives a new keychain: lock after 300 s idle, and on sleep.
    public static let appleDefault = KeychainSettings(lockInterval: 300, lockOnSleep: true)
    public static let never = KeychainSettings(lockInterval: nil, lockOnSleep: false)
}

/// A keychain file as a service names it: its resolved absolute path.
public struct KeychainReference: Sendable, Hashable, Codable {
    public let path: String

    public init(path: String) { self.path = path }

    /// The file name (`login.keychain-db`).
    public var fileName: String { path.split(separator: "/").last.map(String.init) ?? path }
}

/// What a service reports about one keychain.
public struct KeychainState: Sendable, Hashable {
    public var exists: Bool
    public var isLocked: Bool
    public var hasPassword: Bool

    public init(exists: Bool, isLocked: Bool, hasPassword: Bool) {
        self.exists = exists
        self.isLocked = isLocked
        self.hasPassword = hasPassword
    }
}

/// A keychain of the search list with its state, as one answer gives them (a search through keychaind would
/// otherwise ask for the list, then for each keychain's state).
public struct ListedKeychain: Sendable, Hashable {
    public var keychain: KeychainReference
    public var state: KeychainState

    public init(_ keychain: KeychainReference, _ state: KeychainState) {
        self.keychain = keychain
        self.state = state
    }
}
