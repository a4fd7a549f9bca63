import Foundation
import KeychainCore
import Synchronization

/// The `session` collection: items held in keychaind's memory only, never written anywhere, gone when keychaind
/// stops (gnome-keyring's session collection, libsecret's SECRET_COLLECTION_SESSION). It is never locked; its items
/// follow the keychains' rule: the program that stored an item reads it, another one is asked about.
final class SecretSessionCollection: Sendable {
    static let path = SecretServiceServer.collectionPrefix + "session"
    /// Bounds what one client can make keychaind hold.
    static let maximumItems = 4096

    struct Item: Sendable {
        var label: String
        var attributes: [String: String]
        var secret: SecretBytes
        var contentType: String
        var created: UInt64
        var modified: UInt64
        /// The programs that read without asking (its creator; Always Allow adds others). nil: every program.
        var access: ApplicationAccess?
    }

    private struct State {
        var items: [UUID: Item] = [:]
        var modified: UInt64
    }
    private let state: Mutex<State>
    let created: UInt64

    init() {
        let now = Self.now
        created = now
        state = Mutex(State(modified: now))
    }

    static var now: UInt64 { UInt64(max(0, Date().timeIntervalSince1970)) }

    static func itemPath(_ id: UUID) -> String {
        path + "/i" + id.uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    }

    /// The item a path names (`…/collection/session/i<hex>`), or nil.
    static func itemID(_ path: String) -> UUID? {
        guard path.hasPrefix(Self.path + "/i") else { return nil }
        return SecretServiceObjects.uuid(hex: path.dropFirst(Self.path.count + 2))
    }

    var modified: UInt64 { state.withLock { $0.modified } }

    func item(_ id: UUID) -> Item? { state.withLock { $0.items[id] } }

    /// The items whose attributes include all of `wanted`, oldest first.
    func search(_ wanted: [String: String]) -> [(UUID, Item)] {
        state.withLock { state in
            state.items.filter { entry in wanted.allSatisfy { entry.value.attributes[$0.key] == $0.value } }
                .sorted { ($0.value.created, $0.key.uuidString) < ($1.value.created, $1.key.uuidString) }
        }
    }

    enum Stored { case created(UUID), replaced(UUID), notYours, full }

    /// Stores an item. With `replace`, an item with exactly this attribute set is replaced in place (when
    /// `mayReplace` lets it); without, a new one is added beside it.
    func store(label: String, attributes: [String: String], secret: SecretBytes, contentType: String, replace: Bool,
               creator: TrustedApplication?, mayReplace: (UUID, Item) -> Bool) -> Stored {
        state.withLock { state in
            let now = Self.now
            state.modified = now
            if replace, let (id, existing) = state.items.first(where: { $0.value.attributes == attributes }) {
                guard mayReplace(id, existing) else { return .notYours }
                state.items[id]?.label = label
                state.items[id]?.secret = secret
                state.items[id]?.contentType = contentType
                state.items[id]?.modified = now
                return .replaced(id)
            }
            guard state.items.count < Self.maximumItems else { return .full }
            let id = UUID()
            state.items[id] = Item(label: label, attributes: attributes, secret: secret, contentType: contentType,
                                   created: now, modified: now, access: creator.map { .trusted([$0]) })
            return .created(id)
        }
    }

    /// Changes an item in place; false when it is gone.
    @discardableResult
    func update(_ id: UUID, _ change: (inout Item) -> Void) -> Bool {
        state.withLock { state in
            guard state.items[id] != nil else { return false }
            change(&state.items[id]!)
            state.items[id]!.modified = Self.now
            state.modified = state.items[id]!.modified
            return true
        }
    }

    @discardableResult
    func delete(_ id: UUID) -> Bool {
        state.withLock { state in
            state.modified = Self.now
            return state.items.removeValue(forKey: id) != nil
        }
    }
}
