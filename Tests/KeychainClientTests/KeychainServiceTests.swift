import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage
import Synchronization
import Testing

/// The embedded keychain service: the one place that resolves names and creates `login`.
@Suite("KeychainService, embedded")
struct KeychainServiceTests {
    func service(_ root: URL) -> EmbeddedKeychainService {
        let locations = KeychainLocations(
            keychainDirectory: root.appendingPathComponent("data/keychains"),
            stateDirectory: root.appendingPathComponent("state/keychain"),
            configDirectory: root.appendingPathComponent("config/keychain"))
        return EmbeddedKeychainService(locations: locations, caller: Caller(accessGroups: ["app"])) {
            $0.kdf = .fastForTests
        }
    }

    @Test("names resolve as macOS resolves them: only a leading / makes a path")
    func resolution() {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("svc-\(UUID().uuidString)")
        let s = service(root)
        let dir = root.appendingPathComponent("data/keychains").path
        #expect(s.resolve("work").path == dir + "/work.keychain-db")
        #expect(s.resolve("work.keychain").path == dir + "/work.keychain-db")
        #expect(s.resolve("work.keychain-db").path == dir + "/work.keychain-db")
        #expect(s.resolve("./notes.txt").path == dir + "/notes.txt.keychain-db")
        #expect(s.resolve("sub/x").path == dir + "/sub/x.keychain-db")
        #expect(s.resolve("/tmp/y.keychain-db").path == "/tmp/y.keychain-db")
        #expect(s.resolve(nil as String?) == s.defaultKeychain())
        #expect(s.defaultKeychain() == s.loginKeychain())
    }

    @Test("the first item call creates login; a named keychain that does not exist is errSecNoSuchKeychain")
    func loginOnFirstUse() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("svc-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let s = service(root)
        #expect(try !s.state(of: s.loginKeychain()).exists)
        #expect(status { _ = try s.search(["class": "genp"], in: s.resolve("other")) } == -25294)
        #expect(try !s.state(of: s.loginKeychain()).exists)  // asking about one never creates another
        try s.add(["class": "genp", "acct": "a", "v_Data": .data(Data("x".utf8))], to: nil)
        let state = try s.state(of: s.loginKeychain())
        #expect(state.exists && !state.hasPassword && !state.isLocked)
        #expect(try s.search(["class": "genp", "acct": "a", "r_Data": true], in: nil).first?.secret?.unprotectedString() == "x")
        s.close()
    }

    /// keychaind hands the service what a client wrote on its socket; the service holds every typed request to
    /// what Apple's dictionaries can say, at each entry, so a forged one changes nothing.
    @Test("typed requests: a forged one is refused at every entry and changes nothing; a built one works")
    func typedRequests() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("svc-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let s = service(root)
        let added = try s.add(["class": "genp", "acct": "a", "svce": "s", "v_Data": .data(Data("x".utf8))], to: nil)
        var forged = ItemQuery(operation: .add, itemClass: .genericPassword)
        forged.attributes = ["acct": .string("b"), "srvr": .string("an internet password's")]
        #expect(status { try s.add(forged, to: nil) } == -25303)
        forged.attributes = ["acct": .string("b")]
        forged.operation = .search
        #expect(status { try s.add(forged, to: nil) } == -50)  // a search request is no add
        var search = ItemQuery(operation: .search, itemClass: .genericPassword)
        search.limit = .all
        #expect(try s.search(search, in: nil).count == 1)
        var loosened = ItemQuery(operation: .delete, itemClass: .genericPassword)
        loosened.limit = .one
        #expect(status { try s.delete(loosened, in: nil) } == -50)
        var badChange = ItemUpdate(secret: SecretBytes(utf8: "y"))
        badChange.attributes["ggrp"] = .string("shared")
        #expect(status { try s.update(.item(added.item.persistentReference, for: .update), with: badChange, in: nil) } == -50)
        #expect(try s.search(.item(added.item.persistentReference, for: .search, returning: .data), in: nil)
                .first?.secret?.unprotectedString() == "x")
        #expect(try s.update(.item(added.item.persistentReference, for: .update), with: ItemUpdate(secret: SecretBytes(utf8: "y")),
                             in: nil) == 1)
        #expect(try s.search(.item(added.item.persistentReference, for: .search, returning: .data), in: nil)
                .first?.secret?.unprotectedString() == "y")
        // An upsert's secret is the item's: changes that carry one (twice the bytes on the wire) are refused.
        let upsertItem = ItemQuery.add(.genericPassword, [.service: .string("s"), .account: .string("b")],
                                       secret: SecretBytes(utf8: "first"))
        #expect(status { try s.upsert(upsertItem, changes: ItemUpdate(secret: SecretBytes(utf8: "x")), in: nil) } == -50)
        try s.upsert(upsertItem, changes: ItemUpdate(), in: nil)
        var again = upsertItem
        again.valueData = SecretBytes(utf8: "second")
        try s.upsert(again, changes: ItemUpdate(label: "relabelled"), in: nil)
        let upserted = try s.search(.search(.genericPassword, [.account: .string("b")], returning: [.data, .attributes]),
                                    in: nil)
        #expect(upserted.count == 1 && upserted.first?.secret?.unprotectedString() == "second")
        #expect(upserted.first?.item[.label] == .string("relabelled"))
        #expect(try s.delete(.item(added.item.persistentReference, for: .delete), in: nil) == 1)
        s.close()
    }

    @Test("create, lock, unlock, change password, settings and delete through the service")
    func keychainLifecycle() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("svc-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let s = service(root)
        let work = s.resolve("work")
        try s.createKeychain(work, password: SecretBytes(utf8: "pw"), settings: .appleDefault)
        #expect(status { try s.createKeychain(work, password: nil, settings: .never) } == -25296)
        try s.add(["class": "genp", "acct": "a", "v_Data": .data(Data("x".utf8))], to: work)
        try s.lock(work)
        #expect(try s.state(of: work).isLocked)
        #expect(status { _ = try s.search(["class": "genp", "acct": "a", "r_Data": true], in: work) } == -25308)
        #expect(status { try s.unlock(work, password: SecretBytes(utf8: "bad")) } == -25293)
        try s.unlock(work, password: SecretBytes(utf8: "pw"))
        try s.changePassword(of: work, old: SecretBytes(utf8: "pw"), new: SecretBytes(utf8: "new"))
        try s.setSettings(KeychainSettings(lockInterval: 60, lockOnSleep: false), of: work)
        #expect(try s.settings(of: work) == KeychainSettings(lockInterval: 60, lockOnSleep: false))
        try s.setSearchList([work])
        #expect(s.searchList() == [work])
        try s.deleteKeychain(work)
        #expect(try !s.state(of: work).exists)
        #expect(s.searchList().isEmpty)  // dropped from the list it was the only member of
    }

    /// A call that names no keychain keeps the default keychain's handle while nothing it depends on moved: each
    /// change below, made by another process or through the service, must be seen at the very next call.
    @Test("the default keychain is worked out again after each change of the preference, the file or the handles")
    func defaultKeychainFollowsChanges() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("svc-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let s = service(root)
        defer { s.close() }
        func finds(_ account: String) -> Int32 {
            status { _ = try s.search(["class": "genp", "acct": .string(account), "r_Data": true], in: nil) }
        }
        try s.add(["class": "genp", "acct": "in-login", "v_Data": .data(Data("x".utf8))], to: nil)
        let other = s.resolve("other")
        try s.createKeychain(other, password: nil, settings: .never)
        try s.add(["class": "genp", "acct": "in-other", "v_Data": .data(Data("y".utf8))], to: other)
        #expect(finds("in-login") == 0 && finds("in-login") == 0)
        #expect(finds("in-other") == -25300)

        // Another process makes `other` the default.
        let preference = s.locations.defaultKeychainFile.path
        let directory = s.locations.configDirectory.path
        try DirectoryWatchTests.elsewhere("mkdir -p '\(directory)' && printf '%s\\n' '\(other.path)' > '\(preference)'")
        #expect(finds("in-other") == 0)
        #expect(finds("in-login") == -25300)
        // Another process deletes its file: the default names a keychain that is not there.
        try DirectoryWatchTests.elsewhere("rm '\(other.path)'")
        #expect(finds("in-other") == -25294)
        // Another process puts the preference back: login again.
        try DirectoryWatchTests.elsewhere("rm '\(preference)'")
        #expect(finds("in-login") == 0)
        // Deleted through the service: a new, empty login is made at the next call, not the old handle used; and
        // the old handle is not kept alive (with its keys) by what the service remembered.
        weak let deleted = s.keychains.openFile(atPath: s.loginKeychain().path)
        #expect(deleted != nil)
        try s.deleteKeychain(s.loginKeychain())
        #expect(deleted == nil)
        #expect(finds("in-login") == -25300)
        try s.add(["class": "genp", "acct": "in-new-login", "v_Data": .data(Data("z".utf8))], to: nil)
        #expect(finds("in-new-login") == 0)
        // Closed through the service (its handles dropped): opened again at the next call, the item still there.
        s.close()
        #expect(finds("in-new-login") == 0)
    }

    /// Nothing acknowledged may be lost: a write after another process replaced the keychain file must reach the
    /// file that is there now, not the deleted one the old handle still has open.
    @Test("a keychain replaced by another process between two calls: the next write lands in the file now there")
    func replacedDefaultKeychain() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("svc-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let s = service(root)
        defer { s.close() }
        try s.add(["class": "genp", "acct": "before", "v_Data": .data(Data("x".utf8))], to: nil)
        let spare = s.resolve("spare")
        try s.createKeychain(spare, password: nil, settings: .never)
        s.keychains.close(URL(fileURLWithPath: spare.path))
        let login = s.loginKeychain().path
        try DirectoryWatchTests.elsewhere(
            "rm -f '\(login)' '\(login)-wal' '\(login)-shm' && cp '\(spare.path)' '\(login)'")
        try s.add(["class": "genp", "acct": "after", "v_Data": .data(Data("y".utf8))], to: nil)
        // What the file on disk holds, through handles of its own.
        let locations = s.locations
        let fresh = EmbeddedKeychainService(locations: locations, caller: Caller(accessGroups: ["app"]),
                                            keychains: OpenKeychains()) { $0.kdf = .fastForTests }
        defer { fresh.close() }
        #expect(try fresh.search(["class": "genp", "acct": "after", "r_Data": true], in: nil).first?.secret?
            .unprotectedString() == "y")
        #expect(status { _ = try fresh.search(["class": "genp", "acct": "before"], in: nil) } == -25300)
    }
}

/// Answers password requests from a script and counts them.
final class ScriptedAnswers: Prompter {
    let answers: Mutex<[PromptResponse]>
    let asked = Mutex(0)
    init(_ answers: [PromptResponse]) { self.answers = Mutex(answers) }
    func requestPassword(_ request: PasswordRequest) -> PromptResponse {
        asked.withLock { $0 += 1 }
        return answers.withLock { $0.isEmpty ? .unavailable : $0.removeFirst() }
    }
    func requestConfirmation(_ request: ConfirmationRequest) -> ConfirmationResponse { .unavailable }
}

@Suite("KeychainService: a locked keychain is unlocked on demand when the call allows UI")
struct UnlockOnDemandTests {
    func lockedKeychain(_ prompter: ScriptedAnswers) throws -> (EmbeddedKeychainService, KeychainReference, URL) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("svc-\(UUID().uuidString)")
        let locations = KeychainLocations(
            keychainDirectory: root.appendingPathComponent("data/keychains"),
            stateDirectory: root.appendingPathComponent("state/keychain"),
            configDirectory: root.appendingPathComponent("config/keychain"))
        let s = EmbeddedKeychainService(locations: locations, caller: Caller(accessGroups: ["app"]), asker: Asker(prompter: prompter)) {
            $0.kdf = .fastForTests
        }
        let work = s.resolve("work")
        try s.createKeychain(work, password: SecretBytes(utf8: "pw"), settings: .never)
        try s.add(["class": "genp", "acct": "a", "v_Data": .data(Data("x".utf8))], to: work)
        try s.lock(work)
        return (s, work, root)
    }

    @Test("asked once (a wrong answer asks again); the call then goes through and the keychain stays unlocked")
    func asks() throws {
        let prompter = ScriptedAnswers([.entered(SecretBytes(utf8: "bad")), .entered(SecretBytes(utf8: "pw"))])
        let (s, work, root) = try lockedKeychain(prompter)
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(try s.search(["class": "genp", "acct": "a", "r_Data": true], in: work).first?.secret?.unprotectedString() == "x")
        #expect(prompter.asked.withLock { $0 } == 2)
        #expect(try !s.state(of: work).isLocked)
    }

    @Test("UI Fail or kSecUseNoAuthenticationUI: errSecInteractionNotAllowed without asking; cancel is -128")
    func noUI() throws {
        let prompter = ScriptedAnswers([.cancelled])
        let (s, work, root) = try lockedKeychain(prompter)
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(status { _ = try s.search(["class": "genp", "acct": "a", "u_AuthUI": "u_AuthUIF"], in: work) } == -25308)
        #expect(status { _ = try s.search(["class": "genp", "acct": "a", "u_NoAuthUI": true], in: work) } == -25308)
        #expect(prompter.asked.withLock { $0 } == 0)
        #expect(status { _ = try s.search(["class": "genp", "acct": "a"], in: work) } == -128)
    }
}
