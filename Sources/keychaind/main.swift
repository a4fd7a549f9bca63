import CKeychainLinux
import Foundation
import KeychainClient
import KeychainCore
import KeychainDaemon
import KeychainDBus
import KeychainInterface
import KeychainSync
import Logging
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

// keychaind: the per-user keychain service. It holds the unlocked keys (unlock once, then every client reads
// until the keychain locks), identifies each client by its socket's peer credentials, and serves the socket
// $XDG_RUNTIME_DIR/keychain/keychaind.sock (a socket of its own for another set of XDG directories).
//   keychaind [--foreground] [--notify-ready]
// Clients start it on demand with --notify-ready: one line on standard output says how the start went ("ready",
// "running" when another keychaind serves these directories, "failed: reason"), then standard output is closed, so
// the client waits exactly as long as the start takes and learns at once of a daemon that could not start.

// The dynamic loader's variables are not for keychaind, nor for the pinentry it starts: a program of the user that
// starts it with LD_PRELOAD (or a loader path of its own) would have its code beside the keys. Seen at start,
// keychaind executes itself again without them, keeping its pid (a socket handed over by systemd stays valid).
// Installed, keychaind is set-group-ID to a group of its own (docs/SECURITY.md, "Which keychaind a client talks
// to"). It keeps that group as its saved group alone, named only in its greetings' credentials: everything else
// (files, /proc, pinentry and whatever else it starts) is done with the user's group, from the first line of
// keychaind's own code (only the C library's and the Swift runtime's start run before, with the group effective).
var startedWithGroup = gid_t.max
guard ckeychain_keep_group_saved_only(&startedWithGroup) == 0 else {
    let line = Array("keychaind: cannot set its groups (errno \(errno))\n".utf8)
    _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    exit(1)
}
let greetingGroup: gid_t? = startedWithGroup == gid_t.max ? nil : startedWithGroup
let startEnvironment = ProcessInfo.processInfo.environment
// Every module's Logger writes keychaind's lines to standard error (the journal under systemd).
ProcessLogHandler.bootstrap(program: "keychaind", environment: startEnvironment)
let log = Logger(label: "keychaind")
if startEnvironment.keys.contains(where: ProtectedPath.isLoaderVariable) {
    let clean = startEnvironment.filter { !ProtectedPath.isLoaderVariable($0.key) }.map { "\($0.key)=\($0.value)" }
    var argv: [UnsafeMutablePointer<CChar>?] = CommandLine.arguments.map { strdup($0) } + [nil]
    var envp: [UnsafeMutablePointer<CChar>?] = clean.map { strdup($0) } + [nil]
    execve("/proc/self/exe", &argv, &envp)
    log.critical("cannot start again without the loader's variables (errno \(errno))")
    exit(1)
}

// Before anything holds a secret: no core file, no same-user ptrace or /proc/PID/mem.
var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
_ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &noCore)
_ = ckeychain_set_non_dumpable()
// Every client holds three descriptors here (its socket and its /proc stat and status): the soft limit a session
// starts with (often 1,024, kept low for select(2), which keychaind does not use) goes up, to at most 65,536 (the
// children it starts, pinentry, inherit it; some programs walk every descriptor up to the limit).
var descriptors = rlimit()
if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &descriptors) == 0, descriptors.rlim_cur < min(descriptors.rlim_max, 65_536) {
    descriptors.rlim_cur = min(descriptors.rlim_max, 65_536)
    _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &descriptors)
}

let arguments = CommandLine.arguments.dropFirst()
if arguments.contains("--version") {
    print(BuildInfo.versionLine(for: "keychaind"), terminator: "")
    exit(0)
}
if arguments.contains("--help") || arguments.contains("-h") {
    print("usage: keychaind [--foreground] [--notify-ready] [--secret-service [--replace]] [--version]\n"
        + "  serves \(KeychainLocations.current().daemonSocket.path)\n"
        + "  --secret-service  also serves org.freedesktop.secrets on the session bus (docs/SECRET-SERVICE.md)")
    exit(0)
}
let known: Set<String> = ["--foreground", "--notify-ready", "--secret-service", "--replace"]
if let unknown = arguments.first(where: { !known.contains($0) }) {
    log.error("unknown option \(unknown)")
    exit(2)
}

// SIGTERM and SIGINT from here until the ServiceGroup handles them (its run, below) are kept for it, not fatal: the
// socket bound in between would otherwise stay behind. A parent may have left them blocked (Foundation's Process
// does): then they would never end keychaind.
signal(SIGTERM) { _ in KeychainDaemonServer.requestStopEarly() }
signal(SIGINT) { _ in KeychainDaemonServer.requestStopEarly() }
var ending = sigset_t()
sigemptyset(&ending)
sigaddset(&ending, SIGTERM)
sigaddset(&ending, SIGINT)
_ = pthread_sigmask(SIG_UNBLOCK, &ending, nil)
signal(SIGPIPE, SIG_IGN)

/// With --notify-ready: tells the starting client how the start went, then lets go of its pipe.
func notifyStarter(_ line: String) {
    if arguments.contains("--notify-ready") {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
    }
    // keychaind reads nothing from standard input and writes nothing more to standard output: both let go, so that
    // whoever started it (a starting client's pipe; the bus's output when D-Bus activated it inside
    // `$(dbus-run-session …)`) is not held open for as long as keychaind runs. Its messages go to standard error.
    let null = open("/dev/null", O_RDWR)
    if null >= 0 {
        _ = dup2(null, STDIN_FILENO)
        _ = dup2(null, STDOUT_FILENO)
        close(null)
    }
}

/// For a keychaind that only passes a request on to the one running (below): it needs its group for nothing.
func keepOnlyTheUsersGroup() {
    guard ckeychain_keep_only_real_group() == 0 else { failStart("cannot give up keychaind's group (errno \(errno))") }
}

/// Tells the starter and standard error why keychaind cannot serve, and ends.
func failStart(_ reason: String) -> Never {
    notifyStarter("failed: \(reason)")
    log.critical("\(reason)")
    exit(1)
}

let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
// Installed, but started without its group (under a tracer, or with no_new_privs): the clients beside it could not
// tell it from a program of the user, and would refuse it. Said once here, instead of by every client.
if let installed = InstalledDaemon.besideThisProgram, installed.path == executable.path, greetingGroup != installed.group {
    failStart("started without keychaind's group (under a tracer, or with no new privileges, as systemd's "
              + "NoNewPrivileges= gives): clients would not trust it. Start \(installed.path) without either")
}
// Sync (docs/SYNC.md): rounds in the background after changes and every KEYCHAIN_SYNC_INTERVAL seconds (60).
let syncEngine = SyncEngine()
let server: KeychainDaemonServer
do {
    server = try KeychainDaemonServer(
        locations: .current(), policy: CallerPolicy(toolDirectory: CallerPolicy.split(executable.path).directory),
        syncing: syncEngine, greetingGroup: greetingGroup)
} catch .alreadyRunning(let socket) {
    keepOnlyTheUsersGroup()
    // Started for the Secret Service (D-Bus activation) while a keychaind started for the socket runs: that one
    // takes the name on this bus, so that one process holds the keys. This one ends once the name is served.
    if arguments.contains("--secret-service") {
        // The running keychaind identifies this process by its executable, which it can read only while this one is
        // dumpable (a non-dumpable process's /proc/PID/exe is root's). This process holds no secret (the lock was
        // taken by the other one before anything was made), so it becomes identifiable again for its one request.
        _ = ckeychain_set_dumpable_again()
        let environment = ProcessInfo.processInfo.environment
        do throws(KeychainError) {
            guard let address = environment["DBUS_SESSION_BUS_ADDRESS"] else {
                throw KeychainError(.notAvailable, "no session bus (DBUS_SESSION_BUS_ADDRESS is not set)")
            }
            guard let running = try RemoteKeychainService.connect(to: URL(fileURLWithPath: socket)) else {
                throw KeychainError(.notAvailable, "the keychaind on \(socket) does not answer")
            }
            try running.serveSecretService(busAddress: address, replace: arguments.contains("--replace"))
        } catch {
            failStart("Secret Service: \(error.message)")
        }
        notifyStarter("ready")
        log.info("the keychaind on \(socket) now serves the Secret Service too")
        exit(0)
    }
    notifyStarter("running")
    log.info("already running on \(socket)")
    exit(0)
} catch .failed(let reason) {
    failStart(reason)
}
// The Secret Service, when asked for: on the session bus, beside the socket. A name owned by another program
// (gnome-keyring-daemon) is an error unless --replace.
if arguments.contains("--secret-service") {
    do {
        let bus = try DBusConnection.sessionBus(fileDescriptors: true)  // the Secret portal's calls carry one
        try server.serveSecretService(on: bus, replace: arguments.contains("--replace"))
    } catch {
        failStart("Secret Service: \(error)")
    }
}
notifyStarter("ready")
// logind's PrepareForSleep: keychains set to lock on sleep lock before the machine sleeps, under a delay inhibitor
// (a descriptor logind passes: hence the connection that takes descriptors). After "ready": the client that started
// keychaind does not wait for the system bus. No system bus (a container, a minimal system): waking is still
// noticed by the clocks.
if let systemBus = try? DBusConnection.systemBus(fileDescriptors: true) {
    do { try server.watchForSleep(on: systemBus) } catch {
        log.warning("not following logind's sleep signal: \(error)")
    }
}

// The services, under one ServiceGroup: SIGTERM and SIGINT shut them down gracefully, in the reverse order of this
// list (the sync rounds end first; the server last, once its calls under way have finished and every keychain is
// closed). The socket going away ends the server, and the group with it.
// KEYCHAIN_SYNC_INTERVAL=off: rounds only when asked (sync-now), as tests that count what a round did need.
var services: [any Service] = [server]
let syncInterval = ProcessInfo.processInfo.environment["KEYCHAIN_SYNC_INTERVAL"]
if syncInterval != "off" {
    let seconds = syncInterval.flatMap(Double.init).map { max($0, 1) } ?? 60
    services.append(SyncRounds(engine: syncEngine, interval: .milliseconds(Int64(seconds * 1000)),
                               keychains: { [server] in server.keychains.all }))
    // A keychain opened after keychaind started (the first client's) is watched from then on, and takes what other
    // devices wrote while keychaind was not running.
    server.keychains.observeOpening { [syncEngine] path in syncEngine.keychainOpened(at: path) }
}
log.info("serving \(server.socket.path)")
// Every service ending on its own (the server, once its socket is gone) shuts the others down too, gracefully.
let group = ServiceGroup(configuration: .init(
    services: services.map { .init(service: $0, successTerminationBehavior: .gracefullyShutdownGroup) },
    gracefulShutdownSignals: [.sigterm, .sigint], logger: log))
// A removed or replaced socket: nobody can reach keychaind any more; it ends as SIGTERM ends it.
server.whenUnreachable { Task { await group.triggerGracefulShutdown() } }
do {
    try await group.run()
} catch {
    log.error("stopped: \(error)")
    exit(1)
}
exit(0)
