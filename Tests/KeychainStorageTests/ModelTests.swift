import Foundation
import InMemoryLogging
import KeychainCore
import KeychainStorage
import Logging
import PropertyBased
import Testing

/// Random sequences of add / update / rename / delete / find against the engine and a plain dictionary.
@Suite("Model-based: the engine behaves like a dictionary keyed by (account, service)")
struct ModelTests {
    struct Key: Hashable { var account: Int; var service: Int }

    static let operations = Gen.int(in: 0..<(6 * 4 * 3 * 10)).array(of: 1...40)

    @Test("random operation sequences agree with the model")
    func agreesWithModel() async throws {
        await propertyCheck(count: 40, input: Self.operations) { codes in
            do {
                try run(codes)
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
    }

    func run(_ codes: [Int]) throws {
        let t = try TestFile()
        var model: [Key: String] = [:]
        // Names that differ only by bytes a careless decoder loses: a byte-order mark, a NUL, letter case.
        let accounts = ["acct", "\u{FEFF}acct", "acct\u{0}", "ACCT"]
        let services = ["svce", "\u{FEFF}svce", "svce \u{1F511}"]
        func q(_ k: Key) -> [String: QueryValue] {
            ["class": "genp", "acct": .string(accounts[k.account]), "svce": .string(services[k.service])]
        }
        for code in codes {
            let op = code % 6
            let key = Key(account: (code / 6) % 4, service: (code / 24) % 3)
            let value = "v\(code / 72)-\(code)"
            switch op {
            case 0:
                var d = q(key)
                d["v_Data"] = .data(Data(value.utf8))
                let s = status { try t.add(d) }
                if model[key] == nil {
                    #expect(s == 0)
                    model[key] = value
                } else {
                    #expect(s == -25299)
                }
            case 1:
                let s = status {
                    try t.file.update(
                        QueryParser.parse(q(key), for: .update),
                        with: QueryParser.parseUpdate(["v_Data": .data(Data(value.utf8))], itemClass: .genericPassword),
                        caller: t.caller)
                }
                if model[key] == nil { #expect(s == -25300) } else {
                    #expect(s == 0)
                    model[key] = value
                }
            case 2:
                let target = Key(account: (key.account + 1) % 4, service: key.service)
                let s = status {
                    try t.file.update(
                        QueryParser.parse(q(key), for: .update),
                        with: QueryParser.parseUpdate(["acct": .string(accounts[target.account])], itemClass: .genericPassword),
                        caller: t.caller)
                }
                if model[key] == nil { #expect(s == -25300) } else if model[target] != nil { #expect(s == -25299) } else {
                    #expect(s == 0)
                    model[target] = model.removeValue(forKey: key)
                }
            case 3:
                let s = status { try t.file.delete(QueryParser.parse(q(key), for: .delete), caller: t.caller) }
                #expect(s == (model.removeValue(forKey: key) == nil ? -25300 : 0))
            case 4:
                var d = q(key)
                d["r_Data"] = true
                do {
                    let found = try t.search(d)
                    #expect(found.first?.secret?.unprotectedString() == model[key])
                } catch {
                    #expect(model[key] == nil)
                }
            default:
                let expected = model.keys.filter { $0.service == key.service }.count
                let s = status {
                    let found = try t.search(["class": "genp", "svce": .string(services[key.service]), "m_Limit": "m_LimitAll"])
                    #expect(found.count == expected)
                }
                #expect(s == (expected == 0 ? -25300 : 0))
            }
        }
        // And after reopening the file, the same contents.
        try t.reopen()
        for (key, value) in model {
            var d = q(key)
            d["r_Data"] = true
            #expect(try t.search(d).first?.secret?.unprotectedString() == value)
        }
    }
}

@Suite("Logs")
struct LogTests {
    @Test("no secret and no attribute value appears in any log message or metadata, at any level")
    func noSecretsInLogs() throws {
        let handler = InMemoryLogHandler()
        let t = try TestFile(password: "pw")
        var logger = Logger(label: "test", factory: { _ in handler })
        logger.logLevel = .trace
        t.configuration.logger = logger
        try t.reopen()
        try t.file.unlock(password: SecretBytes(utf8: "pw"))
        #expect(status { try t.file.unlock(password: SecretBytes(utf8: "CANARYPASSWORD")) } == -25293)
        try t.file.unlock(password: SecretBytes(utf8: "pw"))
        try t.add(["class": "genp", "acct": "CANARYACCOUNT", "svce": "CANARYSERVICE", "v_Data": .data(Data("CANARYSECRET".utf8))])
        _ = try t.search(["class": "genp", "acct": "CANARYACCOUNT", "r_Data": true])
        try t.file.update(
            QueryParser.parse(["class": "genp", "acct": "CANARYACCOUNT"], for: .update),
            with: QueryParser.parseUpdate(["labl": "CANARYLABEL"], itemClass: .genericPassword), caller: t.caller)
        try t.file.delete(QueryParser.parse(["class": "genp", "svce": "CANARYSERVICE"], for: .delete), caller: t.caller)
        #expect(!handler.entries.isEmpty)
        for entry in handler.entries {
            let text = "\(entry.message) \(entry.metadata)"
            #expect(!text.contains("CANARY"), "\(text)")
        }
        _ = t
    }
}
