import Foundation
import KeychainCore

/// What a device and the sync server exchange (docs/SYNC-PROTOCOL.md). JSON bodies; byte fields are base64.
/// The server sees ids, versions, epochs, sizes and times, never an attribute, a label or a secret.
public enum SyncLimits {
    /// The largest item ciphertext the server keeps: a padded item of 1 MiB plus the cipher's nonce and tag.
    public static let maxCiphertext = (1 << 20) + 28
    /// The most changes one page carries.
    public static let maxPage = 500
    /// The longest a request for changes may wait for the next one, in seconds.
    public static let maxWait = 30
    /// The most items (live or tombstones) one account holds.
    public static let maxItemsPerAccount = 200_000
    /// How far a request's time may be from the server's clock, in seconds.
    public static let signatureWindow: Int64 = 300
    /// Ids are 16 random bytes (an item's id is its keychain uuid).
    public static let idLength = 16
}

/// `POST /v1/accounts` carries the operator's registration token in this header when the server asks for one.
public let syncRegistrationTokenHeader = "X-Registration-Token"

/// `POST /v1/accounts`: the first device creates the account. The request is signed by that device's key.
public struct AccountCreation: Codable, Sendable, Equatable {
    public var account: Data
    public var device: DeviceRecord
    /// The device log's first entry, signed by the device (docs/SYNC-PROTOCOL.md "Device log").
    public var genesis: SignedLogEntry
    /// The first epoch's item key wrapped to the recovery key (so that it can recover the account).
    public var shares: [KeyShare]?

    public init(account: Data, device: DeviceRecord, genesis: SignedLogEntry, shares: [KeyShare]? = nil) {
        self.account = account
        self.device = device
        self.genesis = genesis
        self.shares = shares
    }
}

/// A device as the server keeps it: its id and public keys.
public struct DeviceRecord: Codable, Sendable, Equatable {
    public var id: Data
    /// P-256 ECDSA public key, x9.63 (uncompressed point).
    public var signingKey: Data
    /// X25519 public key, raw 32 bytes (HPKE recipient for key shares).
    public var agreementKey: Data

    public init(id: Data, signingKey: Data, agreementKey: Data) {
        self.id = id
        self.signingKey = signingKey
        self.agreementKey = agreementKey
    }
}

/// One entry of the account's device log, in its canonical bytes, with the signature of the device that wrote it.
public struct SignedLogEntry: Codable, Sendable, Equatable {
    public var entry: Data
    public var signer: Data
    public var signature: Data

    public init(entry: Data, signer: Data, signature: Data) {
        self.entry = entry
        self.signer = signer
        self.signature = signature
    }
}

/// One item's current state on the server: the latest version, or its tombstone.
public struct ItemChange: Codable, Sendable, Equatable {
    public var id: Data
    public var epoch: Int32
    /// Assigned by the server: the version a write was based on plus one.
    public var version: Int64
    /// The account's change counter when this version was written; pages of changes are ordered by it.
    public var seq: Int64
    public var deleted: Bool
    /// Milliseconds since 1970, the server's clock.
    public var modified: Int64
    /// Absent for a tombstone.
    public var ciphertext: Data?

    public init(id: Data, epoch: Int32, version: Int64, seq: Int64, deleted: Bool, modified: Int64, ciphertext: Data?) {
        self.id = id
        self.epoch = epoch
        self.version = version
        self.seq = seq
        self.deleted = deleted
        self.modified = modified
        self.ciphertext = ciphertext
    }
}

/// `GET /v1/accounts/{account}/changes?after=SEQ&limit=N`.
public struct ChangePage: Codable, Sendable, Equatable {
    public var changes: [ItemChange]
    /// The seq to ask after next time (the last change's, or `after` when there is none).
    public var last: Int64
    public var more: Bool
    /// Tombstones older than this many seconds are forgotten; a device away longer resyncs in full.
    public var horizonSeconds: Int64

    public init(changes: [ItemChange], last: Int64, more: Bool, horizonSeconds: Int64) {
        self.changes = changes
        self.last = last
        self.more = more
        self.horizonSeconds = horizonSeconds
    }
}

/// `PUT /v1/accounts/{account}/items/{id}`: write a new version if the current one is `base` (0: the item is new).
public struct ItemWrite: Codable, Sendable, Equatable {
    public var base: Int64
    public var epoch: Int32
    public var ciphertext: Data

    public init(base: Int64, epoch: Int32, ciphertext: Data) {
        self.base = base
        self.epoch = epoch
        self.ciphertext = ciphertext
    }
}

/// The answer to a write or delete that was applied.
public struct WriteAccepted: Codable, Sendable, Equatable {
    public var version: Int64
    public var seq: Int64

    public init(version: Int64, seq: Int64) {
        self.version = version
        self.seq = seq
    }
}

/// 409: the write lost; `current` is what the server holds (nil: nothing, for a delete of an unknown item).
public struct WriteConflict: Codable, Sendable, Equatable {
    public var reason: String
    public var current: ItemChange?

    public init(reason: String, current: ItemChange?) {
        self.reason = reason
        self.current = current
    }
}

/// Every 4xx and 5xx body.
public struct SyncErrorBody: Codable, Sendable, Equatable {
    public var reason: String

    public init(reason: String) { self.reason = reason }
}

/// `GET /v1/accounts/{account}/devices`: the device log, in order.
public struct DeviceLog: Codable, Sendable, Equatable {
    public var entries: [SignedLogEntry]

    public init(entries: [SignedLogEntry]) { self.entries = entries }
}

extension Data {
    /// Lowercase hex, as ids appear in paths.
    public var hexString: String { Hex.string(self) }

    /// Parses lowercase or uppercase hex; nil for anything else.
    public init?(hex: some StringProtocol) {
        guard let bytes = Hex.bytes(hex) else { return nil }
        self.init(bytes)
    }
}
