#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CKeychainLinux
import KeychainCore
import KeychainWire
import Synchronization
import KeychainThreads

#if canImport(Glibc)
import Glibc
#endif

/// The keychain service in keychaind, reached over its Unix socket: the daemon holds the unlocked keys (unlock once,
/// then any process reads until it locks) and decides who is calling from the socket's peer credentials.
///
/// One connection per instance; calls are serialised on it. A connection that breaks (keychaind killed, or ended and
/// started again) is made again at the next call, the way the first one was made: a program that runs for days
/// outlives its keychaind, as programs on macOS outlive securityd.
public final class RemoteKeychainService: KeychainService {
    public let socket: URL
    // SAFETY: the descriptor is only used under `connection`'s lock.
    private let connection: Mutex<Link>
    /// How a broken connection is made again: ``connect(to:serving:environment:)`` with the same arguments, or
    /// keychaind started again where the first one was (``KeychainBackend``).
    private let reconnection = Mutex<Reconnect?>(nil)
    typealias Reconnect = @Sendable () throws(KeychainError) -> RemoteKeychainService?

    /// The connection, and its session while that is under way: the session goes out with the first call (or
    /// ahead of the greeting's answer) and its answer is read with that call's, one round trip fewer for a
    /// command that makes a single call.
    private struct Link {
        var fd: Int32
        var unsentSession: [UInt8]
        var sessionAnswerPending: Bool
        /// Closed by ``RemoteKeychainService/close()`` or given to an event stream: never made again.
        var closed = false
    }

    private init(socket: URL, fd: Int32, unsentSession: [UInt8], sessionAnswerPending: Bool) {
        self.socket = socket
        self.connection = Mutex(Link(fd: fd, unsentSession: unsentSession, sessionAnswerPending: sessionAnswerPending))
    }

    /// Makes a broken connection again with `reconnect` from now on.
    func reconnect(with reconnect: @escaping Reconnect) {
        reconnection.withLock { $0 = reconnect }
    }

    /// This instance's connection, handed over: it is closed here without closing the descriptor.
    private func takeLink() -> Link {
        connection.withLock { link in
            defer { link = Link(fd: -1, unsentSession: [], sessionAnswerPending: false, closed: true) }
            return link
        }
    }

    /// Connects to the daemon at `socket`; nil when none answers there. `environment` tells where this client's user
    /// can be asked (``currentSession(environment:)``); `locations` (by default those of `environment`), which
    /// directories an installed keychaind must say it serves. The session's answer is read at the first call: a
    /// daemon that ends between its greeting and that call fails the call ("went away"), not the connect.
    public static func connect(to socket: URL, serving locations: KeychainLocations? = nil,
                               environment: [String: String] = ProcessEnvironment.current())
        throws(KeychainError) -> RemoteKeychainService?
    {
        // Nothing is sent to a socket another user could have put there (/tmp/keychain-UID made first by someone
        // else): its directory must be this user's own, private, and not a symlink.
        guard try SocketTrust.isPrivateDirectory(socket.deletingLastPathComponent()) else { return nil }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw KeychainError(.io, "cannot make a socket (errno \(errno))") }
        // Installed, this program talks only to the installed keychaind, known by the group the kernel lets it name
        // in its greeting's credentials, which the socket asks to receive (bytes that came without any read as
        // pid 0, and are refused).
        let installed = InstalledDaemon.expected
        if installed != nil, ckeychain_pass_credentials(fd) != 0 {
            Glibc.close(fd)
            throw KeychainError(.internalComponent, "cannot ask for keychaind's credentials (errno \(errno)); nothing was sent")
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(socket.path.utf8)
        guard path.count < MemoryLayout.size(ofValue: address.sun_path) else {
            Glibc.close(fd)
            throw KeychainError(.param, "the daemon's socket path is too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.enumerated() { raw[i] = b }
            raw[path.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            return nil
        }
        // And the process that answers must be of this user, as the kernel saw it at connect time.
        do throws(KeychainError) { try SocketTrust.checkPeer(fd, socket: socket) } catch {
            Glibc.close(fd)
            throw error
        }
        // The greeting (both sides say which protocol they speak) and where this client's user can be asked: the
        // daemon draws its own pinentry there. Sent ahead of the greeting's answer (one write, one round trip),
        // unless this program checks which keychaind answers: then nothing but the greeting (public, the same for
        // every client) goes out before that.
        var session: [UInt8] = []
        do { session = try Request.session(currentSession(environment: environment)).encode() } catch {}
        let sessionAhead = installed == nil && !session.isEmpty
        guard Framing.send(sessionAhead ? [Framing.hello(), session] : [Framing.hello()], on: fd) else {
            Glibc.close(fd)
            return nil
        }
        let greeting: SocketTrust.Greeting?
        do { greeting = try SocketTrust.receiveGreeting(on: fd) } catch {
            Glibc.close(fd)
            return nil  // it went away in the middle of its greeting (killed, or ending): nobody serves there
        }
        guard let greeting else {
            Glibc.close(fd)
            return nil
        }
        do throws(KeychainError) {
            // Which keychaind answered comes first: a refusal's words are only worth showing from keychaind.
            if let installed { try SocketTrust.checkSender(of: greeting, installed: installed, socket: socket) }
            if greeting.bytes.first == 0 {  // the daemon refused us; its reason follows
                throw KeychainError(.internalComponent, String(decoding: greeting.bytes.dropFirst(), as: UTF8.self))
            }
            let served: [String]
            do { served = try Framing.checkDaemonGreeting(greeting.bytes) } catch {
                throw KeychainError(.internalComponent, error.message)
            }
            if installed != nil {
                let own = (locations ?? KeychainLocations.current(environment: environment)).servedDirectories
                guard served == own else {
                    throw KeychainError(.internalComponent, "the keychaind on \(socket.path) serves the keychains in "
                                        + "\(served.first ?? "?"), not this program's (\(own[0])): it was started with other "
                                        + "directories. Nothing was sent; end it (kill \(greeting.pid)) and try again")
                }
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
        let service = RemoteKeychainService(socket: socket, fd: fd, unsentSession: sessionAhead ? [] : session,
                                            sessionAnswerPending: !session.isEmpty)
        service.reconnect { () throws(KeychainError) in
            try connect(to: socket, serving: locations, environment: environment)
        }
        return service
    }

    /// The session's answer: an error there only means the daemon cannot ask this client's user; a notice is for
    /// the user, once per process.
    private static func showNotice(inSessionAnswer said: [UInt8]) {
        guard case .notice(let text)? = try? Response.decode(said), standardErrorIsForPeople,
              !noticeShown.exchange(true, ordering: .relaxed) else { return }
        let line = Array("keychain: \(text)\n".utf8)
        _ = line.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }

    /// Whether this process has shown the daemon's notice already (every connection gets it again).
    private static let noticeShown = Atomic(false)

    /// Whether descriptor 2 is open: the notice goes where the Swift runtime's and the C library's own diagnostics
    /// go, and nowhere when a program closed its standard error.
    static var standardErrorIsForPeople: Bool {
        var status = stat()
        return fstat(2, &status) == 0 && status.st_mode & S_IFMT != S_IFDIR
    }

    /// This process's terminal (GPG_TTY, else the first of its standard streams that is one) and display, unless
    /// KEYCHAIN_PROMPTER=none.
    static func currentSession(environment: [String: String] = ProcessEnvironment.current()) -> ClientSession {
        if environment["KEYCHAIN_PROMPTER"] == "none" {
            return ClientSession(terminal: nil, display: nil, waylandDisplay: nil, term: nil)
        }
        var terminal = environment["GPG_TTY"].flatMap { $0.hasPrefix("/dev/") ? $0 : nil }
        if terminal == nil {
            for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] {
                if let name = ttyname(fd) {
                    terminal = String(cString: name)
                    break
                }
            }
        }
        return ClientSession(terminal: terminal, display: environment["DISPLAY"],
                             waylandDisplay: environment["WAYLAND_DISPLAY"], term: environment["TERM"])
    }

    deinit { connection.withLock { if $0.fd >= 0 { Glibc.close($0.fd) } } }

    /// A second connection, turned into the daemon's event stream, read on a thread of its own.
    public func subscribe(_ handler: @escaping @Sendable (KeychainEvent) -> Void) throws(KeychainError)
        -> EventSubscription?
    {
        guard let stream = try Self.connect(to: socket) else {
            throw KeychainError(.notAvailable, "the keychain daemon went away")
        }
        _ = try stream.call(.subscribe)
        let fd = stream.takeLink().fd  // the subscription owns it from here
        let subscription = EventSubscription(fd: fd)
        let started = DetachedThread.start(name: "keychain events") {
            while let bytes = try? Framing.receive(on: fd, limit: WireLimits.maximumResponse),
                case .event(let event) = try? Response.decode(bytes)
            {
                handler(event)
            }
            subscription.finished()
        }
        guard started else {
            subscription.finished()
            throw KeychainError(.allocate, "cannot start the event reader thread")
        }
        return subscription
    }

    /// Asks the keychaind at the other end to serve the Secret Service on the session bus at `busAddress` as well
    /// (only another keychaind, the same program, may ask). Throws what kept it from taking the name.
    public func serveSecretService(busAddress: String, replace: Bool) throws(KeychainError) {
        _ = try call(.serveSecretService(busAddress: busAddress, replace: replace))
    }

    /// Asks keychaind to let the program at `path` (as its file is now) use the access groups it claims; the user
    /// is asked where this program cannot answer. Returns how many of its groups it may use.
    public func backUp(_ keychain: KeychainReference, to path: String, password: SecretBytes) throws(KeychainError)
        -> BackupReport
    {
        guard case .backupReport(let report) = try call(.backUp(keychain, path: path, password: password)) else {
            throw unexpected()
        }
        return report
    }

    public func restore(from path: String, password: SecretBytes, into keychain: KeychainReference)
        throws(KeychainError) -> BackupReport
    {
        guard case .backupReport(let report) = try call(.restore(path: path, password: password, keychain)) else {
            throw unexpected()
        }
        return report
    }

    public func sync(_ request: SyncRequest, keychain: KeychainReference) throws(KeychainError) -> SyncReport {
        guard case .syncReport(let report) = try call(.sync(request, keychain)) else { throw unexpected() }
        return report
    }

    public func accessLog(_ request: AccessLogRequest) throws(KeychainError) -> AccessLogReport {
        guard case .accessLogReport(let report) = try call(.accessLog(request)) else { throw unexpected() }
        return report
    }

    public func importSecrets(_ request: SecretImport, into keychain: KeychainReference?) throws(KeychainError)
        -> ImportReport
    {
        guard case .importReport(let report) = try call(.importSecrets(request, keychain)) else { throw unexpected() }
        return report
    }

    public func trustProgram(at path: String) throws(KeychainError) -> Int {
        guard case .count(let groups) = try call(.trustProgram(path: path)) else { throw unexpected() }
        return groups
    }

    /// Sends one request and waits for its answer; a failure answer is thrown as the daemon's error.
    private func call(_ request: Request) throws(KeychainError) -> Response {
        var payload: [UInt8]
        do { payload = try request.encode() } catch { throw KeychainError(.param, error.message) }
        defer { payload.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        // keychaind takes requests up to this size and ends a connection that sends more: said here, as the call's
        // error, without losing the connection.
        guard payload.count <= WireLimits.maximumRequest else {
            throw KeychainError(.param, "the request is larger than keychaind takes (\(WireLimits.maximumRequest >> 20) MiB)")
        }
        // Thrown from inside the lock, not handed out as a Result: the Result's type would be made at run time, at
        // the cost of a scan of every conformance linked in (its Failure must be an Error), in every tool's start.
        var bytes = try connection.withLock { (link) throws(KeychainError) -> [UInt8] in
            var madeAgain = false
            while true {
                if link.fd < 0 {
                    guard !link.closed else {
                        throw KeychainError(.notAvailable, "the keychain daemon connection is closed")
                    }
                    guard let fresh = try reconnection.withLock({ $0 })?() else {
                        throw KeychainError(.notAvailable, "the keychain daemon went away")
                    }
                    link = fresh.takeLink()
                    link.closed = false
                }
                switch Self.exchange(payload, reportingProgress: request.reportsProgress, on: &link) {
                case .answered(let bytes):
                    return bytes
                case .unreadable:
                    // The stream is out of step (a length was read, not its body): the next call starts afresh.
                    Glibc.close(link.fd)
                    link.fd = -1
                    throw KeychainError(.notAvailable, "the keychain daemon's answer was unreadable")
                case .lost(let requestSent):
                    // keychaind went away. Once, the call is made on a new connection: always when the request did
                    // not go out, after it went out only if repeating it changes nothing.
                    Glibc.close(link.fd)
                    link.fd = -1
                    guard !madeAgain, !requestSent || request.isSafeToRepeat else {
                        throw KeychainError(.notAvailable, "the keychain daemon went away")
                    }
                    madeAgain = true
                }
            }
        }
        defer { bytes.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        let response: Response
        do { response = try Response.decode(bytes) } catch { throw KeychainError(.internalComponent, error.message) }
        if case .failure(let error) = response { throw error }
        return response
    }

    private enum Exchange {
        case answered([UInt8])
        /// The connection ended; `requestSent`: after the request went out whole.
        case lost(requestSent: Bool)
        case unreadable
    }

    /// Sends `payload` (after the session, if that has not gone out yet) and reads its answer.
    private static func exchange(_ payload: [UInt8], reportingProgress: Bool, on link: inout Link) -> Exchange {
        let fd = link.fd
        let session = link.unsentSession
        link.unsentSession = []
        guard Framing.send(session.isEmpty ? [payload] : [session, payload], on: fd) else {
            return .lost(requestSent: false)
        }
        do {
            if link.sessionAnswerPending {
                link.sessionAnswerPending = false
                guard let said = try Framing.receive(on: fd, limit: WireLimits.maximumResponse) else {
                    return .lost(requestSent: true)
                }
                showNotice(inSessionAnswer: said)
            }
            while true {
                guard let bytes = try Framing.receive(on: fd, limit: WireLimits.maximumResponse) else {
                    return .lost(requestSent: true)
                }
                // Progress frames come before the answer of a long request: shown where the caller shows them.
                if reportingProgress, case .progress(let done, let total)? = try? Response.decode(bytes) {
                    OperationProgress.current?.update(done, of: total)
                    continue
                }
                return .answered(bytes)
            }
        } catch .truncated {
            return .lost(requestSent: true)  // reset, or cut inside an answer: keychaind was killed
        } catch {
            return .unreadable
        }
    }

    private func unexpected() -> KeychainError { KeychainError(.internalComponent, "an unexpected answer from keychaind") }

    private func reference(_ request: Request) -> KeychainReference? {
        guard case .reference(let r) = try? call(request) else { return nil }
        return r
    }

    // MARK: - KeychainService

    public func resolve(_ nameOrPath: String) -> KeychainReference {
        reference(.resolve(nameOrPath)) ?? KeychainReference(path: nameOrPath)
    }

    public func defaultKeychain() -> KeychainReference {
        reference(.defaultKeychain) ?? KeychainReference(path: "/nonexistent/default.keychain-db")
    }

    public func loginKeychain() -> KeychainReference {
        reference(.loginKeychain) ?? KeychainReference(path: "/nonexistent/login.keychain-db")
    }

    public func searchList() -> [KeychainReference] {
        guard case .references(let list) = try? call(.searchList) else { return [] }
        return list
    }

    public func setDefaultKeychain(_ keychain: KeychainReference?) throws(KeychainError) {
        _ = try call(.setDefaultKeychain(keychain))
    }

    public func setLoginKeychain(_ keychain: KeychainReference?) throws(KeychainError) {
        _ = try call(.setLoginKeychain(keychain))
    }

    public func setSearchList(_ keychains: [KeychainReference]) throws(KeychainError) {
        _ = try call(.setSearchList(keychains))
    }

    public func listedKeychains() throws(KeychainError) -> [ListedKeychain] {
        guard case .listedKeychains(let list) = try call(.searchListStates) else { throw unexpected() }
        return list
    }

    public func state(of keychain: KeychainReference) throws(KeychainError) -> KeychainState {
        guard case .state(let s) = try call(.state(keychain)) else { throw unexpected() }
        return s
    }

    public func createKeychain(_ keychain: KeychainReference, password: SecretBytes?, settings: KeychainSettings)
        throws(KeychainError)
    {
        _ = try call(.createKeychain(keychain, password: password, settings: settings))
    }

    public func deleteKeychain(_ keychain: KeychainReference) throws(KeychainError) {
        _ = try call(.deleteKeychain(keychain))
    }

    public func lock(_ keychain: KeychainReference) throws(KeychainError) { _ = try call(.lock(keychain)) }

    public func lockAll() { _ = try? call(.lockAll) }

    public func unlock(_ keychain: KeychainReference, password: SecretBytes?) throws(KeychainError) {
        _ = try call(.unlock(keychain, password: password))
    }

    public func settings(of keychain: KeychainReference) throws(KeychainError) -> KeychainSettings {
        guard case .settings(let s) = try call(.settings(keychain)) else { throw unexpected() }
        return s
    }

    public func setSettings(_ settings: KeychainSettings, of keychain: KeychainReference) throws(KeychainError) {
        _ = try call(.setSettings(settings, keychain))
    }

    @discardableResult
    public func changePassword(of keychain: KeychainReference, old: SecretBytes?, new: SecretBytes?)
        throws(KeychainError) -> Int
    {
        guard case .count(let n) = try call(.changePassword(keychain, old: old, new: new)) else { throw unexpected() }
        return n
    }

    @discardableResult
    public func add(_ item: ItemQuery, to keychain: KeychainReference?) throws(KeychainError) -> FoundItem {
        guard case .found(let f) = try call(.add(item, keychain)) else { throw unexpected() }
        return f
    }

    public func search(_ query: ItemQuery, in keychain: KeychainReference?) throws(KeychainError) -> [FoundItem] {
        guard case .items(let list) = try call(.search(query, keychain)) else { throw unexpected() }
        return list
    }

    /// The walk runs in keychaind: one round trip.
    public func firstMatch(_ query: ItemQuery) throws(KeychainError) -> SearchListMatch {
        guard case .listMatch(let match) = try call(.firstMatch(query)) else { throw unexpected() }
        return match
    }

    @discardableResult
    public func update(_ query: ItemQuery, with changes: ItemUpdate, in keychain: KeychainReference?)
        throws(KeychainError) -> Int
    {
        guard case .count(let n) = try call(.update(query, changes, keychain)) else { throw unexpected() }
        return n
    }

    @discardableResult
    public func delete(_ query: ItemQuery, in keychain: KeychainReference?) throws(KeychainError) -> Int {
        guard case .count(let n) = try call(.delete(query, keychain)) else { throw unexpected() }
        return n
    }

    public func upsert(_ item: ItemQuery, changes: ItemUpdate, in keychain: KeychainReference?) throws(KeychainError) {
        _ = try call(.upsert(item, changes, keychain))
    }

    @discardableResult
    public func replaceAll(matching: ItemQuery, with item: ItemQuery, in keychain: KeychainReference?)
        throws(KeychainError) -> Int
    {
        guard case .count(let n) = try call(.replaceAll(matching, item, keychain)) else { throw unexpected() }
        return n
    }

    public func allItems(in keychain: KeychainReference, includingSecrets: Bool) throws(KeychainError)
        -> [FoundItem]
    {
        guard case .items(let list) = try call(.allItems(keychain, includingSecrets: includingSecrets)) else {
            throw unexpected()
        }
        return list
    }

    /// Signing, decryption and key exchange run in the daemon, where the key lives; only their results travel.
    public func useKey(_ query: ItemQuery, _ use: KeyUse, in keychain: KeychainReference?)
        throws(KeychainError) -> SecretBytes
    {
        guard case .secret(let result) = try call(.useKey(query, use, keychain)) else { throw unexpected() }
        return result
    }

    /// The pair is generated in the daemon; only the private key's attributes and the public key come back.
    public func generateKeyPair(_ generation: KeyGeneration, in keychain: KeychainReference?) throws(KeychainError)
        -> GeneratedKeyPair
    {
        guard case .keyPair(let pair) = try call(.generateKeyPair(generation, keychain)) else { throw unexpected() }
        return pair
    }

    /// The file is opened in the daemon, where its keys will live.
    public func importItems(_ request: ItemImport, into keychain: KeychainReference?) throws(KeychainError)
        -> [FoundItem]
    {
        guard case .items(let list) = try call(.importItems(request, keychain)) else { throw unexpected() }
        return list
    }

    /// The file is written in the daemon: private keys leave it only inside the PKCS#12's encryption.
    public func exportItems(_ request: ItemExport, from keychain: KeychainReference?) throws(KeychainError)
        -> SecretBytes
    {
        guard case .secret(let file) = try call(.exportItems(request, keychain)) else { throw unexpected() }
        return file
    }

    public func certificates(_ query: ItemQuery, in keychain: KeychainReference?) throws(KeychainError)
        -> [CertificateRecord]
    {
        guard case .certificates(let list) = try call(.certificates(query, keychain)) else { throw unexpected() }
        return list
    }

    /// The password is checked by the daemon, which marks its own copy of the context (same id) authenticated:
    /// later calls naming this context are then met there. The local context is marked too, for this process's
    /// own bookkeeping; the daemon never takes a client's word for it.
    public func authenticateOwner(_ password: SecretBytes, for context: AuthenticationContext,
                                  in keychain: KeychainReference?) throws(KeychainError) -> Bool
    {
        guard case .count(let n) = try call(.authenticateOwner(password, context.snapshot, keychain)) else {
            throw unexpected()
        }
        if n == 1 { context.markOwnerAuthenticated() }
        return n == 1
    }

    public func close() {
        connection.withLock { link in
            if link.fd >= 0 { Glibc.close(link.fd) }
            link.fd = -1
            link.closed = true
        }
    }
}
