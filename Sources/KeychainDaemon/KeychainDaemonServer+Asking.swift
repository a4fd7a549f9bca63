import CKeychainLinux
import Foundation
import KeychainClient
import KeychainCore
import Logging
import KeychainDBus
import KeychainInterface
import KeychainStorage
import KeychainWire
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Where keychaind asks the user on a client's behalf: passwords on the client's terminal or display, decisions
/// only where the client cannot answer them itself (keychaind's own display, or the login terminal as utmp records
/// it), always through a pinentry root alone can change.
extension KeychainDaemonServer {
    /// The daemon's own pinentry (PINENTRY_PROGRAM of the daemon's environment, else `pinentry`), drawn on the
    /// client's terminal or display; nil when the client has neither (calls that need the user then answer
    /// errSecInteractionNotAllowed).
    static func prompter(for session: ClientSession) -> (any Prompter)? {
        guard session.canAsk else { return nil }
        let own = ownEnvironment
        var environment = pinentryEnvironment(own)
        for key in ["DISPLAY", "WAYLAND_DISPLAY"] { environment.removeValue(forKey: key) }
        if let display = session.display { environment["DISPLAY"] = display }
        if let wayland = session.waylandDisplay { environment["WAYLAND_DISPLAY"] = wayland }
        if let term = session.term { environment["TERM"] = term }
        return PinentryPrompter(program: pinentryProgram(own),
                                arguments: session.terminal.map { ["--ttyname", $0] } ?? [], environment: environment)
    }

    /// The pinentry keychaind runs: PINENTRY_PROGRAM when only root can change that file (a program of the user
    /// that started keychaind with its own "pinentry" would see every password and answer every question), else
    /// `pinentry` from the system's directories (never from a PATH the starter chose).
    public static func pinentryProgram(_ environment: [String: String],
                                       installed: Bool = InstalledDaemon.thisProcessKeepsItsGroup) -> String {
        if let chosen = environment["PINENTRY_PROGRAM"], chosen.hasPrefix("/") {
            // The file itself, not a link to it that its owner could point elsewhere after this check.
            let resolved = URL(fileURLWithPath: chosen).resolvingSymlinksInPath().path
            if ProtectedPath.isProtected(resolved), !installed || isPinentry(resolved) { return resolved }
        }
        if let chosen = environment["PINENTRY_PROGRAM"] {
            Logger(label: "keychaind").warning(
                "PINENTRY_PROGRAM \(chosen) is not used: only \(installed ? "a pinentry" : "a program") that root alone can change is")
        }
        return ["/usr/bin/pinentry", "/bin/pinentry"].first { FileManager.default.isExecutableFile(atPath: $0) }
            ?? "/usr/bin/pinentry"
    }

    /// Whether `path` names a pinentry (`pinentry`, `pinentry-gnome3`, …). The installed keychaind, which a program of
    /// the user may have started with an environment of its choosing, runs nothing else as its pinentry: any program
    /// root owns would do otherwise, an interpreter among them (python3 runs the starter's code from HOME).
    static func isPinentry(_ path: String) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? ""
        return name == "pinentry" || name.hasPrefix("pinentry-")
    }

    /// Where keychaind asks for a decision about a client: never a place the client names (it could be a
    /// pseudo-terminal or a display it controls). The session's display as keychaind itself knows it (its own
    /// DISPLAY / WAYLAND_DISPLAY), else the client's controlling terminal when it is a login terminal of this user
    /// (``LoginTerminal``); nil: nobody can be asked, and the call answers errSecInteractionNotAllowed.
    /// Worked out at the first decision of each session (``Asker/init(prompter:confirmerAtFirstUse:)``), for the
    /// terminal the process had when it was identified.
    static func confirmer(for peer: PeerIdentity, session: ClientSession) -> (any Prompter)? {
        let own = ownEnvironment
        let program = pinentryProgram(own)
        var environment = pinentryEnvironment(own)
        if own["DISPLAY"] != nil || own["WAYLAND_DISPLAY"] != nil {
            return PinentryPrompter(program: program, environment: environment)
        }
        // A login terminal only where the kernel refuses TIOCSTI (a program on that terminal could otherwise type
        // the answer into it).
        guard LoginTerminal.injectionRefused(), let terminal = LoginTerminal.of(device: peer.terminalDevice, user: peer.uid)
        else { return nil }
        if let term = session.term { environment["TERM"] = term }
        let prompter = PinentryPrompter(program: program, arguments: ["--ttyname", terminal], environment: environment)
        return LoginTerminalPrompter(asking: prompter, terminal: terminal, device: peer.terminalDevice, user: peer.uid)
    }

    /// keychaind's own environment, read once: nothing in keychaind changes it, and every session's asker starts
    /// from it.
    static let ownEnvironment = ProcessInfo.processInfo.environment

    /// What keychaind's pinentry gets of keychaind's environment: where to draw (display, Wayland, X authority,
    /// the user's runtime and bus), the locale and a fixed PATH; nothing a starter could use to load code into it
    /// (GTK_MODULES, QT_PLUGIN_PATH, …).
    static func pinentryEnvironment(_ own: [String: String]) -> [String: String] {
        let kept = ["DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "HOME",
                    "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TERM"]
        var environment = own.filter { kept.contains($0.key) }
        environment["PATH"] = "/usr/local/bin:/usr/bin:/bin"
        // The installed keychaind's home is the user's, from the user database, not whatever its starter said: a
        // pinentry reads its settings (and a toolkit its modules' configuration) from there.
        if InstalledDaemon.thisProcessKeepsItsGroup, let account = getpwuid(getuid())?.pointee {
            environment["HOME"] = String(cString: account.pw_dir)
            environment["USER"] = String(cString: account.pw_name)
            environment["LOGNAME"] = String(cString: account.pw_name)
        }
        return environment
    }
}

/// A question on a login terminal, asked only while that terminal is still the user's login: a session that lasts
/// keeps its asker, and the login on the terminal may have ended (and the line passed to another) since its first
/// question. Passwords are not asked through it (decisions only).
struct LoginTerminalPrompter: Prompter {
    let asking: any Prompter
    let terminal: String
    let device: Int
    let user: uid_t
    var utmpPath = "/var/run/utmp"

    func requestPassword(_ request: PasswordRequest) -> PromptResponse { .unavailable }

    func requestConfirmation(_ request: ConfirmationRequest) -> ConfirmationResponse {
        guard LoginTerminal.of(device: device, user: user, utmpPath: utmpPath) == terminal else { return .unavailable }
        return asking.requestConfirmation(request)
    }
}
