import Foundation
import KeychainCore
import KeychainStorage
import Synchronization
import Testing

/// A prompter that answers from a script and records what it was asked.
final class ScriptedPrompter: Prompter {
    let answers: Mutex<[PromptResponse]>
    let asked = Mutex<[PasswordRequest]>([])
    init(_ answers: [PromptResponse]) { self.answers = Mutex(answers) }
    func requestPassword(_ request: PasswordRequest) -> PromptResponse {
        asked.withLock { $0.append(request) }
        return answers.withLock { $0.isEmpty ? .unavailable : $0.removeFirst() }
    }
    func requestConfirmation(_ request: ConfirmationRequest) -> ConfirmationResponse { .unavailable }
    var count: Int { asked.withLock { $0.count } }
}

@Suite("Access control: constraints, contexts, application passwords")
struct AccessControlEngineTests {
    func protectedFile(_ flags: AccessControl.Flags, clock: (@Sendable () -> Date)? = nil) throws -> TestFile {
        let t = try TestFile(password: "pw", clock: clock)
        let context = AuthenticationContext()
        context.setApplicationPassword(SecretBytes(utf8: "app-pw"))
        var q = try QueryParser.parse([
            "class": "genp", "acct": "p", "v_Data": .data(Data("protected".utf8)),
            "accc": .accessControl(try AccessControl(protection: .whenUnlocked, flags: flags)),
        ], for: .add)
        q.authenticationContext = context
        _ = try t.file.addAsking(q, caller: t.caller)
        return t
    }

    func read(_ t: TestFile, context: AuthenticationContext? = nil, ui: String? = nil, data: Bool = true) throws -> String? {
        var d: [String: QueryValue] = ["class": "genp", "acct": "p"]
        if data { d["r_Data"] = true } else { d["r_Attributes"] = true }
        if let ui { d["u_AuthUI"] = .string(ui) }
        var q = try QueryParser.parse(d, for: .search)
        q.authenticationContext = context
        return try t.file.searchAsking(q, caller: t.caller).first.map { $0.secret?.unprotectedString() ?? "" }
    }

    @Test("two items with application passwords of their own are opened in one search, each asked for once")
    func twoApplicationPasswords() throws {
        let t = try TestFile(password: "pw")
        for (account, password) in [("one", "first-pw"), ("two", "second-pw")] {
            var q = try QueryParser.parse([
                "class": "genp", "acct": .string(account), "svce": "apps", "v_Data": .data(Data(account.utf8)),
                "accc": .accessControl(try AccessControl(protection: .whenUnlocked, flags: [.applicationPassword])),
            ], for: .add)
            let context = AuthenticationContext()
            context.setApplicationPassword(SecretBytes(utf8: password))
            q.authenticationContext = context
            _ = try t.file.add(q, caller: t.caller)
        }
        let prompter = ScriptedPrompter([.entered(SecretBytes(utf8: "first-pw")), .entered(SecretBytes(utf8: "second-pw"))])
        var q = try QueryParser.parse(["class": "genp", "svce": "apps", "r_Data": true, "m_Limit": "m_LimitAll"], for: .search)
        q.authenticationContext = AuthenticationContext(prompter: prompter)
        let found = try t.file.searchAsking(q, caller: t.caller)
        #expect(Set(found.compactMap { $0.secret?.unprotectedString() }) == ["one", "two"])
        #expect(prompter.count == 2)
    }

    @Test("user presence: no way to ask is errSecInteractionNotAllowed; Skip leaves the item out, even for attributes")
    func noPrompter() throws {
        let t = try protectedFile([.userPresence])
        #expect(status { _ = try read(t) } == -25308)
        #expect(status { _ = try read(t, ui: "u_AuthUIF") } == -25308)
        #expect(status { _ = try read(t, ui: "u_AuthUIS") } == -25300)
        #expect(status { _ = try read(t, ui: "u_AuthUIS", data: false) } == -25300)
        let context = AuthenticationContext(prompter: ScriptedPrompter([.entered(SecretBytes(utf8: "pw"))]))
        context.interactionNotAllowed = true
        #expect(status { _ = try read(t, context: context) } == -25308)
    }

    @Test("user presence: the keychain password satisfies it, and the context is reused without asking again")
    func passwordSatisfies() throws {
        let t = try protectedFile([.userPresence])
        let prompter = ScriptedPrompter([.entered(SecretBytes(utf8: "wrong")), .entered(SecretBytes(utf8: "pw"))])
        let context = AuthenticationContext(prompter: prompter)
        context.localizedReason = "Read the protected item"
        #expect(try read(t, context: context) == "protected")
        #expect(prompter.count == 2)
        #expect(prompter.asked.withLock { $0[0].description } == "Read the protected item")
        #expect(prompter.asked.withLock { $0[1].error } != nil)
        #expect(try read(t, context: context) == "protected")
        #expect(prompter.count == 2)
        context.invalidate()
        #expect(status { _ = try read(t, context: context) } == -25293)
    }

    @Test("five wrong passwords end the call with errSecAuthFailed and count toward the unlock back-off; cancel is errSecUserCanceled")
    func wrongAndCancel() throws {
        let clock = ManualClock()
        let t = try protectedFile([.devicePasscode], clock: clock.read)
        let wrong = ScriptedPrompter(Array(repeating: .entered(SecretBytes(utf8: "nope")), count: 5))
        #expect(status { _ = try read(t, context: AuthenticationContext(prompter: wrong)) } == -25293)
        #expect(wrong.count == 5)
        let cancel = ScriptedPrompter([.cancelled])
        #expect(status { _ = try read(t, context: AuthenticationContext(prompter: cancel)) } == -128)
        // Every door to the keychain password shares one back-off: after five wrong answers even the right one
        // is refused, without being tried, until the wait is over.
        let early = ScriptedPrompter([.entered(SecretBytes(utf8: "pw"))])
        #expect(status { _ = try read(t, context: AuthenticationContext(prompter: early)) } == -25293)
        #expect(early.count == 1)
        clock.now += 61
        let right = ScriptedPrompter([.entered(SecretBytes(utf8: "pw"))])
        #expect(try read(t, context: AuthenticationContext(prompter: right)) == "protected")
    }

    @Test("biometry is not available here: alone it fails; with Or the password suffices; with And it fails")
    func biometry() throws {
        let right = { AuthenticationContext(prompter: ScriptedPrompter([.entered(SecretBytes(utf8: "pw"))])) }
        #expect(status { _ = try read(try protectedFile([.biometryAny]), context: right()) } == -25293)
        #expect(status { _ = try read(try protectedFile([.biometryCurrentSet]), context: right()) } == -25293)
        #expect(try read(try protectedFile([.biometryAny, .devicePasscode, .or]), context: right()) == "protected")
        #expect(status { _ = try read(try protectedFile([.biometryAny, .devicePasscode, .and]), context: right()) } == -25293)
    }

    @Test("a recent unlock counts within the context's reuse window (at most 300 s)")
    func reuseWindow() throws {
        let clock = ManualClock()
        let t = try protectedFile([.userPresence], clock: clock.read)
        t.file.lock()
        try t.file.unlock(password: SecretBytes(utf8: "pw"))
        let context = AuthenticationContext()
        context.reuseDuration = 10_000
        #expect(context.reuseDuration == 300)
        context.reuseDuration = 60
        clock.now += 30
        #expect(try read(t, context: context, ui: "u_AuthUIF") == "protected")
        let late = AuthenticationContext()
        late.reuseDuration = 60
        clock.now += 60
        #expect(status { _ = try read(t, context: late, ui: "u_AuthUIF") } == -25308)
    }

    @Test("deleting a protected item needs no authentication (Apple's odel = true)")
    func delete() throws {
        let t = try protectedFile([.userPresence])
        #expect(status { try t.file.deleteAsking(QueryParser.parse(["class": "genp", "acct": "p"], for: .delete), caller: t.caller) } == 0)
    }

    @Test("application password: both it and the unlocked keychain are needed")
    func applicationPassword() throws {
        let t = try protectedFile([.applicationPassword])
        let good = AuthenticationContext()
        good.setApplicationPassword(SecretBytes(utf8: "app-pw"))
        #expect(try read(t, context: good) == "protected")
        // Apple decrypts items with access-control constraints even for attributes (semantics §5.3): with the
        // password in the context they are found; UI Skip without it leaves the item out; UI Fail is -25308.
        #expect(try read(t, context: good, data: false) == "")
        #expect(try read(t, context: good, ui: "u_AuthUIS", data: false) == "")
        #expect(status { _ = try read(t, ui: "u_AuthUIS", data: false) } == -25300)
        #expect(status { _ = try read(t, ui: "u_AuthUIF", data: false) } == -25308)
        let bad = AuthenticationContext()
        bad.setApplicationPassword(SecretBytes(utf8: "wrong"))
        #expect(status { _ = try read(t, context: bad, ui: "u_AuthUIF") } == -25308)
        #expect(bad.applicationPassword == nil)  // dropped from the context, as Apple does
        #expect(status { _ = try read(t) } == -25308)
        let asked = ScriptedPrompter([.entered(SecretBytes(utf8: "x")), .entered(SecretBytes(utf8: "app-pw"))])
        #expect(try read(t, context: AuthenticationContext(prompter: asked)) == "protected")
        #expect(asked.asked.withLock { $0.allSatisfy { $0.kind == .applicationPassword } })
        let fiveWrong = ScriptedPrompter(Array(repeating: .entered(SecretBytes(utf8: "x")), count: 5))
        #expect(status { _ = try read(t, context: AuthenticationContext(prompter: fiveWrong)) } == -25293)
        // Locked keychain: the right application password alone opens nothing.
        t.file.lock()
        #expect(status { _ = try read(t, context: good) } == -25308)
    }

    @Test("an application-password item without a password to set is errSecInteractionNotAllowed")
    func applicationPasswordRequiredOnAdd() throws {
        let t = try TestFile(password: "pw")
        let q = try QueryParser.parse([
            "class": "genp", "acct": "p",
            "accc": .accessControl(try AccessControl(protection: .whenUnlocked, flags: [.applicationPassword])),
        ], for: .add)
        #expect(status { _ = try t.file.addAsking(q, caller: t.caller) } == -25308)
    }
}

/// A sensor for tests: available or not, an enrolment that can change, and a scripted answer.
final class FakeSensor: Authenticator {
    let state: Mutex<(available: Bool, enrolment: Data?, answer: AuthenticatorResult, uses: Int)>
    init(available: Bool = true, enrolment: Data? = Data([1]), answer: AuthenticatorResult = .success) {
        state = Mutex((available, enrolment, answer, 0))
    }
    var isAvailable: Bool { state.withLock { $0.available } }
    var enrolmentFingerprint: Data? { state.withLock { $0.enrolment } }
    func authenticate(reason: String) -> AuthenticatorResult {
        state.withLock {
            $0.uses += 1
            return $0.answer
        }
    }
}

@Suite("Biometry through the Authenticator interface")
struct BiometryTests {
    func file(sensor: FakeSensor, flags: AccessControl.Flags) throws -> TestFile {
        let t = try TestFile(password: "pw")
        t.configuration.authenticator = sensor
        try t.reopen()
        try t.file.unlock(password: SecretBytes(utf8: "pw"))
        _ = try t.file.addAsking(QueryParser.parse([
            "class": "genp", "acct": "b", "v_Data": .data(Data("bio".utf8)),
            "accc": .accessControl(try AccessControl(protection: .whenUnlocked, flags: flags)),
        ], for: .add), caller: t.caller)
        return t
    }

    func read(_ t: TestFile) throws -> String? {
        var q = try QueryParser.parse(["class": "genp", "acct": "b", "r_Data": true], for: .search)
        q.authenticationContext = AuthenticationContext(prompter: ScriptedPrompter([]))
        return try t.file.searchAsking(q, caller: t.caller).first?.secret?.unprotectedString()
    }

    @Test("a sensor satisfies BiometryAny and UserPresence without a password prompt")
    func sensorSatisfies() throws {
        let sensor = FakeSensor()
        #expect(try read(try file(sensor: sensor, flags: [.biometryAny])) == "bio")
        #expect(try read(try file(sensor: sensor, flags: [.userPresence])) == "bio")
        #expect(sensor.state.withLock { $0.uses } == 2)
    }

    @Test("BiometryCurrentSet: readable with the enrolment it was bound to, not after the enrolment changes")
    func currentSet() throws {
        let sensor = FakeSensor(enrolment: Data([1, 2, 3]))
        let t = try file(sensor: sensor, flags: [.biometryCurrentSet])
        #expect(try read(t) == "bio")
        sensor.state.withLock { $0.enrolment = Data([9]) }
        #expect(status { _ = try read(t) } == -25293)
        // BiometryAny survives the same change.
        let any = try file(sensor: sensor, flags: [.biometryAny])
        sensor.state.withLock { $0.enrolment = Data([7]) }
        #expect(try read(any) == "bio")
    }

    @Test("a cancelled sensor is errSecUserCanceled; a failed one falls back to nothing for biometry-only items")
    func cancelAndFail() throws {
        #expect(status { _ = try read(try file(sensor: FakeSensor(answer: .cancelled), flags: [.biometryAny])) } == -128)
        #expect(status { _ = try read(try file(sensor: FakeSensor(answer: .failure), flags: [.biometryAny])) } == -25293)
    }
}

/// A prompter that, while its question is open, lets another call run on the same keychain and records whether it
/// could finish (a prompt must never be asked while the file's lock or a transaction is held).
final class ConcurrentCallPrompter: Prompter {
    let other: @Sendable () -> Void
    let otherFinished = Mutex(false)
    init(other: @escaping @Sendable () -> Void) { self.other = other }
    func requestPassword(_ request: PasswordRequest) -> PromptResponse {
        let done = DispatchSemaphore(value: 0)
        let work = other
        Thread {
            work()
            done.signal()
        }.start()
        let finished = done.wait(timeout: .now() + 5) == .success
        otherFinished.withLock { $0 = finished }
        return .entered(SecretBytes(utf8: "pw"))
    }
    func requestConfirmation(_ request: ConfirmationRequest) -> ConfirmationResponse { .unavailable }
}

@Suite("Prompts are asked with nothing held")
struct PromptOutsideTransactionTests {
    /// A keychain with one item behind user presence, and a prompter that adds another item while it asks.
    func protectedItemAndConcurrentWriter() throws -> (TestFile, ConcurrentCallPrompter) {
        let t = try TestFile(password: "pw")
        var add = try QueryParser.parse([
            "class": "genp", "acct": "p", "v_Data": .data(Data("protected".utf8)),
            "accc": .accessControl(try AccessControl(protection: .whenUnlocked, flags: [.userPresence])),
        ], for: .add)
        add.authenticationContext = AuthenticationContext()
        _ = try t.file.addAsking(add, caller: t.caller)
        let file = t.file, caller = t.caller
        let prompter = ConcurrentCallPrompter {
            let other = try? QueryParser.parse(["class": "genp", "acct": "other", "v_Data": .data(Data("x".utf8))], for: .add)
            if let other { _ = try? file.add(other, caller: caller) }
        }
        return (t, prompter)
    }

    @Test("while a search waits for the user, another call on the same keychain goes through")
    func searchPromptHoldsNothing() throws {
        let (t, prompter) = try protectedItemAndConcurrentWriter()
        var read = try QueryParser.parse(["class": "genp", "acct": "p", "r_Data": true], for: .search)
        read.authenticationContext = AuthenticationContext(prompter: prompter)
        #expect(try t.file.searchAsking(read, caller: t.caller).first?.secret?.unprotectedString() == "protected")
        #expect(prompter.otherFinished.withLock { $0 })
        #expect(try t.secret("other") == "x")
    }

    @Test("while an update waits for the user, another write to the same keychain goes through")
    func updatePromptHoldsNothing() throws {
        let (t, prompter) = try protectedItemAndConcurrentWriter()
        var query = try QueryParser.parse(["class": "genp", "acct": "p"], for: .update)
        query.authenticationContext = AuthenticationContext(prompter: prompter)
        let changes = try QueryParser.parseUpdate(["labl": "changed"], itemClass: .genericPassword)
        #expect(try t.file.updateAsking(query, with: changes, caller: t.caller) == 1)
        #expect(prompter.otherFinished.withLock { $0 })
        #expect(try t.secret("other") == "x")
        var read = try QueryParser.parse(["class": "genp", "acct": "p", "r_Attributes": true, "r_Data": true], for: .search)
        read.authenticationContext = AuthenticationContext(prompter: ConcurrentCallPrompter {})
        let found = try t.file.searchAsking(read, caller: t.caller).first
        #expect(found?.item.attributes["labl"] == .string("changed"))
        #expect(found?.secret?.unprotectedString() == "protected")
    }

    @Test("while an upsert of a protected duplicate waits for the user, another write goes through")
    func upsertPromptHoldsNothing() throws {
        let (t, prompter) = try protectedItemAndConcurrentWriter()
        var query = try QueryParser.parse(["class": "genp", "acct": "p"], for: .add)
        query.authenticationContext = AuthenticationContext(prompter: prompter)
        let changes = try QueryParser.parseUpdate(["labl": "upserted"], itemClass: .genericPassword)
        #expect(try t.file.addOrUpdateAsking(query, changes: changes, caller: t.caller) == false)
        #expect(prompter.otherFinished.withLock { $0 })
        #expect(try t.secret("other") == "x")
        var read = try QueryParser.parse(["class": "genp", "acct": "p", "r_Attributes": true, "r_Data": true], for: .search)
        read.authenticationContext = AuthenticationContext(prompter: ConcurrentCallPrompter {})
        let found = try t.file.searchAsking(read, caller: t.caller).first
        #expect(found?.item.attributes["labl"] == .string("upserted"))
        #expect(found?.secret?.unprotectedString() == "protected")
    }

    @Test("upserts of one key from many threads: every call succeeds and one item remains")
    func racingUpserts() async throws {
        let t = try TestFile(password: nil)
        let file = t.file, caller = t.caller
        let outcomes = await withTaskGroup(of: Int32.self) { group in
            for thread in 0..<6 {
                group.addTask {
                    var failures: Int32 = 0
                    for i in 0..<10 {
                        let value = Data("v\(thread)-\(i)".utf8)
                        do {
                            let q = try QueryParser.parse(["class": "genp", "acct": "race", "v_Data": .data(value)], for: .add)
                            let changes = try QueryParser.parseUpdate(["v_Data": .data(value)], itemClass: .genericPassword)
                            _ = try file.addOrUpdate(q, changes: changes, caller: caller)
                        } catch {
                            failures += 1
                        }
                    }
                    return failures
                }
            }
            return await group.reduce(0, +)
        }
        #expect(outcomes == 0)
        let all = try t.file.searchAsking(QueryParser.parse(["class": "genp", "acct": "race", "m_Limit": "m_LimitAll",
                                                        "r_Data": true], for: .search), caller: t.caller)
        #expect(all.count == 1)
        #expect(all.first?.secret?.unprotectedString()?.hasPrefix("v") == true)
    }
}
