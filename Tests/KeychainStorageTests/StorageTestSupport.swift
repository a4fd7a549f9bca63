import Foundation
import GRDB
import KeychainCore
@_exported import KeychainTestSupport
import KeychainStorage
import KeychainClient

/// A keychain file in its own temporary directory, with its own device key.
final class TestFile {
    let root: URL
    let url: URL
    var configuration: KeychainFile.Configuration
    var file: KeychainFile
    let caller = Caller(accessGroups: ["G1"])

    init(password: String? = nil, clock: (@Sendable () -> Date)? = nil) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("kc-storage-\(UUID().uuidString)")
        url = root.appendingPathComponent("keychains/test.keychain-db")
        configuration = KeychainFile.Configuration(stateDirectory: root.appendingPathComponent("state"))
        configuration.kdf = KDFParameters(id: 1, n: 1 << 15, r: 8, p: 1)
        if let clock { configuration.clock = clock }
        file = try KeychainFile.create(
            at: url, password: password.map { SecretBytes(utf8: $0) }, settings: .never, configuration: configuration)
    }

    func reopen() throws { file = try KeychainFile.open(at: url, configuration: configuration) }

    /// A clock that always reads `date`.
    static func fixedClock(_ date: Date) -> @Sendable () -> Date { { date } }

    @discardableResult
    func add(_ dictionary: [String: QueryValue]) throws -> FoundItem {
        try file.add(QueryParser.parse(dictionary, for: .add), caller: caller)
    }

    func search(_ dictionary: [String: QueryValue]) throws -> [FoundItem] {
        try file.search(QueryParser.parse(dictionary, for: .search), caller: caller)
    }

    func secret(_ account: String) throws -> String? {
        try search(["class": "genp", "acct": .string(account), "r_Data": true]).first?.secret?.unprotectedString()
    }

    deinit { try? FileManager.default.removeItem(at: root) }
}

/// A clock tests move by hand.
final class ManualClock: @unchecked Sendable {
    // SAFETY: tests drive it from one task at a time.
    var now = Date(timeIntervalSince1970: 1_800_000_000)
    var read: @Sendable () -> Date { { [unowned self] in self.now } }
}


func fileBytes(_ path: String) -> [UInt8] { (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))) ?? [] }

func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    let n = Array(needle.utf8)
    guard n.count <= haystack.count else { return false }
    for i in 0...(haystack.count - n.count) where haystack[i] == n[0] && Array(haystack[i..<i + n.count]) == n {
        return true
    }
    return false
}

extension TestFile {
    /// Runs SQL on the raw file, as an attacker with the file would.
    func tamper(_ body: (Database) throws -> Void) throws {
        let queue = try DatabaseQueue(path: url.path)
        try queue.writeWithoutTransaction { db in try body(db) }
        try queue.close()
    }

    /// A keychain with a password holding two generic passwords (accounts a and b, service s).
    static func twoItems() throws -> TestFile {
        let t = try TestFile(password: "pw")
        try t.add(["class": "genp", "acct": "a", "svce": "s", "v_Data": .data(Data("secret-a".utf8))])
        try t.add(["class": "genp", "acct": "b", "svce": "s", "v_Data": .data(Data("secret-b".utf8))])
        return t
    }
}

/// Storage calls as the service layer makes them: through the Asker, which asks through the call's own context
/// prompter (storage itself never asks) and runs the call again with what it obtained.
extension KeychainFile {
    func asking<T>(_ query: ItemQuery, _ body: (AccessGrants) throws(KeychainError) -> T) throws(KeychainError) -> T {
        try Asker(prompter: nil).run(Asker.Call(query, program: nil), gate: FileGate(file: self), body)
    }

    func searchAsking(_ query: ItemQuery, caller: Caller) throws(KeychainError) -> [FoundItem] {
        try asking(query) { grants throws(KeychainError) in try search(query, caller: caller, grants: grants) }
    }

    @discardableResult
    func addAsking(_ query: ItemQuery, caller: Caller) throws(KeychainError) -> FoundItem {
        try asking(query) { grants throws(KeychainError) in try add(query, caller: caller, grants: grants) }
    }

    @discardableResult
    func updateAsking(_ query: ItemQuery, with changes: ItemUpdate, caller: Caller) throws(KeychainError) -> Int {
        try asking(query) { grants throws(KeychainError) in try update(query, with: changes, caller: caller, grants: grants) }
    }

    @discardableResult
    func deleteAsking(_ query: ItemQuery, caller: Caller) throws(KeychainError) -> Int {
        try asking(query) { grants throws(KeychainError) in try delete(query, caller: caller, grants: grants) }
    }

    @discardableResult
    func addOrUpdateAsking(_ query: ItemQuery, changes: ItemUpdate, caller: Caller) throws(KeychainError) -> Bool {
        try asking(query) { grants throws(KeychainError) in
            try addOrUpdate(query, changes: changes, caller: caller, grants: grants)
        }
    }
}
