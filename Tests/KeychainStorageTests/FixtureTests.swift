import Foundation
import GRDB
import KeychainCore
import KeychainStorage
import Testing

/// One frozen keychain per shipped file format: every later version must still open and decrypt it.
///
/// `Fixtures/format-N/` was written by format N (scrypt N=2^15 so the test stays quick);
/// `format-2-trusted-applications` by format 2 with item metadata version 4 (trusted-application lists). Write a
/// fixture only for a new format, with `KEYCHAIN_WRITE_FIXTURE=/some/dir swift test --filter FixtureTests`.
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

    /// The program that wrote `format-2-trusted-applications` (metadata version 4: trusted-application lists).
    static let creator = TrustedApplication(path: "/opt/fixture/creator", digest: Data(repeating: 0xC1, count: 32))

    @Test("format 2 with trusted-application lists: the creator reads, another program is not trusted, -A trusts all")
    func format2TrustedApplications() throws {
        let file = try check("format-2-trusted-applications", expectFormat: 2, caller: Caller(accessGroups: ["fixture"], application: Self.creator))
        let other = Caller(accessGroups: ["fixture"], application: TrustedApplication(path: "/usr/bin/other", digest: Data([1])))
        let guarded = try QueryParser.parse(["class": "genp", "acct": "ak", "r_Data": true, "u_AuthUI": "u_AuthUIF"], for: .search)
        #expect(status { _ = try file.search(guarded, caller: other) } == -25308)
        let any = try QueryParser.parse(["class": "genp", "acct": "any", "r_Data": true], for: .search)
        #expect(try file.search(any, caller: other).first?.secret?.unprotectedString() == "any application")
    }

    /// Opens, reads and changes the password of a copy of `fixture`; returns the copy, open and unlocked.
    @discardableResult
    func check(_ fixture: String, expectFormat: Int, caller: Caller = Caller(accessGroups: ["fixture"])) throws
        -> KeychainFile
    {
        let source = try #require(Bundle.module.url(forResource: fixture, withExtension: nil, subdirectory: "Fixtures"))
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("kc-fixture-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: source, to: root)
        // git keeps no modes beyond the executable bit; the device key must be private to be used.
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: root.appendingPathComponent("state").path)
        try FileManager.default.setAttributes([.posixPermissions: 0o600],
                                              ofItemAtPath: root.appendingPathComponent("state/device.key").path)
        let configuration = KeychainFile.Configuration(stateDirectory: root.appendingPathComponent("state"))
        let file = try KeychainFile.open(at: root.appendingPathComponent("fixture.keychain-db"), configuration: configuration)
        try file.unlock(password: SecretBytes(utf8: Self.password))
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
        return again
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
            _ = try file.add(QueryParser.parse(d, for: .add), caller: Caller(accessGroups: ["fixture"], application: Self.creator))
        }
        let any: [String: QueryValue] = ["class": "genp", "acct": "any", "v_Data": .data(Data("any application".utf8)),
                                         "acls": true]
        _ = try file.add(QueryParser.parse(any, for: .add), caller: Caller(accessGroups: ["fixture"], application: Self.creator))
        file.close()
    }
}
