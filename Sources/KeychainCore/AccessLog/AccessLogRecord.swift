#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One decision keychaind made about an item, as the access log keeps it (docs/ACCESS-LOG.md). Never a secret: the
/// item is named by its class, its id (which survives renames) and its label when it was used.
public struct AccessLogRecord: Sendable, Hashable, Codable {
    /// What the program did, or tried to do, with the item.
    public enum Action: String, Sendable, Hashable, Codable, CaseIterable {
        case readAttributes = "read attributes"
        case readSecret = "read secret"
        case add
        case change
        case delete
        case changeAccess = "change access"
        case useKey = "use key"
        case exportKey = "export key"
        /// A question put to the user on the program's behalf; ``AccessLogRecord/question`` says which.
        case ask
        /// A call that failed before any item was decided on (not found, no entitlement, a duplicate).
        case call
        // Acts on a whole keychain (the keychain's own `security`, after its owner's password).
        case backUp = "back up"
        case restore
        case readAccessLog = "read the access log"

        public init(_ operation: ItemOperation) {
            self = switch operation {
            case .readAttributes: .readAttributes
            case .readSecret: .readSecret
            case .change: .change
            case .delete: .delete
            case .changeAccess: .changeAccess
            case .useKey: .useKey
            case .exportKey: .exportKey
            }
        }
    }

    /// How it ended.
    public enum Outcome: String, Sendable, Hashable, Codable, CaseIterable {
        case allowed
        /// Left out of a result without a word (kSecUseAuthenticationUISkip).
        case leftOut = "left out"
        case denied
        case needsKeychainPassword = "needs the keychain password"
        case needsOwner = "needs the owner's authentication"
        case needsConsent = "needs the user's yes"
        case needsApplicationPassword = "needs the application password"
        // The answers to a question.
        case answeredAllow = "user allowed"
        case answeredAlwaysAllow = "user always allowed"
        case answeredDeny = "user denied"
        case given = "password given"
        case cancelled
        case failedAnswer = "wrong answer"
        case nobodyToAsk = "nobody to ask"
        /// A call that failed; ``AccessLogRecord/status`` is Apple's status.
        case failed
    }

    /// Which door the program came through.
    public enum FrontEnd: String, Sendable, Hashable, Codable, CaseIterable {
        case securityAPI = "Security API"
        case securityCommand = "security"
        case git
        case docker
        case secretService = "Secret Service"
    }

    /// Its place in the log: 1, 2, … across every file of it.
    public var sequence: UInt64 = 0
    public var time: Date
    /// The calling program: its path, and the SHA-256 of its file (hex) when keychaind could read it.
    public var program: String = ""
    public var digest: String = ""
    public var pid: Int32 = 0
    public var frontEnd: FrontEnd = .securityAPI
    /// The keychain file.
    public var keychain: String
    public var action: Action
    public var outcome: Outcome
    /// The item's class (`genp`, `inet`, `keys`, `cert`), id and label; nil for a call that named no item.
    public var itemClass: String?
    public var item: UUID?
    public var itemLabel: String?
    /// Apple's status of a denial or a failed call.
    public var status: Int32?
    /// For ``Action/ask``: what was asked ("keychain password", "owner authentication", "consent", "application
    /// password").
    public var question: String?

    public init(time: Date, keychain: String, action: Action, outcome: Outcome, item: Item? = nil,
                status: Int32? = nil, question: String? = nil) {
        self.time = time
        self.keychain = keychain
        self.action = action
        self.outcome = outcome
        itemClass = item?.itemClass.rawValue
        self.item = item?.uuid
        itemLabel = item.map(\.displayName)
        self.status = status
        self.question = question
    }
}

/// Which records `security access-log` shows.
public struct AccessLogFilter: Sendable, Hashable {
    /// Records whose program path contains this.
    public var program: String?
    /// Records of the item with this id, or whose label is this.
    public var item: String?
    public var since: Date?

    public init(program: String? = nil, item: String? = nil, since: Date? = nil) {
        self.program = program
        self.item = item
        self.since = since
    }

    public func matches(_ record: AccessLogRecord) -> Bool {
        if let program, !record.program.contains(program) { return false }
        if let item, record.item?.uuidString.lowercased() != item.lowercased(), record.itemLabel != item { return false }
        if let since, record.time < since { return false }
        return true
    }
}

/// What `security access-log` and `security verify-access-log` ask keychaind.
public enum AccessLogRequest: Sendable, Hashable {
    case read(AccessLogFilter)
    case verify
}

/// What a check of the log's files found.
public struct AccessLogCheck: Sendable, Hashable, Codable {
    /// Records that verified (chain, MAC, order).
    public var records: Int = 0
    public var files: Int = 0
    /// The first thing wrong (an altered, removed, reordered or truncated record or file), nil when none.
    public var problem: String?
    /// What is not wrong but worth knowing (a file keychaind did not close because it was killed; records before
    /// the oldest file were rotated away).
    public var notes: [String] = []

    public var isIntact: Bool { problem == nil }
    public init() {}
}

/// keychaind's answer: the records asked for, and the check made while reading them.
public struct AccessLogReport: Sendable, Hashable, Codable {
    public var records: [AccessLogRecord]
    public var check: AccessLogCheck

    public init(records: [AccessLogRecord], check: AccessLogCheck) {
        self.records = records
        self.check = check
    }
}
