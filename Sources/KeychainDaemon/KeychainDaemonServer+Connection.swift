import CKeychainLinux
import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus
import KeychainInterface
import KeychainStorage
import KeychainWire
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One client on the socket, from its greeting to its end: identified once from the kernel's credentials,
/// checked again at every request (same program, not traced, every chunk from its own process), then served by
/// a keychain service of its own; or turned into an event stream.
extension KeychainDaemonServer {
    /// A change to the keychains, from any door: to the socket's event subscribers and the Secret Service's bus.
    func publish(_ event: KeychainEvent) {
        events.publish(event)
        secretService.withLock { $0 }?.announce(event)
        if [.add, .update, .delete, .unlock].contains(event.kind), let path = event.keychain {
            syncing?.keychainChanged(at: path)
        }
        if event.kind == .unlock { accessLogKeyReady() }
    }

    func serve(_ fd: Int32) {
        defer {
            close(fd)
            lockScheduler.connectionEnded()
        }
        guard let (peer, connected) = PeerIdentity.connected(to: fd) else { return refuse(fd, "cannot identify the caller") }
        // Made at once, so that it owns the connected process's pidfd whatever is refused below.
        let watch = ProcessWatch(peer, connected: connected)
        guard peer.uid == geteuid() else { return refuse(fd, "keychaind serves only its own user") }
        guard let claimed = policy.caller(for: peer) else {
            // /proc/PID/exe is unreadable for a process that made itself non-dumpable before connecting.
            return refuse(fd, "cannot identify the caller's program (connect before PR_SET_DUMPABLE 0)")
        }
        // Everything is read with the sender's pid checked against the caller's, counting from here: what was
        // queued before the caller was identified can only be its greeting and session (a client sends any other
        // request only after the greeting's answer, which goes out after the identification).
        guard let watch else { return refuse(fd, "cannot identify the caller") }
        // A connection that broke the protocol turns its process's next ones away for a while (ProtocolOffenders).
        var offended = false
        defer { if offended { offenders.record(pid: peer.pid, startTime: peer.startTime) } }
        let stream = ClientStream(fd: fd, peer: peer.pid)
        do {
            guard let hello = try stream.receive(limit: 64) else { return }
            try Framing.checkClientHello(hello)
        } catch {
            if case .versionMismatch = error {} else { offended = true }  // an older client is no offender
            return refuse(fd, error.message)
        }
        guard sendAsKeychaind(greeting, on: fd) else { return }
        // Made at the first request, so that a client that opens its session first (every client of ours does)
        // gets one service, not one before and one after.
        var connectionService: EmbeddedKeychainService?
        var contexts = ConnectionContexts()
        var connectionAsker = Asker(prompter: nil)
        var loggedCaller: LoggedCaller?
        var sessionNotice: String?
        while true {
            var frame: [UInt8]
            let start = stream.consumed
            do {
                guard let received = try stream.receive(limit: WireLimits.maximumRequest) else { return }
                frame = received
            } catch {
                // An oversized or torn frame ends this connection only, and counts against its process; a frame that
                // another process sent (a descriptor passed on) does not count against the one that connected.
                if case .malformed = error {} else { offended = true }
                return
            }
            let response: Response
            do {
                let request = try Request.decode(frame)
                // A request sent before the caller was identified could have come from a program that then executed
                // another (trusted) one, which the identification saw instead: none is answered.
                if stream.sentBeforeIdentification(start), !request.isSession {
                    offended = true
                    return refuse(fd, "a request was sent before the caller was identified")
                }
                // Still the process that was identified (not a reused pid; no other program executed since).
                guard watch.isStillSameProgram() else {
                    return refuse(fd, "the calling process is no longer the program it was identified as")
                }
                // A traced process's memory is its tracer's: nothing is given to it (PR_SET_DUMPABLE 0 of its own
                // can be undone by a tracer attached from its start).
                if let tracer = watch.tracer(), tracer != 0 {
                    response = .failure(KeychainError(
                        .authFailed, "the calling process is being traced (by pid \(tracer)): keychaind answers it nothing"))
                } else {
                    if case .session(let session) = request {
                        // Passwords on the client's own terminal or display; decisions only where the client cannot
                        // answer them itself (finding: a program that names its own pseudo-terminal said yes to
                        // itself).
                        let asker = Asker(prompter: Self.prompter(for: session),
                                          confirmerAtFirstUse: { Self.confirmer(for: peer, session: session) })
                        connectionAsker = asker
                        // Groups bound to other programs are left out until the user says yes (a decision: asked
                        // only where the client cannot answer it).
                        let caller = registry.admit(claimed) { group, members in
                            guard let program = claimed.application?.path else { return .unavailable }
                            let others = members.map(\.path).joined(separator: ", ")
                            return asker.confirm(
                                "\(program) claims the keychain access group \u{201C}\(group)\u{201D}, which holds items of \(others).")
                        }
                        sessionNotice = Self.leftOutNotice(claimed: claimed, admitted: caller)
                        loggedCaller = nil
                        connectionService = EmbeddedKeychainService(
                            locations: locations, caller: caller, asker: asker, baseConfiguration: fileConfiguration,
                            syncing: syncing, accessLog: accessLog, keychains: keychains, preferences: preferences,
                            notice: daemonNotice)
                        contexts = ConnectionContexts()
                    }
                    // A client that never opened a session: nobody to ask about groups bound to other programs.
                    let service = connectionService ?? EmbeddedKeychainService(
                        locations: locations, caller: registry.admit(claimed) { _, _ in .unavailable },
                        asker: Asker(prompter: nil), baseConfiguration: fileConfiguration, syncing: syncing,
                        accessLog: accessLog, keychains: keychains, preferences: preferences, notice: daemonNotice)
                    connectionService = service
                    if case .subscribe = request { return streamEvents(to: fd) }
                    if case .serveSecretService(let address, let replace) = request {
                        _ = Framing.send(takeOverSecretService(for: peer, busAddress: address, replace: replace).encode(), on: fd)
                        return
                    }
                    if case .trustProgram(let path) = request {
                        response = trustProgram(at: path, for: claimed, asker: connectionAsker)
                    } else {
                        // A backup or a restore tells its client how far it got, in frames before the answer (this
                        // thread is the only writer on the connection while it works). Never waiting for room: the
                        // work holds the keychain's locks meanwhile.
                        let progress = request.reportsProgress ? OperationProgress { done, total in
                            _ = Framing.sendIfRoom(Response.progress(done: done, total: total).encode(), on: fd)
                        } : nil
                        let (handled, decisions) = OperationProgress.$current.withValue(progress) {
                            tracingDecisions {
                                RequestDispatcher.handle(contexts.substitute(request), service: service, contexts: contexts)
                            }
                        }
                        var failure: KeychainError?
                        if case .failure(let error) = handled { failure = error }
                        if loggedCaller == nil { loggedCaller = LoggedCaller(peer: peer, caller: service.caller) }
                        if let loggedCaller, let unlogged = log(decisions, failure: failure, keychain: {
                            Self.itemKeychain(of: request, service: service)
                        }, by: loggedCaller) {
                            response = .failure(unlogged)
                        } else if case .session = request, case .done = handled, let sessionNotice {
                            response = .notice(sessionNotice)
                        } else {
                            response = handled
                        }
                        // The login keychain may exist or be unlocked now: it takes the log's key at the first chance.
                        if !accessLog.isKeyed { accessLogKeyReady() }
                        if case .failure = response {} else if let event = RequestDispatcher.event(of: request, service: service,
                                                                                                   pid: peer.pid) {
                            publish(event)
                        }
                    }
                }
            } catch {
                // Answered, and counted when the connection ends: a flooder's well-framed garbage would otherwise cost
                // a thread and an identification per connection. A program of ours that trips a decoder limit through
                // API misuse keeps its one connection; only its new connections wait, for 50 ms.
                offended = true
                response = .failure(KeychainError(.param, error.message))
            }
            frame.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } }
            var answer = response.encode()
            let sent = Framing.send(answer, on: fd)
            answer.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } }
            if !sent { return }
        }
    }

    /// A subscribed connection: `done`, then events until the client closes it (it sends nothing more).
    func streamEvents(to fd: Int32) {
        guard Framing.send(Response.done.encode(), on: fd) else { return }
        events.add(fd)
        defer { events.remove(fd) }
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || stopped.load(ordering: .relaxed) { return }
        }
    }

    /// What a program left out of access groups it claims is told at its session (once, on its standard error):
    /// which groups, and the command that lets a build of the user's own in. Other programs' paths are not named.
    static func leftOutNotice(claimed: Caller, admitted: Caller) -> String? {
        let left = claimed.accessGroups.filter { !admitted.accessGroups.contains($0) }
        guard !left.isEmpty, let program = claimed.application?.path else { return nil }
        let groups = left.map { "\u{201C}\(printable($0))\u{201D}" }.joined(separator: ", ")
        return "\(printable(program)) was left out of the keychain access group\(left.count == 1 ? "" : "s") \(groups): "
            + "\(left.count == 1 ? "it holds" : "they hold") items of another program, or of an earlier build of this one. "
            + "If this build is yours: security trust-program \(shellQuoted(program))"
    }

    /// Without control characters (a path or group name is the client's, shown on its terminal).
    private static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.properties.generalCategory != .control }))
    }

    /// A path as a shell command takes it: as it is when it needs no quoting, else in single quotes.
    static func shellQuoted(_ path: String) -> String {
        let plain = !path.isEmpty && path.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                || "/._+-,:@%=".unicodeScalars.contains(scalar))
        }
        if plain { return path }
        return "'" + printable(path).replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// `security trust-program PATH`: the program now at PATH (its path and the SHA-256 of its file) may use the
    /// access groups its files claim, where the user says yes to each group bound to other programs. For a
    /// rebuilt binary (a test suite after each build) that would otherwise be left out of its groups, asked
    /// nothing, when it runs with nobody to ask. Only the keychain's own `security` may ask; the question goes
    /// where `security` itself cannot answer it (``confirmer(for:session:)``).
    func trustProgram(at path: String, for claimed: Caller, asker: Asker) -> Response {
        guard AccessEvaluator.mayActOnWholeKeychain(claimed), claimed.application != nil else {
            return .failure(KeychainError(.authFailed, "only the keychain's own security command may trust a program"))
        }
        let url = URL(fileURLWithPath: path).resolvingSymlinksInPath()
        guard let digest = ExecutableDigest.of(path: url.path) else {
            return .failure(KeychainError(.param, "cannot read \(url.path)"))
        }
        let program = TrustedApplication(path: url.path, digest: digest)
        let identity = ApplicationIdentity.current(executable: url, environment: [:])
        var refused: [String] = []
        var status = KeychainStatus.interactionNotAllowed  // nobody to ask: no display, no login terminal
        let admitted = registry.admit(Caller(accessGroups: identity.accessGroups, application: program)) { group, members in
            let others = members.map(\.path).joined(separator: ", ")
            let answer = asker.confirm("Let \(url.path), as its file is now, use the keychain access group "
                + "\u{201C}\(group)\u{201D}, which holds items of \(others)?")
            // Asked for on purpose: Allow binds as Always Allow does.
            if answer == .allow || answer == .alwaysAllow { return .alwaysAllow }
            refused.append(group)
            if answer == .deny { status = .authFailed } else if answer == .cancelled, status != .authFailed { status = .userCanceled }
            return answer
        }
        if !refused.isEmpty {
            // As the other questions answer: Deny errSecAuthFailed, Cancel errSecUserCanceled, nobody to ask
            // errSecInteractionNotAllowed.
            return .failure(KeychainError(status, "not allowed to use \(refused.joined(separator: ", "))"))
        }
        return .count(admitted.accessGroups.count)
    }
}
