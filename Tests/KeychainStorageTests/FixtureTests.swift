import Foundation
import GRDB
import KeychainCore
import KeychainStorage
import Testing

/// One frozen keychain per shipped file format: every later version must still open and decrypt it.
///
/// `Fixtures/format-N/` was written by format N (scrypt N=2^15 so the test stays quick); regenerate a fixture only
/// for a new format, with `KEYCHAIN_WRITE_FIXTURE=/some/dir swift test --filter FixtureTests`.
@Suite("Frozen keychains of every shipped format")
struct FixtureTests {
    static let password = "fixture-password"
    static let items: [(String, String, String)] = [
        ("genp", "ak", "generic when-unlocked"), ("genp", "ck", "generic after-first-unlock"),
        ("genp", "dku", "generic always this-device"), ("inet", "ak", "internet when-unlocked"),
        ("genp", "akpu", "generic passcode-set"),
    ]

    @Test("format 1 is migrated at open (no unlock needed), then unlocks and decrypts every item")
    func format1() throws {
        try check("format-1", expectFormat: 2)
    }

    @Test("format 2 opens, unlocks and decrypts every item")
    func format2() throws {
        try check("format-2", expectFormat: 2)
    }

    func check(_ fixture: String, expectFormat: Int) throws {
        let source = try #require(Bundle.module.url(forResource: fixture, withExtension: nil, subdirectory: "Fixtures"))
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("kc-fixture-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.copyItem(at: source, to: root)
        // git keeps no modes beyond the executable bit; the device key must be private to be used.
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: root.appendingPathComponent("state").path)
        try FileManager.default.setAttributes([.posixPermissions: 0o600],
                                              ofItemAtPath: root.appendingPathComponent("state/device.key").path)
        let configuration = KeychainFile.Configuration(stateDirectory: root.appendingPathComponent("state"))
        let file = try KeychainFile.open(at: root.appendingPathComponent("fixture.keychain-db"), configuration: configuration)
        try file.unlock(password: SecretBytes(utf8: Self.password))
        let caller = Caller(accessGroups: ["fixture"])
        for (cls, accessibility, secret) in Self.items {
            let found = try file.search(
                QueryParser.parse(["class": .string(cls), "acct": .string(accessibility), "r_Data": true, "r_Attributes": true], for: .search),
                caller: caller)
            #expect(found.first?.secret?.unprotectedString() == secret)
            #expect(found.first?.item.attributes["pdmn"] == .string(accessibility))
        }
        // Written back as the current format, and still good when opened again.
        file.close()
        let format = try DatabaseQueue(path: root.appendingPathComponent("fixture.keychain-db").path).read { db in
            try Int.fetchOne(db, sql: "SELECT format FROM kc_meta")
        }
        #expect(format == expectFormat)
        let again = try KeychainFile.open(at: root.appendingPathComponent("fixture.keychain-db"), configuration: configuration)
        try again.unlock(password: SecretBytes(utf8: Self.password))
        #expect(try again.search(QueryParser.parse(["class": "genp", "acct": "ak", "r_Data": true], for: .search),
                                 caller: caller).first?.secret?.unprotectedString() == "generic when-unlocked")
        // A password change re-seals every row's metadata; rows written by an older format keep their secrets.
        try again.changePassword(old: SecretBytes(utf8: Self.password), new: SecretBytes(utf8: "changed"))
        for (cls, accessibility, secret) in Self.items {
            let found = try again.search(
                QueryParser.parse(["class": .string(cls), "acct": .string(accessibility), "r_Data": true], for: .search),
                caller: caller)
            #expect(found.first?.secret?.unprotectedString() == secret, "\(fixture) \(accessibility) after a change")
        }
    }

    @Test("writes a fixture when asked", .enabled(if: ProcessInfo.processInfo.environment["KEYCHAIN_WRITE_FIXTURE"] != nil))
    func writeFixture() throws {
        let root = URL(fileURLWithPath: ProcessInfo.processInfo.environment["KEYCHAIN_WRITE_FIXTURE"]!)
        var configuration = KeychainFile.Configuration(stateDirectory: root.appendingPathComponent("state"))
        configuration.kdf = KDFParameters(id: 1, n: 1 << 15, r: 8, p: 1)
        let file = try KeychainFile.create(
            at: root.appendingPathComponent("fixture.keychain-db"), password: SecretBytes(utf8: Self.password),
            settings: .never, configuration: configuration)
        for (cls, accessibility, secret) in Self.items {
            var d: [String: QueryValue] = [
                "class": .string(cls), "acct": .string(accessibility), "pdmn": .string(accessibility),
                "v_Data": .data(Data(secret.utf8)), "labl": "fixture",
            ]
            if cls == "inet" { d["srvr"] = "example.com"; d["ptcl"] = "htps"; d["port"] = 443 }
            _ = try file.add(QueryParser.parse(d, for: .add), caller: Caller(accessGroups: ["fixture"]))
        }
        file.close()
    }
}
