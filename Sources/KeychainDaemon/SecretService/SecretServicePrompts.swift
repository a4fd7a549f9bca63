import Foundation
import KeychainCore
import KeychainDBus
import KeychainInterface
import Synchronization
import KeychainThreads

/// Prompt objects (org.freedesktop.Secret.Prompt): what needs the user (a keychain password, a yes for another
/// program's item) is handed back to the client as a prompt; its `Prompt` call asks, on a thread of its own, so the
/// bus keeps serving everyone else while the user thinks, and `Completed` goes to that client alone once the work
/// is done. `Dismiss` ends it at once: what is answered afterwards changes nothing.
extension SecretServiceServer {
    static let promptPrefix = "/org/freedesktop/secrets/prompt/"
    static let promptInterface = "org.freedesktop.Secret.Prompt"

    /// A prompt's work: asks the user through `prompter` (nil: nobody can be asked) and applies the answer unless
    /// `isDismissed` says the client gave up meanwhile. Returns the result, or nil when dismissed or refused.
    typealias PromptWork = @Sendable (_ prompter: (any Prompter)?, _ isDismissed: @escaping @Sendable () -> Bool) -> DBusValue?

    final class PendingPrompt: Sendable {
        let owner: String
        let work: PromptWork
        /// What Completed carries when the prompt is dismissed (an empty value of the result's type).
        let emptyResult: DBusValue
        private let state = Mutex<(started: Bool, finished: Bool)>((false, false))

        init(owner: String, emptyResult: DBusValue, work: @escaping PromptWork) {
            self.owner = owner
            self.work = work
            self.emptyResult = emptyResult
        }

        /// True the first time only: a prompt runs once.
        func start() -> Bool { state.withLock { state in defer { state.started = true }; return !state.started } }
        /// True the first time only: Completed is sent once.
        func finish() -> Bool { state.withLock { state in defer { state.finished = true }; return !state.finished } }
        var isFinished: Bool { state.withLock { $0.finished } }
    }

    /// The counter a prompt's path ends with (`…/prompt/p42` → 42).
    static func promptNumber(_ path: String) -> Int { Int(path.dropFirst(promptPrefix.count + 1)) ?? 0 }

    /// A new prompt of `owner`'s; its path is what the method returns beside its immediate result.
    func makePrompt(owner: String, emptyResult: DBusValue, work: @escaping PromptWork) -> String {
        let prompt = PendingPrompt(owner: owner, emptyResult: emptyResult, work: work)
        return state.withLock { state in
            let path = Self.promptPrefix + "p\(state.nextPrompt)"
            state.nextPrompt += 1
            // The oldest goes first: by the counter in its path (a string sort would put p10 before p9).
            if state.prompts.count >= 256, let oldest = state.prompts.keys.min(by: { Self.promptNumber($0) < Self.promptNumber($1) }) {
                state.prompts.removeValue(forKey: oldest)
            }
            state.prompts[path] = prompt
            return path
        }
    }

    /// Prompt(window-id) and Dismiss() on a prompt of the caller's (another client's prompt does not exist for it).
    func promptCall(_ member: String, path: String, caller: String) throws -> [DBusValue] {
        guard let prompt = state.withLock({ $0.prompts[path] }), prompt.owner == caller else { throw Failure.unknownObject(path) }
        switch member {
        case "Prompt":
            guard prompt.start() else { return [] }  // already running: its Completed is on the way
            let started = DetachedThread.start(name: "keychaind-prompt", stackSize: 1 << 20) { [self] in
                let result = prompt.work(desktopPrompter()) { prompt.isFinished }
                complete(path, prompt, dismissed: result == nil, result: result ?? prompt.emptyResult)
            }
            if !started { complete(path, prompt, dismissed: true, result: prompt.emptyResult) }
            return []
        case "Dismiss":
            complete(path, prompt, dismissed: true, result: prompt.emptyResult)
            return []
        default:
            throw unknownMethod(member)
        }
    }

    private func complete(_ path: String, _ prompt: PendingPrompt, dismissed: Bool, result: DBusValue) {
        guard prompt.finish() else { return }
        state.withLock { _ = $0.prompts.removeValue(forKey: path) }
        _ = try? connection.send(.signal(path: path, interface: Self.promptInterface, member: "Completed",
                                         body: [.boolean(dismissed), .variant(result)], destination: prompt.owner))
    }

    /// pinentry on the desktop session's display: keychaind's own DISPLAY / WAYLAND_DISPLAY, else the ones the
    /// session gave systemd's user manager after keychaind started (a socket-activated keychaind may start before
    /// the display exists). nil when there is no display: nobody can be asked.
    func desktopPrompter() -> (any Prompter)? {
        var environment = self.environment
        if environment["DISPLAY"] == nil, environment["WAYLAND_DISPLAY"] == nil {
            environment.merge(managerDisplayEnvironment()) { own, _ in own }
        }
        guard environment["DISPLAY"] != nil || environment["WAYLAND_DISPLAY"] != nil else { return nil }
        return PinentryPrompter(program: KeychainDaemonServer.pinentryProgram(environment),
                                environment: KeychainDaemonServer.pinentryEnvironment(environment))
    }

    /// How long keychaind waits for the bus daemon or systemd's manager to answer a question about the display.
    static let managerPatience: Double = 2

    /// DISPLAY, WAYLAND_DISPLAY and XAUTHORITY as systemd's user manager holds them, asked of the manager only: when
    /// no manager runs, any program can own `org.freedesktop.systemd1` on the session bus, and one that never
    /// answers would hold every search of a locked keychain for the bus's 25 s. So the name's owner must be
    /// systemd itself (its executable root's and named `systemd`), and it gets two seconds.
    func managerDisplayEnvironment() -> [String: String] {
        let manager = "org.freedesktop.systemd1"
        let bus = "org.freedesktop.DBus"
        guard let owner = try? connection.call(.methodCall(destination: bus, path: "/org/freedesktop/DBus", interface: bus,
                                                           member: "GetConnectionUnixProcessID", body: [.string(manager)]),
                                               timeout: Self.managerPatience),
              let pid = owner.body.first?.uint32Value,
              let executable = PeerIdentity.executable(of: pid_t(pid)),
              executable.split(separator: "/").last == "systemd", ProtectedPath.isProtected(executable)
        else { return [:] }
        var ask = DBusMessage.methodCall(destination: manager, path: "/org/freedesktop/systemd1",
                                         interface: Self.propertiesInterface, member: "Get",
                                         body: [.string("org.freedesktop.systemd1.Manager"), .string("Environment")])
        ask.flags.insert(.noAutoStart)  // only a manager that runs: never start one to ask it
        guard let reply = try? connection.call(ask, timeout: Self.managerPatience),
              case .variant(let value)? = reply.body.first, let entries = value.arrayElements
        else { return [:] }
        var found: [String: String] = [:]
        for case .string(let entry) in entries {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2, ["DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY"].contains(parts[0]) { found[parts[0]] = parts[1] }
        }
        return found
    }

    /// A client that left: its prompts go (one still asking finishes, and its answer is dropped).
    func forgetPrompts(of owner: String) {
        let gone = state.withLock { state in
            let gone = state.prompts.filter { $0.value.owner == owner }
            for path in gone.keys { state.prompts.removeValue(forKey: path) }
            return gone.values
        }
        for prompt in gone { _ = prompt.finish() }
    }
}
