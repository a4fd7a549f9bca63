import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus
import Synchronization

/// What the bus is told when keychaind's keychains change, whoever changed them: a Secret Service client, `security`
/// or SecItem through the socket, the idle lock. Each change is one KeychainEvent (what `SecKeychainAddCallback`
/// subscribers get too), turned here into the Secret Service's signals.
extension SecretServiceServer {
    /// A change made through the Secret Service: to keychaind's event subscribers and, through them, the bus.
    func changed(_ kind: KeychainEvent.Kind, _ keychain: KeychainReference?, by caller: String) {
        let pid = state.withLock { $0.pids[caller] } ?? 0
        publish(KeychainEvent(kind: kind, keychain: keychain?.path, pid: pid))
    }

    /// The Secret Service's signals for `event`: Locked changes, collections changed, created and deleted.
    public func announce(_ event: KeychainEvent) {
        switch event.kind {
        case .lock, .unlock:
            let paths = event.keychain.map { [Self.collectionPrefix + SecretServiceObjects.name(ofPath: $0)] }
                ?? state.withLock { Array($0.knownCollections) }  // every keychain locked at once
            for path in paths {
                propertiesChanged(path, interface: Self.collectionInterface, ["Locked": .boolean(event.kind == .lock)])
                signal(Self.servicePath, Self.serviceInterface, "CollectionChanged", [.objectPath(path)])
            }
        case .add, .update, .delete:
            guard let keychain = event.keychain else { return }
            let path = Self.collectionPrefix + SecretServiceObjects.name(ofPath: keychain)
            propertiesChanged(path, interface: Self.collectionInterface, [:], invalidated: ["Items", "Modified"])
            signal(Self.servicePath, Self.serviceInterface, "CollectionChanged", [.objectPath(path)])
        case .keychainListChanged, .defaultChanged:
            labels.prune()
            refreshCollections()
        case .passwordChanged:
            return
        }
    }

    /// Compares the collections with the ones last announced: CollectionCreated / CollectionDeleted for the
    /// difference, and the service's Collections property.
    func refreshCollections() {
        let now = Set(collectionPaths())
        let before = state.withLock { state in
            defer { state.knownCollections = now }
            return state.knownCollections
        }
        guard now != before else { return }
        for path in now.subtracting(before).sorted() {
            signal(Self.servicePath, Self.serviceInterface, "CollectionCreated", [.objectPath(path)])
        }
        for path in before.subtracting(now).sorted() {
            signal(Self.servicePath, Self.serviceInterface, "CollectionDeleted", [.objectPath(path)])
        }
        propertiesChanged(Self.servicePath, interface: Self.serviceInterface,
                          ["Collections": .array(elementSignature: "o", now.sorted().map { .objectPath($0) })])
    }

    func signal(_ path: String, _ interface: String, _ member: String, _ body: [DBusValue]) {
        _ = try? connection.send(.signal(path: path, interface: interface, member: member, body: body))
    }

    /// org.freedesktop.DBus.Properties.PropertiesChanged: new values, and names whose value must be read again.
    func propertiesChanged(_ path: String, interface: String, _ values: [String: DBusValue], invalidated: [String] = []) {
        let changed = values.sorted { $0.key < $1.key }.map { DBusValue.DictionaryEntry(.string($0.key), .variant($0.value)) }
        signal(path, Self.propertiesInterface, "PropertiesChanged", [
            .string(interface), .dictionary(keySignature: "s", valueSignature: "v", changed),
            .array(elementSignature: "s", invalidated.map { .string($0) }),
        ])
    }
}
