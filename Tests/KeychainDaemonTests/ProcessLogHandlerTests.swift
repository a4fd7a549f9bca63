import Logging
import Testing

@testable import KeychainClient

@Suite("keychaind's log lines")
struct ProcessLogHandlerTests {
    @Test("one line per message: the program, the level from warning up, the message, the metadata sorted")
    func plainLines() {
        let handler = ProcessLogHandler(program: "keychaind", environment: [:])
        #expect(handler.logLevel == .info)
        #expect(handler.format(.info, "serving /run/x", [:]) == "keychaind: serving /run/x\n")
        #expect(handler.format(.warning, "keychain.password.wrong", ["b": "2", "a": "1"])
                == "keychaind: warning: keychain.password.wrong (a=1, b=2)\n")
        #expect(handler.format(.error, "two\nlines", [:]) == "keychaind: error: two lines\n")
    }

    @Test("under systemd (JOURNAL_STREAM set) each line starts with its syslog priority, for journald")
    func journalPriorities() {
        let handler = ProcessLogHandler(program: "keychaind", environment: ["JOURNAL_STREAM": "8:1234"])
        #expect(handler.format(.info, "serving", [:]) == "<6>keychaind: serving\n")
        #expect(handler.format(.warning, "w", [:]) == "<4>keychaind: warning: w\n")
        #expect(handler.format(.critical, "c", [:]) == "<2>keychaind: critical: c\n")
        #expect(handler.format(.debug, "d", [:]) == "<7>keychaind: d\n")
    }

    @Test("KEYCHAIN_LOG_LEVEL chooses the level; an unknown one keeps info")
    func level() {
        #expect(ProcessLogHandler(program: "k", environment: ["KEYCHAIN_LOG_LEVEL": "debug"]).logLevel == .debug)
        #expect(ProcessLogHandler(program: "k", environment: ["KEYCHAIN_LOG_LEVEL": "loud"]).logLevel == .info)
    }
}
