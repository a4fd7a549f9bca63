/// Something that happened to a keychain, for `SecKeychainAddCallback`: which kind, to which keychain, and which
/// process did it. Through keychaind, every client that subscribed hears of every other client's changes.
public struct KeychainEvent: Sendable, Hashable {
    /// Apple's `SecKeychainEvent` values.
    public enum Kind: UInt32, Sendable, CaseIterable {
        case lock = 1, unlock = 2, add = 3, delete = 4, update = 5, passwordChanged = 6, defaultChanged = 9
        case keychainListChanged = 11
    }

    public var kind: Kind
    /// The keychain's path, when the event concerns one.
    public var keychain: String?
    /// The process that caused it (as the kernel reported it to the daemon).
    public var pid: Int32

    public init(kind: Kind, keychain: String?, pid: Int32) {
        self.kind = kind
        self.keychain = keychain
        self.pid = pid
    }
}
