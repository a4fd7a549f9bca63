import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus
import KeychainInterface
import Synchronization
import KeychainThreads

#if canImport(Glibc)
import Glibc
#endif

/// The freedesktop Secret Service (`org.freedesktop.secrets`, API 0.2) served from keychaind's keychains, so that
/// secret-tool, libsecret and every program speaking it store into the same keychain as `security` and SecItem.
///
/// Collections are keychains (the `default` alias is the default keychain); items are generic passwords
/// (SecretItemMapping). Each caller is identified from the bus (GetConnectionUnixProcessID, then /proc/PID/exe as for
/// keychaind's own socket) and served by a keychain service of its own: it sees every item's attributes, and reads a
/// secret only where the item's trusted applications let it (the program that stored it). Sessions: `plain`.
public final class SecretServiceServer: Sendable {
    public typealias ServiceForPeer = @Sendable (PeerIdentity) -> EmbeddedKeychainService?
    /// Writes the decisions a caller's call made (keychaind's access log); an error is what the call answers
    /// instead.
    public typealias DecisionLog = @Sendable ([AccessLogRecord], PeerIdentity, Caller) -> KeychainError?

    static let busName = "org.freedesktop.secrets"
    /// The access group of items created over D-Bus (they live as file keychain items: their lists decide).
    static let itemGroup = "org.freedesktop.secrets"
    static let servicePath = "/org/freedesktop/secrets"
    static let collectionPrefix = "/org/freedesktop/secrets/collection/"
    static let aliasPrefix = "/org/freedesktop/secrets/aliases/"
    static let sessionPrefix = "/org/freedesktop/secrets/session/"
    static let serviceInterface = "org.freedesktop.Secret.Service"
    static let collectionInterface = "org.freedesktop.Secret.Collection"
    static let itemInterface = "org.freedesktop.Secret.Item"
    static let sessionInterface = "org.freedesktop.Secret.Session"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"

    let connection: DBusConnection
    private let serviceForPeer: ServiceForPeer
    /// keychaind's environment: where prompts find the display and the pinentry (PINENTRY_PROGRAM).
    let environment: [String: String]
    /// keychaind's own view of the keychains (no access group, no program): which ones are collections, and the
    /// calls that depend on no caller.
    private let observer: EmbeddedKeychainService
    /// The collections' labels (a preference file beside the search list).
    let labels: CollectionLabels
    /// Where changes go (keychaind's event fan-out, which calls ``announce(_:)`` back); nil: straight to the bus.
    private let eventSink: (@Sendable (KeychainEvent) -> Void)?
    private let decisionLog: DecisionLog?
    struct State {
        var sessions: [String: Session] = [:]
        var nextSession = 1
        var services: [String: EmbeddedKeychainService] = [:]  // unique name → its service
        /// One service per program (path and hash): the many short-lived connections of one program (a secret-tool
        /// per lookup) share its open keychains instead of opening them again.
        var programs: [PeerIdentity.Program: EmbeddedKeychainService] = [:]
        var prompts: [String: PendingPrompt] = [:]
        var nextPrompt = 1
        /// The Secret portal's requests that wait for the user (its handle → the request), which the portal may close.
        var portalRequests: [String: SecretPortal.Request] = [:]
        /// Items another program's connection may read because the user chose Allow (this connection only).
        var allowed: [String: Set<UUID>] = [:]
        /// Keychains whose password is being asked for now: one question per keychain, whoever else needs it.
        var unlocking: Set<String> = []
        /// Each caller's process id (for the events its changes cause).
        var pids: [String: Int32] = [:]
        /// Each caller's process as identified, checked again at each of its calls.
        var peers: [String: PeerIdentity] = [:]
        /// The collections last announced (CollectionCreated / CollectionDeleted are the difference).
        var knownCollections: Set<String> = []
        /// Callers whose identification is under way.
        var identifying: [String: Identification] = [:]
    }
    let state = Mutex(State())
    /// Each client's calls in order, different clients' side by side.
    let lanes = CallLanes()
    /// The unique names that have called us and not yet left: the only ones whose leaving needs forgetting.
    let callers = Mutex<Set<String>>([])
    /// The in-memory `session` collection (one per keychaind).
    let sessionCollection = SecretSessionCollection()

    /// An open session: who opened it, and its cipher (nil for `plain`).
    struct Session {
        let owner: String
        let cipher: SecretSessionCipher?
    }

    public struct StartError: Error, CustomStringConvertible {
        public let description: String
    }

    public init(connection: DBusConnection, environment: [String: String] = ProcessInfo.processInfo.environment,
                observer: EmbeddedKeychainService,
                publish: (@Sendable (KeychainEvent) -> Void)? = nil, decisionLog: DecisionLog? = nil,
                serviceForPeer: @escaping ServiceForPeer) {
        self.decisionLog = decisionLog
        self.connection = connection
        self.environment = environment
        self.observer = observer
        labels = CollectionLabels(locations: observer.locations)
        self.eventSink = publish
        self.serviceForPeer = serviceForPeer
    }

    func publish(_ event: KeychainEvent) {
        if let eventSink { eventSink(event) } else { announce(event) }
    }

    func collectionPaths() -> [String] {
        SecretServiceObjects.collections(of: observer).map { Self.collectionPrefix + SecretServiceObjects.name(of: $0) } + [SecretSessionCollection.path]
    }


    /// Takes the name `org.freedesktop.secrets` (with `replace`, from its current owner if that one allows it) and
    /// serves it. Another owner: an error naming the problem, as gnome-keyring-daemon would be left running.
    /// The largest call kept whole: a secret (4 MiB at most) with its session's padding, attributes and label.
    /// A larger one is answered LimitsExceeded without being read into memory, and the bus connection stays.
    static let maximumMessageSize = 8 << 20

    public func start(replace: Bool, onClose: @escaping @Sendable () -> Void = {}) throws(StartError) {
        connection.maximumMessageSize = Self.maximumMessageSize
        let flags: UInt32 = 0x4 | (replace ? 0x2 : 0)  // DO_NOT_QUEUE, REPLACE_EXISTING
        do {
            // Clients' departures, matched before any client can call us: a caller whose departure we missed would
            // be remembered (its sessions too) for as long as keychaind runs. Only names that went (no new owner):
            // a client's arrival needs nothing from us.
            let matched = try connection.call(.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "AddMatch",
                body: [.string("type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg2=''")]))
            guard matched.kind == .methodReturn else {
                throw StartError(description: "the session bus refused to tell us which clients leave")
            }
            let reply = try connection.call(.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "RequestName", body: [.string(Self.busName), .uint32(flags)]))
            guard reply.body.first == .uint32(1) else {
                throw StartError(description: "another program owns \(Self.busName) on the session bus"
                    + (replace ? " and does not let it go" : " (stop it, or start with --replace)"))
            }
        } catch let error as StartError {
            throw error
        } catch {
            throw StartError(description: "cannot take \(Self.busName): \(error)")
        }
        let collections = Set(collectionPaths())
        state.withLock { $0.knownCollections = collections }
        // The handler only queues each message on its caller's lane (never running a call itself: a call may wait
        // for the bus's replies, which this thread reads), so it runs on the reading thread itself.
        let reading = connection.startReceiving(.reading, handler: { [self] message in
            guard message.kind == .methodCall else {
                // A client that left is forgotten after the calls it sent before leaving; one that never called
                // left nothing to forget (on a desktop's bus, most programs that come and go).
                if message.kind == .signal, message.member == "NameOwnerChanged", message.sender == "org.freedesktop.DBus",
                   message.body.count == 3, message.body[2].stringValue == "", let name = message.body[0].stringValue,
                   callers.withLock({ $0.remove(name) != nil }) {
                    // Forgetting only takes locks: without a thread, it is done here.
                    lanes.submit(name, { [self] in forget(message) }, unserved: { [self] in forget(message) })
                }
                return
            }
            if let sender = message.sender { callers.withLock { _ = $0.insert(sender) } }
            lanes.submit(message.sender ?? "", { [self] in
                guard let reply = handle(message) else { return }  // answered later, from a thread of its own
                if !message.flags.contains(.noReplyExpected) { _ = try? connection.send(reply) }
            }, unserved: { [self] in
                // No thread for it (the process is at its limit): the caller is told, nobody else waits.
                if !message.flags.contains(.noReplyExpected) {
                    _ = try? connection.send(message.errorReply("org.freedesktop.DBus.Error.LimitsExceeded",
                                                                "keychaind cannot take another call now; try again"))
                }
            })
        }, onClose: onClose)
        guard reading else { throw StartError(description: "no thread to read the session bus with") }
    }

    /// A client that left: its sessions close, its prompts and its Allow answers go, and so does its service.
    private func forget(_ signal: DBusMessage) {
        guard signal.body.count == 3, let name = signal.body[0].stringValue, signal.body[2].stringValue == "" else { return }
        state.withLock { state in
            state.services.removeValue(forKey: name)
            state.sessions = state.sessions.filter { $0.value.owner != name }
            state.allowed.removeValue(forKey: name)
            state.pids.removeValue(forKey: name)
            state.peers.removeValue(forKey: name)
        }
        forgetPrompts(of: name)
        closePortalRequests(of: name)
    }

    /// True when nobody is asking for this keychain's password now (the caller asks, and releases it after).
    func claimUnlocking(_ keychain: String) -> Bool { state.withLock { $0.unlocking.insert(keychain).inserted } }
    func isUnlocking(_ keychain: String) -> Bool { state.withLock { $0.unlocking.contains(keychain) } }
    func releaseUnlocking(_ keychain: String) { state.withLock { _ = $0.unlocking.remove(keychain) } }

    func isAllowed(_ item: UUID, for caller: String) -> Bool { state.withLock { $0.allowed[caller]?.contains(item) == true } }
    func allow(_ item: UUID, for caller: String) { state.withLock { _ = $0.allowed[caller, default: []].insert(item) } }

    // MARK: - Dispatch

    struct Failure: Error {
        let name: String
        let message: String
        static func unknownObject(_ path: String) -> Failure {
            Failure(name: "org.freedesktop.DBus.Error.UnknownObject", message: "no object at \(path)")
        }
        static func invalidArgs(_ text: String) -> Failure { Failure(name: "org.freedesktop.DBus.Error.InvalidArgs", message: text) }
        static let noSession = Failure(name: "org.freedesktop.Secret.Error.NoSession", message: "the session does not exist or is not yours")
        static let isLocked = Failure(name: "org.freedesktop.Secret.Error.IsLocked", message: "the collection is locked")
        static let noSuchObject = Failure(name: "org.freedesktop.Secret.Error.NoSuchObject", message: "no such item")
        static let unidentified = Failure(name: "org.freedesktop.DBus.Error.AccessDenied", message: "cannot identify the calling program")
    }

    /// A call whose answer needs the user first (a search of a locked keychain): worked out on a thread of its own,
    /// so that the bus goes on serving everyone else meanwhile.
    struct ReplyLater: Error {
        let work: @Sendable () throws -> [DBusValue]
    }

    /// The reply to `message`, or nil when it is sent later (``ReplyLater``).
    func handle(_ message: DBusMessage) -> DBusMessage? {
        do {
            return message.methodReturn(try route(message))
        } catch let later as ReplyLater {
            let answer: @Sendable () -> Void = { [self] in
                let reply: DBusMessage
                do { reply = message.methodReturn(try later.work()) } catch { reply = Self.errorReply(error, to: message) }
                if !message.flags.contains(.noReplyExpected) { _ = try? connection.send(reply) }
            }
            if !DetachedThread.start(name: "keychaind-reply", stackSize: 1 << 20, answer) { answer() }
            return nil
        } catch {
            return Self.errorReply(error, to: message)
        }
    }

    static func errorReply(_ error: any Error, to message: DBusMessage) -> DBusMessage {
        switch error {
        case let failure as Failure:
            return message.errorReply(failure.name, failure.message)
        case let error as KeychainError:
            return message.errorReply(error.status == .itemNotFound ? Failure.noSuchObject.name : "org.freedesktop.DBus.Error.Failed",
                                      error.status.message)
        default:
            return message.errorReply("org.freedesktop.DBus.Error.Failed", "\(error)")
        }
    }

    private func route(_ message: DBusMessage) throws -> [DBusValue] {
        guard !message.bodyTooLarge else {
            throw Failure(name: "org.freedesktop.DBus.Error.LimitsExceeded",
                          message: "a message larger than \(Self.maximumMessageSize >> 20) MiB: more than a keychain item holds")
        }
        guard let requestedPath = message.path, let member = message.member, let sender = message.sender else {
            throw Failure.invalidArgs("incomplete call")
        }
        // The table of the specification decides what may be called here, and with which arguments, before any
        // handler (or the identification of the caller) runs.
        var interface = message.interface
        if let kind = SecretServiceAPI.kind(of: requestedPath) {
            interface = try SecretServiceAPI.method(member, interface: interface, signature: message.bodySignature,
                                                    on: kind).interface
        }
        if interface == SecretServiceAPI.introspectable.name, member == "Introspect" {
            return [.string(Self.introspection(for: requestedPath))]
        }
        if interface == SecretServiceAPI.peer.name {
            if member == "Ping" { return [] }
            if member == "GetMachineId" {
                let id = (try? String(contentsOfFile: "/etc/machine-id", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
                return [.string(id)]
            }
        }
        // Who the caller is takes a round trip to the bus and reads of /proc: started at its first call and done
        // meanwhile on another thread, waited for only by the calls that depend on it (a lookup's first calls,
        // the service's properties and OpenSession, do not).
        let identification = identification(of: sender)
        let needsIdentity = !(requestedPath == Self.servicePath
            && (interface == Self.propertiesInterface || member == "OpenSession" || member == "ReadAlias"))
        let service = needsIdentity ? try identification.service() : observer
        if needsIdentity { try checkStillSame(sender) }
        guard needsIdentity, let decisionLog else {
            return try dispatch(message, interface: interface, member: member, path: requestedPath, sender: sender,
                         service: service)
        }
        // Every decision about an item is in the access log before the answer goes out; a caller whose process is
        // not at hand (forgotten meanwhile) is not answered unlogged.
        guard let peer = state.withLock({ $0.peers[sender] }) else { throw Failure.unidentified }
        return try Self.logged(decisionLog, peer, service.caller) {
            try dispatch(message, interface: interface, member: member, path: requestedPath, sender: sender,
                         service: service)
        }
    }

    /// Runs `work` with a trail bound and writes its decisions before its answer; a reply worked out later on a
    /// thread of its own (``ReplyLater``) is logged there, before that reply.
    private static func logged(_ decisionLog: @escaping DecisionLog, _ peer: PeerIdentity, _ caller: Caller,
                               _ work: () throws -> [DBusValue]) throws -> [DBusValue] {
        let trail = AccessTrail()
        let result = Result { try AccessTrail.$current.withValue(trail) { try work() } }
        if let unlogged = decisionLog(trail.take(), peer, caller) { throw unlogged }
        if case .failure(let error) = result, let later = error as? ReplyLater {
            throw ReplyLater { try logged(decisionLog, peer, caller, later.work) }
        }
        return try result.get()
    }

    private func dispatch(_ message: DBusMessage, interface: String?, member: String, path requestedPath: String,
                          sender: String, service: EmbeddedKeychainService) throws -> [DBusValue] {
        if requestedPath == SecretPortal.path {
            return try portalCall(message, member: member, sender: sender, service: service)
        }
        if requestedPath.hasPrefix(SecretPortal.requestPrefix) {
            return try portalRequestCall(message, member: member, interface: interface, path: requestedPath, sender: sender)
        }
        let objects = SecretServiceObjects(service: service, server: self, caller: sender)
        let path = objects.canonicalPath(requestedPath)  // an alias is the collection it names
        if interface == Self.propertiesInterface {
            return try objects.properties(member, path: path, arguments: message.body)
        }
        if path == Self.servicePath { return try objects.serviceCall(member, message.body) }
        if path.hasPrefix(Self.promptPrefix) { return try promptCall(member, path: path, caller: sender) }
        if path.hasPrefix(Self.sessionPrefix) {
            guard member == "Close" else { throw unknownMethod(member) }
            closeSession(path, owner: sender)
            return []
        }
        if path == SecretSessionCollection.path { return try objects.sessionCollectionCall(member, message.body) }
        if let id = SecretSessionCollection.itemID(path) { return try objects.sessionItemCall(member, id, message.body) }
        if let (keychain, itemID) = try objects.resolve(path) {
            if let itemID { return try objects.itemCall(member, keychain: keychain, item: itemID, message.body) }
            return try objects.collectionCall(member, keychain: keychain, path: path, message.body)
        }
        throw Failure.unknownObject(path)
    }

    func unknownMethod(_ member: String) -> Failure {
        Failure(name: "org.freedesktop.DBus.Error.UnknownMethod", message: "no method \(member) here")
    }

    /// The caller's identification: known, under way, or started now on a thread of its own.
    private func identification(of sender: String) -> Identification {
        let (identification, isNew) = state.withLock { state -> (Identification, Bool) in
            if let known = state.services[sender] { return (Identification(known), false) }
            if let pending = state.identifying[sender] { return (pending, false) }
            let started = Identification()
            state.identifying[sender] = started
            return (started, true)
        }
        if isNew {
            let work: @Sendable () -> Void = { [self] in
                identification.finish(Result { try identify(sender) })
                state.withLock { _ = $0.identifying.removeValue(forKey: sender) }
            }
            if !DetachedThread.start(name: "keychaind-ident", stackSize: 1 << 20, work) { work() }
        }
        return identification
    }

    /// A caller's keychain service, once the bus said which process it is (``SecretServiceServer/identify(_:)``).
    final class Identification: @unchecked Sendable {
        // SAFETY: `result` is only read and written under `condition`.
        private let condition = NSCondition()
        private var result: Result<EmbeddedKeychainService, any Error>?

        init(_ known: EmbeddedKeychainService? = nil) { result = known.map { .success($0) } }

        func finish(_ outcome: Result<EmbeddedKeychainService, any Error>) {
            condition.lock()
            result = outcome
            condition.broadcast()
            condition.unlock()
        }

        /// The service, waiting for the identification if it is still under way (the bus answers within its 25 s).
        func service() throws -> EmbeddedKeychainService {
            condition.lock()
            defer { condition.unlock() }
            let deadline = Date(timeIntervalSinceNow: 30)
            while result == nil {
                if !condition.wait(until: deadline) { throw Failure.unidentified }
            }
            return try result!.get()
        }
    }

    /// Identifies `sender` from what the bus vouches for and makes (or reuses, per program) its keychain service.
    private func identify(_ sender: String) throws -> EmbeddedKeychainService {
        guard let (pid, uid) = try credentials(of: sender), uid == geteuid(), let peer = PeerIdentity.of(pid: pid_t(pid), uid: uid)
        else { throw Failure.unidentified }
        let program = peer.program
        let service: EmbeddedKeychainService
        if let known = state.withLock({ $0.programs[program] }) {
            service = known
        } else {
            guard let made = serviceForPeer(peer) else { throw Failure.unidentified }
            service = made
        }
        state.withLock { state in
            if state.services.count > 256 {
                // A caller's service, pid and identity go together: one without the other would skip the checks.
                state.services.removeAll()
                state.peers.removeAll()
                state.pids.removeAll()
            }
            if state.programs.count > 64 { state.programs.removeAll() }
            state.services[sender] = service
            state.peers[sender] = peer
            state.pids[sender] = Int32(pid)
            if state.programs[program] == nil { state.programs[program] = service }
        }
        return service
    }

    /// Refuses a caller whose process is no longer the program it was identified as (it executed another one, or
    /// its pid was reused), and a traced one (its memory is its tracer's). Such a name is forgotten: it is
    /// identified afresh if it calls again, from what its process is then.
    private func checkStillSame(_ sender: String) throws {
        guard let peer = state.withLock({ $0.peers[sender] }) else { return }
        guard peer.isStillSameProgram() else {
            state.withLock { state in
                state.services.removeValue(forKey: sender)
                state.peers.removeValue(forKey: sender)
            }
            throw Failure(name: "org.freedesktop.DBus.Error.AccessDenied",
                          message: "the calling process is no longer the program it was identified as")
        }
        if let tracer = peer.tracer(), tracer != 0 {
            throw Failure(name: "org.freedesktop.DBus.Error.AccessDenied",
                          message: "the calling process is being traced (by pid \(tracer))")
        }
    }

    /// The unique name that owns `name` on the bus now, nil when nobody does.
    func busNameOwner(_ name: String) -> String? {
        let reply = try? connection.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                     interface: "org.freedesktop.DBus", member: "GetNameOwner",
                                                     body: [.string(name)]))
        return reply?.body.first?.stringValue
    }

    /// The process id and user id the bus vouches for: GetConnectionCredentials (one round trip), else the two older
    /// calls.
    private func credentials(of sender: String) throws -> (pid: UInt32, uid: UInt32)? {
        let bus = "org.freedesktop.DBus"
        func ask(_ member: String) throws -> DBusMessage {
            try connection.call(.methodCall(destination: bus, path: "/org/freedesktop/DBus", interface: bus, member: member,
                                            body: [.string(sender)]))
        }
        let reply = try ask("GetConnectionCredentials")
        if reply.kind == .methodReturn, let entries = reply.body.first?.dictionaryEntries {
            func value(_ key: String) -> UInt32? {
                guard case .variant(let inner)? = entries.first(where: { $0.key.stringValue == key })?.value else { return nil }
                return inner.uint32Value
            }
            if let pid = value("ProcessID"), let uid = value("UnixUserID") { return (pid, uid) }
        }
        guard let pid = try ask("GetConnectionUnixProcessID").body.first?.uint32Value,
              let uid = try ask("GetConnectionUnixUser").body.first?.uint32Value
        else { return nil }
        return (pid, uid)
    }

    /// Tells every listener that an item of the collection at `collection` was created, changed or deleted
    /// (org.freedesktop.Secret.Collection's ItemCreated / ItemChanged / ItemDeleted).
    func itemSignal(_ member: String, collection: String, item: String) {
        _ = try? connection.send(.signal(path: collection, interface: Self.collectionInterface, member: member,
                                         body: [.objectPath(item)]))
    }

    // MARK: - Sessions

    func openSession(owner: String, cipher: SecretSessionCipher?) -> String {
        state.withLock { state in
            let path = Self.sessionPrefix + "s\(state.nextSession)"
            state.nextSession += 1
            state.sessions[path] = Session(owner: owner, cipher: cipher)
            return path
        }
    }

    /// The caller's session at `path` (NoSession when it is not open or not the caller's).
    func session(_ path: String, owner: String) throws -> Session {
        guard let session = state.withLock({ $0.sessions[path] }), session.owner == owner else { throw Failure.noSession }
        return session
    }

    private func closeSession(_ path: String, owner: String) {
        state.withLock { state in
            if state.sessions[path]?.owner == owner { state.sessions.removeValue(forKey: path) }
        }
    }

    static func introspection(for path: String) -> String {
        SecretServiceAPI.introspection(of: SecretServiceAPI.kind(of: path),
                                       extra: path == SecretPortal.path ? SecretPortal.introspection() : "",
                                       children: path == servicePath ? ["collection", "aliases", "session"] : [])
    }
}
