import CKeychainLinux
import KeychainClient
import KeychainCore
import KeychainInterface
import KeychainWire
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One client on the socket, from its greeting to its end: identified once when it connected
/// (``KeychainDaemonServer/admit(_:)``), checked again at every request (same program, not traced, every chunk from
/// its own process), then served by a keychain service of its own; or turned into an event stream.
///
/// A small state machine — greeting, serving, events — that the ``ConnectionLoop`` runs whenever bytes arrive: it
/// takes what has arrived and never waits for more, so a client that sends half a frame holds no thread.
final class DaemonConnection: @unchecked Sendable {
    // SAFETY: one thread at a time uses a connection: the loop hands it to the thread that its one armed report
    // (EPOLLONESHOT) woke, and arms it again only after that thread is done with it.
    enum Phase { case greeting, serving, events }

    let fd: Int32
    private let server: KeychainDaemonServer
    private let peer: PeerIdentity
    private let claimed: Caller
    private let watch: ProcessWatch
    private let stream: ClientStream
    private(set) var phase = Phase.greeting
    /// The connection broke the protocol: its process's next connections are turned away for a while
    /// (``ProtocolOffenders``), counted when it closes.
    private var offended = false
    /// Made at the first request, so that a client that opens its session first (every client of ours does) gets
    /// one service, not one before and one after.
    private var service: EmbeddedKeychainService?
    private var contexts = ConnectionContexts()
    private var asker = Asker(prompter: nil)
    private var loggedCaller: KeychainDaemonServer.LoggedCaller?
    private var sessionNotice: String?

    /// At most this many requests are served per turn, so that a client that sends requests ahead of their
    /// answers does not keep a thread from the others.
    static let framesPerTurn = 4

    init(server: KeychainDaemonServer, fd: Int32, peer: PeerIdentity, claimed: Caller, watch: ProcessWatch) {
        self.server = server
        self.fd = fd
        self.peer = peer
        self.claimed = claimed
        self.watch = watch
        // Everything is read with the sender's pid checked against the caller's, counting from here: what was
        // queued before the caller was identified can only be its greeting and session (a client sends any other
        // request only after the greeting's answer, which goes out after the identification).
        stream = ClientStream(fd: fd, peer: peer.pid)
    }

    /// What the connection needs after a turn.
    enum Next: Equatable {
        /// Armed again: served when more arrives.
        case input
        /// Served again soon without waiting for input: whole frames were already read ahead.
        case turn
        /// Done: to be closed.
        case end
    }

    /// Serves what has arrived, a few requests at most.
    func serveAvailable() -> Next {
        for _ in 0..<Self.framesPerTurn {
            switch phase {
            case .events: return drainEventStream() ? .input : .end
            case .greeting:
                do {
                    switch try stream.receiveAvailable(limit: 64) {
                    case .waiting: return .input
                    case .end: return .end
                    case .frame(let hello): try Framing.checkClientHello(hello)
                    }
                } catch {
                    if case .versionMismatch = error {} else { offended = true }  // an older client is no offender
                    refuse(error.message)
                    return .end
                }
                guard server.sendAsKeychaind(server.greeting, on: fd) else { return .end }
                phase = .serving
                if !stream.hasBytesAhead { return .input }
            case .serving:
                let start = stream.consumed
                var frame: [UInt8]
                do {
                    switch try stream.receiveAvailable(limit: WireLimits.maximumRequest) {
                    case .waiting: return .input
                    case .end: return .end
                    case .frame(let received): frame = received
                    }
                } catch {
                    // An oversized or torn frame ends this connection only, and counts against its process; a frame
                    // that another process sent (a descriptor passed on) does not count against the one that connected.
                    if case .malformed = error {} else { offended = true }
                    return .end
                }
                let goesOn = answer(&frame, sentAt: start)
                frame.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } }
                guard goesOn else { return .end }
            }
        }
        // Frames already read ahead are invisible to epoll: they get a turn of their own.
        return phase == .serving && stream.hasBytesAhead ? .turn : .input
    }

    /// Closes the connection (once, by the loop).
    func close() {
        if phase == .events { server.events.remove(fd) }
        if offended { server.offenders.record(pid: peer.pid, startTime: peer.startTime) }
        _ = Glibc.close(fd)
        server.lockScheduler.connectionEnded()
    }

    /// One request and its answer; false when the connection ends (refused, or turned into something else).
    private func answer(_ frame: inout [UInt8], sentAt start: Int) -> Bool {
        let response: Response
        do {
            let request = try Request.decode(frame)
            // A request sent before the caller was identified could have come from a program that then executed
            // another (trusted) one, which the identification saw instead: none is answered.
            if stream.sentBeforeIdentification(start), !request.isSession {
                offended = true
                refuse("a request was sent before the caller was identified")
                return false
            }
            // Still the process that was identified (not a reused pid; no other program executed since).
            guard watch.isStillSameProgram() else {
                refuse("the calling process is no longer the program it was identified as")
                return false
            }
            // A traced process's memory is its tracer's: nothing is given to it (PR_SET_DUMPABLE 0 of its own can be
            // undone by a tracer attached from its start).
            if let tracer = watch.tracer(), tracer != 0 {
                response = .failure(KeychainError(
                    .authFailed, "the calling process is being traced (by pid \(tracer)): keychaind answers it nothing"))
            } else {
                // Long work (a key derivation, a restore, the network) is done off the loop's pool.
                if request.runsLong { ConnectionLoop.willWait() }
                if case .session(let session) = request { open(session) }
                // A client that never opened a session: nobody to ask about groups bound to other programs.
                let service = self.service ?? server.service(for: server.registry.admit(claimed) { _, _ in .unavailable },
                                                             asker: Asker(prompter: nil))
                self.service = service
                switch request {
                case .subscribe:
                    guard send(.done) else { return false }
                    server.events.add(fd)
                    phase = .events
                    return true
                case .serveSecretService(let address, let replace):
                    _ = send(server.takeOverSecretService(for: peer, busAddress: address, replace: replace))
                    return false
                case .trustProgram(let path):
                    response = server.trustProgram(at: path, for: claimed, asker: asker)
                default:
                    response = run(request, on: service)
                }
            }
        } catch {
            // Answered, and counted when the connection ends: a flooder's well-framed garbage would otherwise cost a
            // thread and an identification per connection. A program of ours that trips a decoder limit through
            // API misuse keeps its one connection; only its new connections wait, for 50 ms.
            offended = true
            response = .failure(KeychainError(.param, error.message))
        }
        return send(response)
    }

    /// A refusal, in one frame, before the connection ends; off the loop's pool (written with the caller's
    /// credentials, it may wait for a client that stopped reading).
    private func refuse(_ reason: String) {
        ConnectionLoop.willWait()
        server.refuse(fd, reason)
    }

    /// A session: where its questions go, and the access groups the caller may use.
    private func open(_ session: ClientSession) {
        // Passwords on the client's own terminal or display; decisions only where the client cannot answer them
        // itself (finding: a program that names its own pseudo-terminal said yes to itself). Both asked off the
        // loop's pool: a person answers in seconds, or never.
        let peer = peer
        let asker = Asker(prompter: KeychainDaemonServer.prompter(for: session).map(AskedOffThePool.init),
                          confirmerAtFirstUse: {
                              KeychainDaemonServer.confirmer(for: peer, session: session).map(AskedOffThePool.init)
                          })
        self.asker = asker
        // Groups bound to other programs are left out until the user says yes (a decision: asked only where the
        // client cannot answer it).
        let claimed = claimed
        let caller = server.registry.admit(claimed) { group, members in
            guard let program = claimed.application?.path else { return .unavailable }
            let others = members.map(\.path).joined(separator: ", ")
            return asker.confirm(
                "\(program) claims the keychain access group \u{201C}\(group)\u{201D}, which holds items of \(others).")
        }
        sessionNotice = KeychainDaemonServer.leftOutNotice(claimed: claimed, admitted: caller)
        loggedCaller = nil
        service = server.service(for: caller, asker: asker)
        contexts = ConnectionContexts()
    }

    /// A request on the connection's keychain service, its decisions logged and its event published.
    private func run(_ request: Request, on service: EmbeddedKeychainService) -> Response {
        // A backup or a restore tells its client how far it got, in frames before the answer (this thread is the
        // only writer on the connection while it works). Never waiting for room: the work holds the keychain's
        // locks meanwhile.
        let fd = fd
        let progress = request.reportsProgress ? OperationProgress { done, total in
            _ = Framing.sendIfRoom(Response.progress(done: done, total: total).encode(), on: fd)
        } : nil
        let contexts = contexts
        let (handled, decisions) = OperationProgress.$current.withValue(progress) {
            server.tracingDecisions {
                RequestDispatcher.handle(contexts.substitute(request), service: service, contexts: contexts)
            }
        }
        var failure: KeychainError?
        if case .failure(let error) = handled { failure = error }
        if loggedCaller == nil { loggedCaller = KeychainDaemonServer.LoggedCaller(peer: peer, caller: service.caller) }
        let response: Response
        if let loggedCaller, let unlogged = server.log(decisions, failure: failure, keychain: {
            KeychainDaemonServer.itemKeychain(of: request, service: service)
        }, by: loggedCaller) {
            response = .failure(unlogged)
        } else if case .session = request, case .done = handled, let sessionNotice {
            response = .notice(sessionNotice)
        } else {
            response = handled
        }
        // The login keychain may exist or be unlocked now: it takes the log's key at the first chance.
        if !server.accessLog.isKeyed { server.accessLogKeyReady() }
        if case .failure = response {} else if let event = RequestDispatcher.event(of: request, service: service, pid: peer.pid) {
            server.publish(event)
        }
        return response
    }

    /// One frame, written without waiting while the socket has room (it nearly always has: the client waits for
    /// this answer); a client that does not read is waited for off the loop's pool. Its bytes are wiped: an answer
    /// may carry a secret.
    private func send(_ response: Response) -> Bool {
        var payload = response.encode()
        var frame = Framing.framed(payload)
        payload.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } }
        defer { frame.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        var offset = 0
        while offset < frame.count {
            let n = frame.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
            }
            if n > 0 {
                offset += n
            } else if n < 0 && errno == EINTR {
                continue
            } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                ConnectionLoop.willWait()
                var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&descriptor, 1, -1)
            } else {
                return false
            }
        }
        return true
    }

    /// A subscribed connection sends nothing more: whatever comes is dropped, until it closes.
    private func drainEventStream() -> Bool {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { buffer in
            while true {
                let n = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
                if n > 0 || (n < 0 && errno == EINTR) { continue }
                return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !server.stopped.load(ordering: .relaxed)
            }
        }
    }
}

/// A prompter whose questions are asked off the connection loop's pool: the thread that asks leaves it first.
struct AskedOffThePool: Prompter {
    let base: any Prompter

    func requestPassword(_ request: PasswordRequest) -> PromptResponse {
        ConnectionLoop.willWait()
        return base.requestPassword(request)
    }

    func requestConfirmation(_ request: ConfirmationRequest) -> ConfirmationResponse {
        ConnectionLoop.willWait()
        return base.requestConfirmation(request)
    }
}

extension Request {
    /// Work that is long next to a find (a password's key derivation, a restore, a key pair, the network, hashing a
    /// program): done off the connection loop's pool, so that it keeps no thread from other clients.
    var runsLong: Bool {
        switch self {
        case .createKeychain, .unlock, .changePassword, .generateKeyPair, .importItems, .exportItems, .backUp,
             .restore, .importSecrets, .sync, .accessLog, .authenticateOwner, .serveSecretService, .trustProgram:
            return true
        default:
            return false
        }
    }
}
