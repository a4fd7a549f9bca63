#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The decisions one call made, gathered while it runs so that keychaind can log them before its answer goes out.
///
/// Storage decides about items deep inside its calls (``AccessEvaluator`` per item, in every search, update and
/// delete), and the Asker puts the questions; both note what happened on the trail bound to the current call. It is
/// bound as a task-local value (which also works on plain threads) rather than passed as a parameter through every
/// storage call: nothing that merely runs inside a call can forget to report, and a process that keeps no log
/// binds none and pays nothing.
public final class AccessTrail: Sendable {
    @TaskLocal public static var current: AccessTrail?

    private let noted = Mutex(Noted())

    private struct Noted {
        var records: [AccessLogRecord] = []
        /// The decisions about items among `records`, once there are too many to compare one by one (most calls
        /// decide about one item: a set for them would cost more than the comparison).
        var seen: Set<Decision>?
        static let comparedOneByOne = 16

        /// Adds `record` unless the same decision about the same item is already there.
        mutating func add(_ record: AccessLogRecord) {
            if record.item != nil {
                let decision = Decision(record)
                if seen == nil, records.count >= Self.comparedOneByOne {
                    seen = Set(records.lazy.filter { $0.item != nil }.map(Decision.init))
                }
                if seen != nil {
                    if !seen!.insert(decision).inserted { return }
                } else if records.contains(where: { $0.item == record.item && Decision($0) == decision }) {
                    return
                }
            }
            records.append(record)
        }
    }

    /// What makes two notes the same decision.
    private struct Decision: Hashable {
        var item: UUID?
        var action: AccessLogRecord.Action
        var outcome: AccessLogRecord.Outcome
        var keychain: String
        var question: String?

        init(_ record: AccessLogRecord) {
            item = record.item
            action = record.action
            outcome = record.outcome
            keychain = record.keychain
            question = record.question
        }

        /// The item and what was decided: the keychain's path and the question rarely tell two apart, and hashing
        /// them would cost more than comparing them when they meet.
        func hash(into hasher: inout Hasher) {
            hasher.combine(item)
            hasher.combine(action)
            hasher.combine(outcome)
        }
    }

    public init() {}

    /// The decision `decision` about `item` for `operation`, in the keychain at `keychain`.
    public static func note(_ operation: ItemOperation, _ item: Item, keychain: String, decision: AccessDecision) {
        guard let trail = current else { return }
        let outcome: AccessLogRecord.Outcome
        var status: Int32?
        switch decision {
        case .allow: outcome = .allowed
        case .leaveOut: outcome = .leftOut
        case .deny(let error): outcome = .denied; status = error.status.rawValue
        case .needs(.keychainPassword): outcome = .needsKeychainPassword
        case .needs(.ownerAuthentication): outcome = .needsOwner
        case .needs(.consent): outcome = .needsConsent
        case .needs(.applicationPassword): outcome = .needsApplicationPassword
        }
        trail.append(AccessLogRecord(time: Date(), keychain: keychain, action: .init(operation), outcome: outcome,
                                     item: item, status: status))
    }

    /// An item added.
    public static func noteAdded(_ item: Item, keychain: String) {
        current?.append(AccessLogRecord(time: Date(), keychain: keychain, action: .add, outcome: .allowed, item: item))
    }

    /// An act on the whole keychain at `keychain` (a backup, a restore, a read of the access log; an import is
    /// its items' adds).
    public static func noteKeychainAct(_ action: AccessLogRecord.Action, keychain: String) {
        current?.append(AccessLogRecord(time: Date(), keychain: keychain, action: action, outcome: .allowed))
    }

    /// A question put to the user and how it ended.
    public static func noteQuestion(_ requirement: AccessRequirement, item: UUID?, itemName: String, keychain: String,
                                    outcome: AccessLogRecord.Outcome) {
        guard let trail = current else { return }
        var record = AccessLogRecord(time: Date(), keychain: keychain, action: .ask, outcome: outcome,
                                     question: question(requirement))
        record.item = item
        record.itemLabel = item == nil ? nil : itemName
        trail.append(record)
    }

    static func question(_ requirement: AccessRequirement) -> String {
        switch requirement {
        case .keychainPassword: "keychain password"
        case .ownerAuthentication: "owner authentication"
        case .consent(_, let changed): changed ? "consent (the program changed)" : "consent"
        case .applicationPassword: "application password"
        }
    }

    /// Adds `record` unless the same decision about the same item is already noted (a call that reads its rows
    /// again after a concurrent write decides again).
    public func append(_ record: AccessLogRecord) {
        noted.withLock { $0.add(record) }
    }

    /// What was noted, in order; the trail is empty afterwards.
    public func take() -> [AccessLogRecord] {
        noted.withLock { noted in defer { noted = Noted() }; return noted.records }
    }

    public var isEmpty: Bool { noted.withLock { $0.records.isEmpty } }
}
