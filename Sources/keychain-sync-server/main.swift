import Foundation
import Hummingbird
import KeychainInterface
import KeychainSyncServer
import Logging

// keychain-sync-server: the self-hosted sync service (docs/SYNC.md). Flags first, then the environment.
let usage = """
    usage: keychain-sync-server [--database-url postgres://USER[:PW]@HOST[:PORT]/DB]
                                [--database-socket PATH --database-user USER --database-name DB]
                                [--host ADDRESS] [--port N] [--tls-certificate PEM --tls-key PEM]
                                [--tombstone-days N | --tombstone-seconds N] [--log-level LEVEL]
                                [--registration-token-file FILE]
    environment: DATABASE_URL, KEYCHAIN_SYNC_DATABASE_SOCKET, KEYCHAIN_SYNC_DATABASE_USER,
                 KEYCHAIN_SYNC_DATABASE_NAME, KEYCHAIN_SYNC_HOST, KEYCHAIN_SYNC_PORT, KEYCHAIN_SYNC_TLS_CERTIFICATE,
                 KEYCHAIN_SYNC_TLS_KEY, KEYCHAIN_SYNC_TOMBSTONE_DAYS, KEYCHAIN_SYNC_REGISTRATION_TOKEN_FILE, LOG_LEVEL
    """

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("keychain-sync-server: \(message)\n".utf8))
    exit(64)
}

/// The configuration from the flags, then the environment.
func configurationFromArguments() -> SyncServerConfiguration {
    var options: [String: String] = [:]
    var arguments = CommandLine.arguments.dropFirst()
    while let flag = arguments.popFirst() {
        if flag == "--help" || flag == "-h" {
            print(usage)
            exit(0)
        }
        if flag == "--version" {
            print(BuildInfo.versionLine(for: "keychain-sync-server"), terminator: "")
            exit(0)
        }
        let known = ["--database-url", "--database-socket", "--database-user", "--database-name", "--host", "--port",
                     "--tls-certificate", "--tls-key", "--tombstone-days", "--tombstone-seconds", "--log-level",
                     "--registration-token-file"]
        guard known.contains(flag) else { fail("unknown option \(flag)\n\(usage)") }
        guard let value = arguments.popFirst() else { fail("\(flag) needs a value") }
        options[String(flag.dropFirst(2))] = value
    }
    let environment = ProcessInfo.processInfo.environment
    func option(_ name: String, _ variable: String? = nil) -> String? {
        options[name] ?? variable.flatMap { environment[$0] }
    }

    let database: SyncServerConfiguration.Database
    if let socket = option("database-socket", "KEYCHAIN_SYNC_DATABASE_SOCKET") {
        let user = option("database-user", "KEYCHAIN_SYNC_DATABASE_USER") ?? environment["USER"] ?? "postgres"
        database = .socket(path: socket, user: user, database: option("database-name", "KEYCHAIN_SYNC_DATABASE_NAME") ?? user)
    } else if let url = option("database-url", "DATABASE_URL") {
        guard let parsed = SyncServerConfiguration.database(url: url) else { fail("cannot read the database URL") }
        database = parsed
    } else {
        fail("say which database: --database-url, DATABASE_URL or --database-socket\n\(usage)")
    }
    var configuration = SyncServerConfiguration(database: database)
    if let host = option("host", "KEYCHAIN_SYNC_HOST") { configuration.host = host }
    if let port = option("port", "KEYCHAIN_SYNC_PORT") {
        guard let value = Int(port), (0...65535).contains(value) else { fail("--port must be 0 to 65535") }
        configuration.port = value
    }
    configuration.tlsCertificate = option("tls-certificate", "KEYCHAIN_SYNC_TLS_CERTIFICATE")
    configuration.tlsKey = option("tls-key", "KEYCHAIN_SYNC_TLS_KEY")
    guard (configuration.tlsCertificate == nil) == (configuration.tlsKey == nil) else {
        fail("--tls-certificate and --tls-key go together")
    }
    if let days = option("tombstone-days", "KEYCHAIN_SYNC_TOMBSTONE_DAYS") {
        guard let value = Int64(days), value >= 1 else { fail("--tombstone-days must be a positive number") }
        configuration.tombstoneHorizon = value * 24 * 3600
    }
    if let seconds = option("tombstone-seconds") {
        guard let value = Int64(seconds), value >= 1 else { fail("--tombstone-seconds must be a positive number") }
        configuration.tombstoneHorizon = value
    }
    // Accounts only for those who were given the token: read from a file (never the command line), one line.
    if let path = option("registration-token-file", "KEYCHAIN_SYNC_REGISTRATION_TOKEN_FILE") {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { fail("cannot read \(path)") }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        // What an HTTP header carries as is, and what `security sync-setup` accepts: one word of printable ASCII.
        guard token.utf8.count >= 16, token.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) else {
            fail("the registration token in \(path) must be one word of at least 16 printable ASCII characters")
        }
        configuration.registrationToken = token
    }
    if let level = option("log-level", "LOG_LEVEL") {
        guard let value = Logger.Level(rawValue: level) else { fail("unknown log level \(level)") }
        configuration.logLevel = value
    }
    return configuration
}

let configuration = configurationFromArguments()
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = configuration.logLevel
    return handler
}
// The port actually bound (useful with --port 0), on standard output for whoever started the server.
let host = configuration.host
let app = try SyncServer.application(configuration) { port in
    FileHandle.standardOutput.write(Data("listening on \(host):\(port)\n".utf8))
}
try await app.runService()
