#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore
import KeychainInterface

/// access-log and verify-access-log (beyond macOS's `security`; docs/ACCESS-LOG.md): which program did what with
/// which item, as keychaind recorded it, and whether the record was tampered with.
struct AccessLogCommands {
    let session: Session

    /// `access-log [--program P] [--item ID|LABEL] [--since TIME] [--json]`.
    func show(_ arguments: [String]) throws(CommandError) -> Int32 {
        var filter = AccessLogFilter()
        var json = false
        var args = arguments[...]
        while let argument = args.popFirst() {
            switch argument {
            case "--json": json = true
            case "--program": guard let value = args.popFirst() else { throw .usage }; filter.program = value
            case "--item": guard let value = args.popFirst() else { throw .usage }; filter.item = value
            case "--since":
                guard let value = args.popFirst(), let since = Self.time(value) else {
                    Terminal.writeError("security: access-log: --since takes a time (2026-11-26T09:00:00Z) or an age (30m, 2h, 7d)\n")
                    return KeychainStatus.param.exitCode
                }
                filter.since = since
            default: throw .usage
            }
        }
        return run(.read(filter), api: "access-log") { report in
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                encoder.dateEncodingStrategy = .iso8601
                for record in report.records {
                    if let data = try? encoder.encode(record) { Terminal.writeOut(String(decoding: data, as: UTF8.self) + "\n") }
                }
            } else {
                for record in report.records { Terminal.writeOut(Self.line(record) + "\n") }
            }
            if let problem = report.check.problem {
                Terminal.writeError("security: access-log: the log is not intact: \(problem)\n")
                return 1
            }
            return 0
        }
    }

    /// `verify-access-log`: every record opened and checked; the first altered, removed, reordered or truncated
    /// record or file is named, and the exit status is 1.
    func verify(_ arguments: [String]) throws(CommandError) -> Int32 {
        guard arguments.isEmpty else { throw .usage }
        return run(.verify, api: "verify-access-log") { report in
            for note in report.check.notes { Terminal.writeOut("note: \(note)\n") }
            if let problem = report.check.problem {
                Terminal.writeOut("NOT INTACT: \(problem)\n")
                Terminal.writeOut("(\(report.check.records) records before it verified)\n")
                return 1
            }
            Terminal.writeOut("The access log is intact: \(report.check.records) records in \(report.check.files) files.\n")
            return 0
        }
    }

    private func run(_ request: AccessLogRequest, api: String, show: (AccessLogReport) -> Int32) -> Int32 {
        do throws(KeychainError) {
            return show(try session.service.accessLog(request))
        } catch {
            return Terminal.reportFailure(of: api, error)
        }
    }

    /// One record as a line: when, which program through which door, what with which item, how it ended.
    static func line(_ record: AccessLogRecord) -> String {
        var text = "\(record.time.formatted(.iso8601))  #\(record.sequence)  \(record.frontEnd.rawValue)  "
            + "\(record.program) (pid \(record.pid))  \(record.action.rawValue)"
        if let question = record.question { text += " (\(question))" }
        if let itemClass = record.itemClass { text += "  \(itemClass)" }
        if let label = record.itemLabel { text += " \u{201C}\(label)\u{201D}" }
        if let item = record.item { text += " [\(item.uuidString.lowercased())]" }
        text += "  \(record.outcome.rawValue)"
        if let status = record.status { text += " (\(status))" }
        return text + "  in " + record.keychain
    }

    /// An ISO 8601 time, or an age before now: `30s`, `15m`, `2h`, `7d`.
    static func time(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: .iso8601) {
            return abs(date.timeIntervalSince1970) < 1e11 ? date : nil
        }
        guard let unit = text.last, let amount = Double(text.dropLast()), amount >= 0, amount < 1e7 else { return nil }
        let seconds: Double
        switch unit {
        case "s": seconds = amount
        case "m": seconds = amount * 60
        case "h": seconds = amount * 3600
        case "d": seconds = amount * 86400
        default: return nil
        }
        return Date().addingTimeInterval(-seconds)
    }
}
