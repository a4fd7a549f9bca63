#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What `security sync-…` asks keychaind to do with a keychain's sync (docs/SYNC.md).
/// `certificateAuthorities`: PEM certificates that alone may vouch for the server's TLS certificate (a server with a
/// private CA, `--ca-file`); nil: the system's trusted roots. Kept with the keychain's sync state.
public enum SyncRequest: Sendable, Equatable {
    /// Create a sync account on the server at this URL, with this device as its first, and sync.
    /// `registrationToken`: what a server that makes accounts only for those its operator chose asks for.
    case setUp(server: String, certificateAuthorities: Data? = nil, registrationToken: SecretBytes? = nil)
    /// One round now: take what the server has, send what changed here.
    case now
    /// What the keychain's sync looks like, without a round.
    case status
    /// Stop syncing this keychain on this device (its items stay; the account and the other devices go on).
    case leave
    /// Ask to join an account as a new device: the server gives a code to type on a device that already syncs.
    case join(server: String, certificateAuthorities: Data? = nil)
    /// Where the join stands: waiting, claimed by a device (the confirmation words), or done (then a first round).
    case joinStatus
    /// On a device that syncs: let the device waiting with this code in, after the user compares the words.
    case approve(code: String)
    /// Remove another device (hex id) from the account: a new epoch, whose item key only the others get.
    case removeDevice(id: String)
    /// Every device was lost: join the account as a new device with the recovery key `sync-setup` showed.
    case recover(server: String, recoveryKey: SecretBytes, certificateAuthorities: Data? = nil)
}

/// A device of a sync account, as its verified device log names it.
public struct SyncDevice: Sendable, Equatable {
    public var id: String
    /// The device that added it (itself for the first; "recovery" when the recovery key did).
    public var approvedBy: String
    public var isThisDevice: Bool

    public init(id: String, approvedBy: String, isThisDevice: Bool) {
        self.id = id
        self.approvedBy = approvedBy
        self.isThisDevice = isThisDevice
    }
}

/// The state of a keychain's sync and what a round did.
public struct SyncReport: Sendable, Equatable {
    public var server: String
    /// Hex: the account and this device.
    public var account: String
    public var device: String
    public var epoch: Int
    /// Synchronizable items this device tracks on the server.
    public var items: Int
    /// This round: items sent, received (new or changed here), deleted here, and writes that lost to another
    /// device's earlier write (the server's copy taken).
    public var sent: Int
    public var received: Int
    public var deleted: Int
    public var conflicts: Int
    /// Seconds since 1970 of the last completed round; nil before the first.
    public var lastSync: Double?
    /// Only when the account was just made: shown once, never stored by the keychain or the server.
    public var recoveryKey: SecretBytes?
    /// Devices of the account, as its verified device log says.
    public var devices = 0
    /// Joining: the code to type on a trusted device, the words both devices show once it is claimed, and whether
    /// this device is in.
    public var joinCode: String?
    public var words: [String] = []
    public var joined = false
    /// The account's devices (`sync-status`, `sync-devices`).
    public var deviceList: [SyncDevice] = []

    public init(server: String, account: String, device: String, epoch: Int, items: Int = 0, sent: Int = 0,
                received: Int = 0, deleted: Int = 0, conflicts: Int = 0, lastSync: Double? = nil,
                recoveryKey: SecretBytes? = nil) {
        self.server = server
        self.account = account
        self.device = device
        self.epoch = epoch
        self.items = items
        self.sent = sent
        self.received = received
        self.deleted = deleted
        self.conflicts = conflicts
        self.lastSync = lastSync
        self.recoveryKey = recoveryKey
    }
}
