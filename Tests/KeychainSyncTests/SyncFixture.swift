import Foundation
import KeychainInterface
import KeychainTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

struct Ran {
    var status: Int32
    var stdout: String
    var stderr: String
}

func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, stdin: String = "")
    throws -> Ran
{
    let output = try ChildProcess.run(executable, arguments: arguments, environment: environment,
                                      input: Data(stdin.utf8))
    let status: Int32 = switch output.termination {
    case .exited(let code): code
    case .signalled(let signal): 128 + signal
    }
    return Ran(status: status, stdout: String(decoding: output.stdout, as: UTF8.self),
               stderr: String(decoding: output.stderr, as: UTF8.self))
}

/// A real PostgreSQL for the sync tests: one cluster per test process (scripts/sync-postgres.sh: a temporary
/// directory, a unix socket only), stopped when the process ends; each test gets a database of its own in it.
final class PostgresCluster: Sendable {
    let socketDirectory: String
    let user: String
    let database: String

    private struct Cluster: Sendable {
        let directory: URL
        let user: String
    }

    private static let shared: Result<Cluster, FixtureError> = {
        let directory = URL(fileURLWithPath: "/tmp/kcsync-\(UUID().uuidString.prefix(8))")
        let script = Built.packageRoot.appendingPathComponent("scripts/sync-postgres.sh").path
        guard let started = try? run(script, ["start", directory.path]), started.status == 0,
              let line = started.stdout.split(separator: "\n").last
        else { return .failure(FixtureError("PostgreSQL did not start (scripts/sync-postgres.sh start)")) }
        let fields = Dictionary(uniqueKeysWithValues: line.split(separator: " ").compactMap { field in
            field.firstIndex(of: "=").map { (String(field[..<$0]), String(field[field.index(after: $0)...])) }
        })
        stopAtExit = directory.path
        atexit {
            guard let path = PostgresCluster.stopAtExit else { return }
            let script = Built.packageRoot.appendingPathComponent("scripts/sync-postgres.sh").path
            _ = try? run(script, ["stop", path])
            try? FileManager.default.removeItem(atPath: path)
        }
        return .success(Cluster(directory: directory, user: fields["user"] ?? "postgres"))
    }()
    nonisolated(unsafe) private static var stopAtExit: String?

    init() throws {
        let cluster = try Self.shared.get()
        socketDirectory = cluster.directory.path
        user = cluster.user
        database = "kc_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")
        _ = try sql("CREATE DATABASE \(database)", in: "postgres")
    }

    var socket: String { socketDirectory + "/.s.PGSQL.5432" }

    private static var psql: String {
        ["/usr/bin/psql", "/usr/local/bin/psql"].first { FileManager.default.fileExists(atPath: $0) } ?? "psql"
    }

    /// Runs SQL with psql (the database's own client) in this test's database; its output, unaligned.
    func sql(_ statement: String, in name: String? = nil) throws -> String {
        let result = try run(Self.psql, ["-h", socketDirectory, "-U", user, "-d", name ?? database, "-X", "-A", "-t",
                                         "-v", "ON_ERROR_STOP=1", "-c", statement])
        guard result.status == 0 else { throw FixtureError("psql: \(result.stderr)") }
        return result.stdout
    }

    /// Everything this test's database holds, as pg_dump writes it.
    func dump() throws -> String {
        let pgDump = ["/usr/bin/pg_dump", "/usr/local/bin/pg_dump"].first { FileManager.default.fileExists(atPath: $0) }
            ?? "pg_dump"
        let result = try run(pgDump, ["-h", socketDirectory, "-U", user, "-d", database, "--inserts"])
        guard result.status == 0 else { throw FixtureError("pg_dump: \(result.stderr)") }
        return result.stdout
    }

    /// Drops this test's database (the cluster goes on for the others).
    func stop() {
        _ = try? sql("DROP DATABASE IF EXISTS \(database) WITH (FORCE)", in: "postgres")
    }
}

/// keychain-sync-server started as a user would, on a port the kernel picks.
final class SyncServerProcess: Sendable {
    let process: ChildProcess
    let port: Int
    var url: String { "http://127.0.0.1:\(port)" }

    init(database: PostgresCluster, port requested: Int = 0, extra: [String] = []) throws {
        var pipe = try ChildPipe()
        process = try ChildProcess.spawn(
            Built.path("keychain-sync-server"),
            arguments: ["--database-socket", database.socket, "--database-user", database.user,
                        "--database-name", database.database, "--port", "\(requested)"] + extra,
            stdout: pipe.childEnd, stderr: nil)
        pipe.closeChildEnd()
        // "listening on 127.0.0.1:PORT", once the schema is migrated and the socket bound.
        var line = [UInt8]()
        var byte: UInt8 = 0
        var fds = [pollfd(fd: pipe.ourEnd, events: Int16(POLLIN), revents: 0)]
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, !line.contains(0x0a) {
            guard poll(&fds, 1, 1000) >= 0 else { break }
            if fds[0].revents != 0 {
                guard read(pipe.ourEnd, &byte, 1) == 1 else { break }
                line.append(byte)
            }
        }
        let text = String(decoding: line, as: UTF8.self)
        guard let colon = text.lastIndex(of: ":"),
              let port = Int(text[text.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            process.send(SIGKILL)
            _ = process.wait()
            throw FixtureError("keychain-sync-server did not start: \(text)")
        }
        self.port = port
    }

    func stop() {
        process.send(SIGTERM)
        _ = process.wait()
    }

    /// Killed outright, as a crash or an OOM kill would.
    func kill() {
        process.send(SIGKILL)
        _ = process.wait()
    }
}

/// One device: a home of its own with its own keychaind (started on demand by the first command), which asks its
/// questions through a scripted pinentry on a display of its own: it answers each CONFIRM with the next line of
/// `answers` ("allow" when there is none) and notes every description it was shown in `asked`.
struct Device {
    let home: URL
    /// keychaind's background interval (KEYCHAIN_SYNC_INTERVAL): off unless a test wants rounds of its own, so
    /// that what an explicit `sync-now` did can be counted.
    var syncInterval = "off"
    var answers: URL { home.appendingPathComponent("pinentry-answers") }
    var asked: URL { home.appendingPathComponent("pinentry-asked") }
    var pinentry: URL { home.appendingPathComponent("pinentry") }

    init(_ name: String) throws {
        home = URL(fileURLWithPath: "/tmp/kcdev-\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: home.appendingPathComponent("run"), withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        try "".write(to: answers, atomically: true, encoding: .utf8)
        try "".write(to: asked, atomically: true, encoding: .utf8)
        try """
            #!/bin/sh
            echo "OK ready"
            while IFS= read -r line; do
              case "$line" in
                SETDESC*) echo "$line" >> '\(asked.path)'; echo "OK" ;;
                CONFIRM*)
                  answer=$(head -n 1 '\(answers.path)'); sed -i 1d '\(answers.path)'
                  case "${answer:-allow}" in allow) echo "OK" ;; *) echo "ERR 83886179 Operation cancelled" ;; esac ;;
                GETPIN*) echo "ERR 83886179 Operation cancelled" ;;
                BYE) echo "OK"; exit 0 ;;
                *) echo "OK" ;;
              esac
            done
            """.write(to: pinentry, atomically: true, encoding: .utf8)
        chmod(pinentry.path, 0o755)
    }

    /// What the pinentry was asked to show, decoded (pinentry's %XX escapes).
    var questions: String {
        let text = (try? String(contentsOf: asked, encoding: .utf8)) ?? ""
        return text.replacingOccurrences(of: "%0A", with: " ").replacingOccurrences(of: "%25", with: "%")
    }

    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home.path
        environment["XDG_DATA_HOME"] = home.appendingPathComponent("data").path
        environment["XDG_STATE_HOME"] = home.appendingPathComponent("state").path
        environment["XDG_CONFIG_HOME"] = home.appendingPathComponent("config").path
        environment["XDG_RUNTIME_DIR"] = home.appendingPathComponent("run").path
        environment["KEYCHAIN_BACKEND"] = "daemon"
        environment["DISPLAY"] = ":kc-sync-test"
        environment["WAYLAND_DISPLAY"] = nil
        environment["PINENTRY_PROGRAM"] = pinentry.path
        environment["KEYCHAIN_SYNC_INTERVAL"] = syncInterval
        return environment
    }

    @discardableResult
    func security(_ arguments: String..., stdin: String = "") throws -> Ran {
        try run(Built.path("security"), arguments, environment: environment, stdin: stdin)
    }

    /// The native API (keychain-example) storing, reading or deleting an item, synchronizable or not.
    @discardableResult
    func example(_ arguments: String..., synchronizable: Bool = true, stdin: String = "") throws -> Ran {
        try run(Built.path("keychain-example"), (synchronizable ? ["--synchronizable"] : []) + arguments,
                environment: environment, stdin: stdin)
    }

    /// The keychaind serving this home, if one runs.
    var daemonPID: pid_t? {
        let directory = home.appendingPathComponent("run/keychain")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        guard let lock = names.first(where: { $0.hasSuffix(".sock.lock") }),
              let text = try? String(contentsOf: directory.appendingPathComponent(lock), encoding: .utf8)
        else { return nil }
        return pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    func cleanUp() {
        if let pid = daemonPID { kill(pid, SIGTERM) }
        try? FileManager.default.removeItem(at: home)
    }
}

struct FixtureError: Error, CustomStringConvertible, Sendable {
    let description: String
    init(_ description: String) { self.description = description }
}
