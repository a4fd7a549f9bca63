import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A process's messages: one line each on standard error, `keychaind: message (key=value, …)`, written with one
/// write(2) so that lines of different threads never interleave. Under systemd (standard error is the journal:
/// `JOURNAL_STREAM` is set) each line starts with its syslog priority, `<4>` for a warning, which journald takes as
/// the entry's level. Never a secret: what is logged is the keychain's events and paths, not items.
///
/// The level is `KEYCHAIN_LOG_LEVEL` (trace, debug, info, notice, warning, error, critical), else the program's
/// default: info for keychaind; error for the command-line tools with the engine in-process, whose failures are
/// already told as Apple's messages (a wrong password is `errSecAuthFailed`, not also a warning line).
public struct ProcessLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    let program: String
    let journal: Bool

    public init(program: String, environment: [String: String], defaultLevel: Logger.Level = .info) {
        self.program = program
        self.logLevel = environment["KEYCHAIN_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? defaultLevel
        self.journal = environment["JOURNAL_STREAM"] != nil
    }

    /// Bootstraps swift-log for the process: every Logger of every module writes through this handler (without it,
    /// swift-log's default writes to standard output, which keychaind hands back to its starter and which is a
    /// tool's answer).
    public static func bootstrap(program: String, environment: [String: String], defaultLevel: Logger.Level = .info) {
        LoggingSystem.bootstrap { _ in
            ProcessLogHandler(program: program, environment: environment, defaultLevel: defaultLevel)
        }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let line = format(event.level, "\(event.message)", metadata.merging(event.metadata ?? [:]) { $1 })
        let bytes = Array(line.utf8)
        _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    func format(_ level: Logger.Level, _ message: String, _ metadata: Logger.Metadata) -> String {
        var line = journal ? "<\(Self.syslogPriority(level))>" : ""
        line += "\(program): "
        if level >= .warning { line += "\(level): " }
        line += message
        if !metadata.isEmpty {
            line += " (" + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ") + ")"
        }
        // One line per message, whatever the message holds.
        return line.replacingOccurrences(of: "\n", with: " ") + "\n"
    }

    static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}
