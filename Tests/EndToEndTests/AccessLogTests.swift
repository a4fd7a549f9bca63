import Foundation
import KeychainCore
import KeychainTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Who read what (issue: access log, SSH, portal §1): keychaind's access log with the built tools, as a user and an
/// attacker with the user's rights meet it: the records of every door, nothing of a secret on disk, and the log's
/// files edited, cut and the daemon killed.
@Suite("Access log, end to end", .serialized)
struct AccessLogTests {
    typealias DaemonHome = DaemonTests.DaemonHome

    static func records(_ output: String) throws -> [AccessLogRecord] {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try output.split(separator: "\n").map { try decoder.decode(AccessLogRecord.self, from: Data($0.utf8)) }
    }

    static func logFiles(_ home: DaemonHome) -> [URL] {
        let state = home.environment["XDG_STATE_HOME"].map { URL(fileURLWithPath: $0) }
            ?? home.tool.home.appendingPathComponent(".local/state")
        let directory = state.appendingPathComponent("keychain/access-log")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasPrefix("access-log-") }.sorted().map { directory.appendingPathComponent($0) }
    }

    @Test("every door's decisions are recorded with program, pid and outcome; --program filters; nothing secret is on disk")
    func whoReadWhat() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        #expect(try home.run("security", "add-generic-password", "-s", "mail", "-a", "me", "-w", "LOG-SECRET-1",
                             "-l", "Mail password").status == 0)
        #expect(try home.run("security", "find-generic-password", "-s", "mail", "-w").stdout == "LOG-SECRET-1\n")
        #expect(try home.run("git-credential-keychain", "store",
                             stdin: "protocol=https\nhost=git.example\nusername=bob\npassword=LOG-SECRET-2\n\n").status == 0)
        #expect(try home.run("git-credential-keychain", "get", stdin: "protocol=https\nhost=git.example\n\n").stdout
            .contains("password=LOG-SECRET-2"))
        #expect(try home.run("keychain-example", "set", "notes", "me", stdin: "LOG-SECRET-3").status == 0)
        #expect(try home.run("docker-credential-keychain", "store",
                             stdin: #"{"ServerURL":"registry.example","Username":"u","Secret":"LOG-SECRET-4"}"#).status == 0)
        // keychain-example wants security's item: nobody to ask (no display), so it is refused, and recorded so.
        let refused = try home.run("keychain-example", "get", "mail", "me")
        #expect(refused.status == 36)  // nobody to ask: errSecInteractionNotAllowed

        let shown = try home.run("security", "access-log", "--json")
        #expect(shown.status == 0, "\(shown.stderr)")
        let records = try Self.records(shown.stdout)
        #expect(records.map(\.sequence) == Array(1...UInt64(records.count)))
        #expect(records.contains { $0.frontEnd == .securityCommand && $0.action == .add && $0.itemLabel == "Mail password"
            && $0.program.hasSuffix("/security") && $0.pid > 0 && $0.digest.count == 64 })
        #expect(records.contains { $0.frontEnd == .securityCommand && $0.action == .readSecret && $0.outcome == .allowed })
        #expect(records.contains { $0.frontEnd == .git && $0.action == .add })
        #expect(records.contains { $0.frontEnd == .git && $0.action == .readSecret && $0.outcome == .allowed })
        #expect(records.contains { $0.frontEnd == .docker && $0.action == .add })
        #expect(records.contains { $0.frontEnd == .securityAPI && $0.action == .add && $0.program.hasSuffix("/keychain-example") })
        #expect(records.contains { $0.program.hasSuffix("/keychain-example") && $0.itemLabel == "Mail password"
            && $0.outcome == .needsConsent })
        #expect(records.contains { $0.program.hasSuffix("/keychain-example") && $0.action == .ask
            && $0.question == "consent" && $0.outcome == .nobodyToAsk })

        // Filters.
        let filtered = try Self.records(try home.run("security", "access-log", "--json", "--program", "keychain-example").stdout)
        #expect(!filtered.isEmpty && filtered.allSatisfy { $0.program.hasSuffix("/keychain-example") })
        let text = try home.run("security", "access-log", "--item", "Mail password").stdout
        #expect(text.contains("read secret") && text.contains("\u{201C}Mail password\u{201D}") && !text.contains("notes"))
        #expect(try home.run("security", "access-log", "--since", "1h", "--json").stdout.split(separator: "\n").count >= records.count)
        #expect(try home.run("security", "access-log", "--since", "2100-01-01T00:00:00Z").stdout.isEmpty)

        // Encrypted at rest: no secret, label, service, account or program name in the files.
        #expect(!Self.logFiles(home).isEmpty)
        for url in Self.logFiles(home) {
            let bytes = String(decoding: try Data(contentsOf: url), as: UTF8.self)
            for needle in ["LOG-SECRET", "Mail password", "mail", "git.example", "keychain-example", "security"] {
                #expect(!bytes.contains(needle), "\(needle) in \(url.lastPathComponent)")
            }
        }
        let verified = try home.run("security", "verify-access-log")
        #expect(verified.status == 0 && verified.stdout.contains("intact"), "\(verified.stdout)\(verified.stderr)")

        // Whole-keychain acts, the reads of the log included.
        let backup = home.tool.home.appendingPathComponent("kc.backup").path
        #expect(try home.run("security", "backup-keychain", "-o", backup, "-P", "-", stdin: "backup pw\n").status == 0)
        let acts = try Self.records(try home.run("security", "access-log", "--json").stdout)
        #expect(acts.contains { $0.action == .backUp && $0.frontEnd == .securityCommand && $0.item == nil })
        #expect(acts.filter { $0.action == .readAccessLog }.count >= 4)
    }

    @Test("an edited byte, a kill, and records cut while keychaind runs: verify-access-log names what happened")
    func tamperAndKill() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        for n in 1...4 {
            #expect(try home.run("security", "add-generic-password", "-s", "svc\(n)", "-a", "me", "-w", "pw\(n)").status == 0)
        }
        home.stopDaemon()  // a clean stop closes the file, and keeps where it ended in the login keychain
        #expect(try home.run("security", "list-keychains").status == 0)  // the next keychaind, chained on
        guard let file = Self.logFiles(home).first else { Issue.record("no log file"); return }
        let original = try Data(contentsOf: file)

        // One byte changed in the middle of a record of the closed file.
        var edited = original
        edited[original.count / 2] ^= 0x20
        try edited.write(to: file)
        let altered = try home.run("security", "verify-access-log")
        #expect(altered.status == 1 && altered.stdout.contains("altered"), "\(altered.stdout)")
        #expect(try home.run("security", "access-log").status == 1)  // shows what verified, says it is not intact
        try original.write(to: file)
        #expect(try home.run("security", "verify-access-log").status == 0)

        // keychaind killed: the next one starts a new file that carries the chain on; nothing is lost.
        guard let pid = home.daemonPID else { Issue.record("no keychaind"); return }
        kill(pid, SIGKILL)
        for _ in 0..<200 where kill(pid, 0) == 0 { usleep(10_000) }
        #expect(try home.run("security", "find-generic-password", "-s", "svc2", "-w").stdout == "pw2\n")
        let after = try home.run("security", "verify-access-log")
        #expect(after.status == 0 && after.stdout.contains("was not closed"), "\(after.stdout)")
        let records = try Self.records(try home.run("security", "access-log", "--json").stdout)
        #expect(records.filter { $0.action == .add }.count == 4)
        #expect(records.contains { $0.action == .readSecret && $0.itemLabel == "svc2" })
        #expect(Self.logFiles(home).count == 3)

        // The last records cut off the file keychaind is writing: keychaind knows where it stands.
        guard let live = Self.logFiles(home).last else { return }
        let bytes = try Data(contentsOf: live)
        try bytes.prefix(bytes.count - 150).write(to: live)
        let cut = try home.run("security", "verify-access-log")
        #expect(cut.status == 1 && cut.stdout.contains("cut"), "\(cut.stdout)")
    }

    @Test("whole records cut from a closed file while no keychaind runs are found (the clean stop's checkpoint)")
    func cutWhileStopped() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        for n in 1...3 {
            #expect(try home.run("security", "add-generic-password", "-s", "svc\(n)", "-a", "me", "-w", "pw\(n)").status == 0)
        }
        home.stopDaemon()
        guard let file = Self.logFiles(home).first else { Issue.record("no log file"); return }
        // Frames after the 148-byte header: length (4), body, MAC (32). Drop the last record and the close frame,
        // leaving a well-formed file that simply ends earlier.
        let bytes = [UInt8](try Data(contentsOf: file))
        var starts: [Int] = []
        var offset = 148
        while offset + 4 <= bytes.count {
            starts.append(offset)
            offset += 4 + Int(bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }) + 32
        }
        #expect(starts.count >= 3)
        try Data(bytes[..<starts[starts.count - 2]]).write(to: file)
        let verified = try home.run("security", "verify-access-log")
        #expect(verified.status == 1 && verified.stdout.contains("changed after it was finished"), "\(verified.stdout)")
    }

    @Test("the access log is keychaind's: a program that opens the keychain itself has none to show")
    func embeddedHasNone() throws {
        let home = try DaemonHome()
        defer { home.cleanUp() }
        let shown = try home.run("security", "access-log", backend: "embedded")
        #expect(shown.status == KeychainStatus.notAvailable.exitCode, "\(shown.stderr)")
    }
}
