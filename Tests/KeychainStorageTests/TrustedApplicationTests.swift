import Foundation
import KeychainCore
import KeychainStorage
import Synchronization
import Testing

/// Answers confirmations from a script and records what was asked.
final class ConfirmingPrompter: Prompter {
    let answers: Mutex<[ConfirmationResponse]>
    let asked = Mutex<[String]>([])
    init(_ answers: [ConfirmationResponse]) { self.answers = Mutex(answers) }
    func requestPassword(_ request: PasswordRequest) -> PromptResponse { .unavailable }
    func requestConfirmation(_ request: ConfirmationRequest) -> ConfirmationResponse {
        asked.withLock { $0.append(request.description) }
        return answers.withLock { $0.isEmpty ? .unavailable : $0.removeFirst() }
    }
    var count: Int { asked.withLock { $0.count } }
}

/// macOS's trusted-application ACL: the creating program reads without asking, any other is asked (semantics §7.6).
@Suite("Trusted applications")
struct TrustedApplicationTests {
    static let creator = TrustedApplication(path: "/opt/app/creator", digest: Data(repeating: 1, count: 32))
    static let other = TrustedApplication(path: "/usr/bin/other", digest: Data(repeating: 2, count: 32))
    static let rebuiltCreator = TrustedApplication(path: "/opt/app/creator", digest: Data(repeating: 3, count: 32))

    func caller(_ application: TrustedApplication?) -> Caller { Caller(accessGroups: ["G1"], application: application) }

    func store(_ t: TestFile, by application: TrustedApplication?, extra: [String: QueryValue] = [:]) throws {
        var dictionary: [String: QueryValue] = ["class": "genp", "acct": "a", "svce": "s", "labl": "Item",
                                                "v_Data": .data(Data("secret".utf8))]
        dictionary.merge(extra) { _, new in new }
        _ = try t.file.addAsking(QueryParser.parse(dictionary, for: .add), caller: caller(application))
    }

    func read(_ t: TestFile, as application: TrustedApplication?, answering answers: [ConfirmationResponse] = [],
              ui: String? = nil) throws -> (String?, Int) {
        var dictionary: [String: QueryValue] = ["class": "genp", "acct": "a", "r_Data": true]
        if let ui { dictionary["u_AuthUI"] = .string(ui) }
        var query = try QueryParser.parse(dictionary, for: .search)
        let prompter = ConfirmingPrompter(answers)
        query.authenticationContext = AuthenticationContext(prompter: prompter)
        let found = try t.file.searchAsking(query, caller: caller(application))
        return (found.first?.secret?.unprotectedString(), prompter.count)
    }

    @Test("the creator reads without being asked; another program is asked, and Deny is errSecAuthFailed")
    func creatorTrusted() throws {
        let t = try TestFile(password: nil)
        try store(t, by: Self.creator)
        #expect(try read(t, as: Self.creator) == ("secret", 0))
        #expect(status { _ = try read(t, as: Self.other, answering: [.deny]) } == -25293)
        #expect(status { _ = try read(t, as: Self.other, answering: [.cancelled]) } == -128)
        // No way to ask, or UI Fail: errSecInteractionNotAllowed; UI Skip leaves the item out.
        #expect(status { _ = try read(t, as: Self.other, answering: []) } == -25308)
        #expect(status { _ = try read(t, as: Self.other, ui: "u_AuthUIF") } == -25308)
        #expect(status { _ = try read(t, as: Self.other, ui: "u_AuthUIS") } == -25300)
        // Attributes are readable by anyone, as on macOS: only the secret is guarded.
        let attributes = try t.file.searchAsking(QueryParser.parse(["class": "genp", "acct": "a", "r_Attributes": true],
                                                             for: .search), caller: caller(Self.other))
        #expect(attributes.count == 1)
    }

    @Test("Allow lets one read through and asks again; Always Allow is stored in the item")
    func allowAndAlwaysAllow() throws {
        let t = try TestFile(password: nil)
        try store(t, by: Self.creator)
        #expect(try read(t, as: Self.other, answering: [.allow]) == ("secret", 1))
        #expect(try read(t, as: Self.other, answering: [.alwaysAllow]) == ("secret", 1))
        #expect(try read(t, as: Self.other) == ("secret", 0))
        try t.reopen()
        #expect(try read(t, as: Self.other) == ("secret", 0))
        #expect(try read(t, as: Self.creator) == ("secret", 0))
    }

    @Test("a rebuilt program at the same path is asked again, and told it changed")
    func rebuiltProgram() throws {
        let t = try TestFile(password: nil)
        try store(t, by: Self.creator)
        var dictionary: [String: QueryValue] = ["class": "genp", "acct": "a", "r_Data": true]
        dictionary["u_AuthUI"] = "u_AuthUIA"
        var query = try QueryParser.parse(dictionary, for: .search)
        let prompter = ConfirmingPrompter([.alwaysAllow])
        query.authenticationContext = AuthenticationContext(prompter: prompter)
        #expect(try t.file.searchAsking(query, caller: caller(Self.rebuiltCreator)).first?.secret?.unprotectedString() == "secret")
        #expect(prompter.asked.withLock { $0.first?.contains("has changed") } == true)
        // Always Allow replaced the old build's entry: the new build is trusted, the old one no longer.
        #expect(try read(t, as: Self.rebuiltCreator) == ("secret", 0))
        #expect(status { _ = try read(t, as: Self.creator) } == -25308)
    }

    @Test("kSecAttrAccess: true trusts any program; a list trusts exactly those; an empty list asks even the creator")
    func explicitLists() throws {
        let any = try TestFile(password: nil)
        try store(any, by: Self.creator, extra: ["acls": true])
        #expect(try read(any, as: Self.other) == ("secret", 0))

        let listed = try TestFile(password: nil)
        let program = "/usr/bin/env"  // a real executable: lists are resolved to path and digest when stored
        try store(listed, by: Self.creator, extra: ["acls": .array([.string(program)])])
        let resolved = try #require(ExecutableDigest.application(at: program))
        #expect(try read(listed, as: resolved) == ("secret", 0))
        #expect(status { _ = try read(listed, as: Self.creator) } == -25308)

        let none = try TestFile(password: nil)
        try store(none, by: Self.creator, extra: ["acls": .array([])])
        #expect(try read(none, as: Self.creator, answering: [.allow]) == ("secret", 1))

        let missing = try TestFile(password: nil)
        #expect(status { try store(missing, by: Self.creator, extra: ["acls": .array(["/nonexistent/app"])]) } == -50)
        #expect(status { try store(missing, by: Self.creator, extra: ["acls": .array(["relative/app"])]) } == -50)
        #expect(status {
            _ = try QueryParser.parse(["class": "genp", "acls": true], for: .search)
        } == -50)
    }

    @Test("where the calling program is not known (embedded mode), lists are not enforced and new items trust all")
    func unknownCaller() throws {
        let t = try TestFile(password: nil)
        try store(t, by: nil)
        #expect(try read(t, as: Self.other) == ("secret", 0))
        let guarded = try TestFile(password: nil)
        try store(guarded, by: Self.creator)
        #expect(try read(guarded, as: nil) == ("secret", 0))
    }

    @Test("an update asks like a read (macOS's change authorisation), with a new secret too; refused, it changes nothing")
    func updates() throws {
        let t = try TestFile(password: nil)
        try store(t, by: Self.creator)
        let query = try QueryParser.parse(["class": "genp", "acct": "a"], for: .update)
        let label = try QueryParser.parseUpdate(["labl": "renamed"], itemClass: .genericPassword)
        #expect(status { _ = try t.file.updateAsking(query, with: label, caller: caller(Self.other)) } == -25308)
        var asking = query
        asking.authenticationContext = AuthenticationContext(prompter: ConfirmingPrompter([.alwaysAllow]))
        #expect(try t.file.updateAsking(asking, with: label, caller: caller(Self.other)) == 1)
        #expect(try read(t, as: Self.other) == ("secret", 0))
        let newSecret = try QueryParser.parseUpdate(["v_Data": .data(Data("new".utf8))], itemClass: .genericPassword)
        let third = TrustedApplication(path: "/usr/bin/third", digest: Data(repeating: 9, count: 32))
        #expect(status { _ = try t.file.updateAsking(query, with: newSecret, caller: caller(third)) } == -25308)
        var denied = query
        denied.authenticationContext = AuthenticationContext(prompter: ConfirmingPrompter([.deny]))
        #expect(status { _ = try t.file.updateAsking(denied, with: newSecret, caller: caller(third)) } == -25293)
        #expect(try read(t, as: Self.creator) == ("secret", 0))
        var allowed = query
        allowed.authenticationContext = AuthenticationContext(prompter: ConfirmingPrompter([.allow]))
        #expect(try t.file.updateAsking(allowed, with: newSecret, caller: caller(third)) == 1)
        #expect(try read(t, as: Self.creator) == ("new", 0))
        // Allow is for that call only: the next write by the same program is asked about again.
        #expect(status { _ = try t.file.updateAsking(query, with: label, caller: caller(third)) } == -25308)
    }

    @Test("where the program is known, an item lives by its list (seen by every program); data protection, sync and an explicit group keep groups")
    func accessModels() throws {
        let t = try TestFile(password: nil)
        func add(_ account: String, _ extra: [String: QueryValue]) throws -> Item {
            var dictionary: [String: QueryValue] = ["class": "genp", "acct": .string(account), "svce": "s",
                                                    "v_Data": .data(Data("x".utf8))]
            dictionary.merge(extra) { _, new in new }
            return try t.file.add(QueryParser.parse(dictionary, for: .add), caller: caller(Self.creator)).item
        }
        #expect(try add("file", ["acls": true]).accessModel == .applications)
        #expect(try add("default", [:]).accessModel == .applications)
        #expect(try add("dp", ["nleg": true]).accessModel == .groups)
        #expect(try add("group", ["agrp": "G1"]).accessModel == .groups)
        #expect(try add("sync", ["sync": true]).accessModel == .groups)
        // Embedded mode (the program not known): groups, as before.
        let embedded = try t.file.add(QueryParser.parse(["class": "genp", "acct": "e", "v_Data": .data(Data())], for: .add),
                                      caller: caller(nil)).item
        #expect(embedded.accessModel == .groups)
        // A program of another group sees the file keychain's items, not the others; the model survives a reopen.
        try t.reopen()
        let stranger = Caller(accessGroups: ["H"], application: Self.other)
        let seen = try t.file.search(QueryParser.parse(["class": "genp", "r_Attributes": true, "m_Limit": "m_LimitAll"],
                                                       for: .search), caller: stranger)
        #expect(Set(seen.compactMap { $0.item.attributes["acct"]?.stringValue }) == ["file", "default"])
    }

    @Test("a file keychain's item is one per service and account whatever the group: a second program's add is a duplicate")
    func fileKeychainDuplicates() throws {
        let t = try TestFile(password: nil)
        let first = Caller(accessGroups: ["A"], application: Self.creator)
        let second = Caller(accessGroups: ["B"], application: Self.other)
        let add: [String: QueryValue] = ["class": "genp", "acct": "a", "svce": "s", "v_Data": .data(Data("x".utf8))]
        _ = try t.file.add(QueryParser.parse(add, for: .add), caller: first)
        #expect(status { _ = try t.file.add(QueryParser.parse(add, for: .add), caller: second) } == -25299)
        // Data-protection items stay one per group, as on iOS.
        var dp = add
        dp["nleg"] = true
        _ = try t.file.add(QueryParser.parse(dp, for: .add), caller: first)
        _ = try t.file.add(QueryParser.parse(dp, for: .add), caller: second)
        // A listing shows a program what it may see: not another group's data-protection item.
        let listed = try t.file.allItems(includingSecrets: false, caller: second)
        #expect(listed.filter { $0.item.accessModel == .groups }.map(\.item.accessGroup) == ["B"])
        #expect(listed.filter { $0.item.accessModel == .applications }.count == 1)
    }

    @Test("a listing includes only the secrets the caller's program is trusted with")
    func listing() throws {
        let t = try TestFile(password: nil)
        try store(t, by: Self.creator)
        #expect(try t.file.allItems(includingSecrets: true, caller: caller(Self.creator)).first?.secret != nil)
        #expect(try t.file.allItems(includingSecrets: true, caller: caller(Self.other)).first?.secret == nil)
    }

    @Test("a program named by its path alone (keychaind's own tools) stays trusted across upgrades, and only there")
    func pathOnlyIdentity() throws {
        let tool = TrustedApplication(path: "/usr/libexec/keychain/security", digest: Data())
        let upgraded = TrustedApplication(path: tool.path, digest: Data(repeating: 7, count: 32))
        let t = try TestFile(password: nil)
        try store(t, by: tool)
        #expect(try read(t, as: tool) == ("secret", 0))
        #expect(try read(t, as: upgraded) == ("secret", 0))
        #expect(status { _ = try read(t, as: Self.other) } == -25308)
        // And a tool reading an item whose list names its path with some digest (-T /path/to/security).
        let listed = try TestFile(password: nil)
        try store(listed, by: upgraded)
        #expect(try read(listed, as: tool) == ("secret", 0))
    }
}
