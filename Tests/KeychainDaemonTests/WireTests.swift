import Foundation
import KeychainCore
@testable import KeychainDaemon
import KeychainTestSupport
import KeychainWire
import Testing

@Suite("Daemon protocol: messages and hostile frames")
struct WireTests {
    @Test("every request survives encoding, secrets and typed queries included")
    func requestRoundTrip() throws {
        let work = KeychainReference(path: "/tmp/k/work.keychain-db")
        let dictionary: [String: QueryValue] = [
            "class": "inet", "acct": "a", "v_Data": .secret(SecretBytes(utf8: "s3cret")), "port": .int(443),
            "r_Data": true, "r_Attributes": true, "m_Limit": "m_LimitAll", "cdat": .date(Date(timeIntervalSince1970: 1)),
            "srvr": .data(Data([0, 1])), "agrp": "group", "sync": "syna", "u_OpPrompt": "why",
            "accc": .accessControl(try AccessControl(protection: .whenUnlocked, flags: [.userPresence])),
        ]
        let search = try QueryParser.parse(dictionary, for: .search)
        var add = try QueryParser.parse(["class": "genp", "acct": "a", "v_Data": .secret(SecretBytes(utf8: "x")),
                                         "pdmn": "ak", "nleg": true, "musr": .null,
                                         "acls": .array(["/usr/bin/git"])], for: .add)
        add.applicationAccess = .applications(["/usr/bin/git", "/usr/bin/ssh"])
        let byReference = ItemQuery.item(PersistentReference(itemClass: .key, uuid: UUID()), for: .search,
                                         returning: [.ref, .persistentRef])
        var changes = ItemUpdate(label: "x", secret: SecretBytes(utf8: "y"))
        changes.synchronizable = true
        changes.accessibility = .afterFirstUnlock
        let requests: [Request] = [
            .resolve("work"), .defaultKeychain, .searchList, .searchListStates, .setSearchList([work, work]), .state(work),
            .subscribe,
            .createKeychain(work, password: SecretBytes(utf8: "pw"), settings: .appleDefault),
            .unlock(work, password: nil), .changePassword(work, old: SecretBytes(utf8: "a"), new: nil),
            .add(add, work), .search(search, nil), .search(byReference, work), .firstMatch(search),
            .update(try QueryParser.parse(["class": "genp"], for: .update), changes, work),
            .delete(try QueryParser.parse(["class": "genp", "m_ItemList": .array([])], for: .delete), nil),
            .upsert(add, ItemUpdate(), nil), .replaceAll(try QueryParser.parse(["class": "genp"], for: .delete), add, nil),
            .allItems(work, includingSecrets: true),
            .useKey(try QueryParser.parse(["class": "keys"], for: .search),
                    KeyUse(.sign, algorithm: "algid:sign:ECDSA:message-X962:SHA256", input: SecretBytes(utf8: "m")), work),
            .useKey(byReference, KeyUse(.keyExchange, algorithm: "algid:keyexchange:ECDH", peerPublicKey: Data([4, 1]),
                                        requestedSize: 32, sharedInfo: Data([7])), nil),
            .certificates(try QueryParser.parse(["class": "cert", "labl": "c"], for: .search), work),
            .generateKeyPair(KeyGeneration(keyType: "73", bits: 256, privateAttributes: ["atag": .data(Data([1]))],
                                           publicAttributes: nil), work),
            .generateKeyPair(KeyGeneration(keyType: "42", bits: 2048, privateAttributes: [:],
                                           publicAttributes: ["labl": "public"]), nil),
            .backUp(work, path: "/tmp/k/backup", password: SecretBytes(utf8: "bpw")),
            .restore(path: "/tmp/k/backup", password: SecretBytes(utf8: "bpw"), work),
            .importSecrets(SecretImport(.entries([ImportedSecret(attributes: ["class": "genp", "svce": "s"],
                                                                 secret: SecretBytes(utf8: "x"), name: "pass: s")]),
                                        dryRun: true), work),
            .importSecrets(SecretImport(.gnomeKeyringFile(SecretBytes(utf8: "file"), password: SecretBytes(utf8: "pw"))), nil),
            .sync(.setUp(server: "https://sync.example.org"), work), .sync(.now, work), .sync(.status, work),
            .sync(.leave, work), .sync(.join(server: "https://s"), work), .sync(.joinStatus, work),
            .sync(.approve(code: "ABCDE12345"), work), .sync(.removeDevice(id: "00ff"), work),
            .sync(.recover(server: "https://s", recoveryKey: SecretBytes(utf8: "k")), work),
        ]
        for request in requests {
            let bytes = try request.encode()
            let decoded = try Request.decode(bytes)
            #expect(try decoded.encode() == bytes)
        }
        guard case .search(let q, let r) = try Request.decode(try Request.search(search, work).encode()) else {
            Issue.record("not a search")
            return
        }
        #expect(r == work)
        #expect(q.itemClass == .internetPassword && q.operation == .search)
        #expect(q.attributes == search.attributes && q.attributes["srvr"] == .data(Data([0, 1])))
        #expect(q.accessGroup == "group" && q.sync == .any && q.accessControl == search.accessControl)
        #expect(q.valueData == SecretBytes(utf8: "s3cret") && q.limit == .all && q.returnTypes == [.data, .attributes])
        #expect(q.operationPrompt == "why")
        guard case .update(_, let u, _) = try Request.decode(try Request.update(add, changes, nil).encode()) else {
            Issue.record("not an update")
            return
        }
        #expect(u.attributes == ["labl": .string("x")] && u.valueData == SecretBytes(utf8: "y"))
        #expect(u.synchronizable == true && u.accessibility == .afterFirstUnlock)
        guard case .add(let a, _) = try Request.decode(try Request.add(add, nil).encode()) else {
            Issue.record("not an add")
            return
        }
        #expect(a.applicationAccess == .applications(["/usr/bin/git", "/usr/bin/ssh"]))
        #expect(a.dataProtectionKeychain && a.accessibility == .whenUnlocked)
    }

    /// What a program can write on keychaind's socket is held to what the parser produces: a typed request is no
    /// way around Apple's rules (an attribute of another class, a value of the wrong kind, a loosened add).
    @Test("a typed request that the parser could not have made is errSecParam or errSecNoSuchAttr, and changes nothing")
    func forgedTypedRequests() throws {
        func status(_ query: ItemQuery) -> Int32? {
            do {
                _ = try query.checked()
                return nil
            } catch {
                return error.status.rawValue
            }
        }
        var query = ItemQuery(operation: .add, itemClass: .genericPassword)
        #expect(status(query) == nil)
        query.attributes["srvr"] = .string("not a generic password attribute")
        #expect(status(query) == -25303)
        query.attributes = ["agrp": .string("group kept in its own field")]
        #expect(status(query) == -25303)
        query.attributes = ["cdat": .string("not a date")]
        #expect(status(query) == -50)
        query.attributes = ["musr": .data(Data([1, 2, 3]))]
        #expect(status(query) == -50)
        query.attributes = [:]
        query.sync = .any
        #expect(status(query) == -50)
        query.sync = .synchronizable
        query.accessControl = try AccessControl(protection: .whenUnlocked, flags: [.userPresence])
        #expect(status(query) == -50)
        query.sync = .nonSynchronizable
        query.accessibility = .whenUnlocked
        #expect(status(query) == -50)
        query.accessibility = nil
        query.applicationAccess = .applications(["relative/path"])
        #expect(status(query) == -50)
        query.applicationAccess = nil
        query.valueData = SecretBytes(Data(count: ItemRules.maximumSecretSize + 1))
        #expect(status(query) == -25302)
        var add = ItemQuery(operation: .add, itemClass: .genericPassword)
        add.limit = .one
        #expect(status(add) == -50)  // the parser leaves every add at All
        var shapes = ItemQuery(operation: .search, itemClass: .genericPassword)
        shapes.limit = MatchLimit(count: nil, returnsArray: false)
        #expect(status(shapes) == -50)
        shapes.limit = MatchLimit(count: 5, returnsArray: true)
        #expect(status(shapes) == nil)
        shapes.returnTypes = ReturnTypes(rawValue: 0x10)
        #expect(status(shapes) == -50)
        var referenced = ItemQuery.item(PersistentReference(itemClass: .genericPassword, uuid: UUID()), for: .search)
        #expect(status(referenced) == nil)
        referenced.accessGroup = "another group"
        #expect(status(referenced) == -50)
        referenced.accessGroup = nil
        referenced.sync = .nonSynchronizable
        #expect(status(referenced) == -50)
        var delete = ItemQuery(operation: .delete, itemClass: .genericPassword)
        delete.limit = .one
        #expect(status(delete) == -50)
        delete.limit = .all
        delete.applicationAccess = .anyApplication
        #expect(status(delete) == -50)
        var search = ItemQuery(operation: .search, itemClass: .genericPassword)
        search.persistentReference = PersistentReference(itemClass: .genericPassword, uuid: UUID())
        search.attributes = ["acct": .string("a")]
        #expect(status(search) == -50)
        func status(_ update: ItemUpdate) -> Int32? {
            do {
                _ = try update.checked(for: .genericPassword)
                return nil
            } catch {
                return error.status.rawValue
            }
        }
        #expect(status(ItemUpdate(label: "fine")) == nil)
        var update = ItemUpdate()
        update.attributes = ["ggrp": .string("shared")]
        #expect(status(update) == -50)
        update.attributes = ["port": .number(1)]
        #expect(status(update) == -25303)
    }

    /// An upsert's secret travels once (in the item), so the largest secret an add takes fits an upsert's frame.
    @Test("an upsert of the largest secret fits one request: its secret is in the item only")
    func upsertCarriesTheSecretOnce() throws {
        let secret = SecretBytes(Data(repeating: 0x41, count: ItemRules.maximumSecretSize))
        let (item, changes) = try QueryParser.parseUpsert(["class": "genp", "svce": "s", "acct": "a"], secret: secret,
                                                          attributes: ["labl": "a label"])
        #expect(changes.valueData == nil && item.valueData == secret)
        let bytes = try Request.upsert(item, changes, nil).encode()
        #expect(bytes.count < WireLimits.maximumRequest)
        #expect(bytes.count < ItemRules.maximumSecretSize + 4096)
    }

    @Test("a context travels as its id and settings; whether it is authenticated never does")
    func contextSnapshot() throws {
        let context = AuthenticationContext()
        context.localizedReason = "why"
        context.reuseDuration = 30
        context.setApplicationPassword(SecretBytes(utf8: "app"))
        context.markOwnerAuthenticated()
        let query = try QueryParser.parse(["class": "genp", "u_AuthCtx": .authenticationContext(context)], for: .search)
        let bytes = try Request.search(query, nil).encode()
        guard case .search(let q, _) = try Request.decode(bytes), let copy = q.authenticationContext else {
            Issue.record("no context")
            return
        }
        #expect(copy.id == context.id)
        #expect(copy.localizedReason == "why" && copy.reuseDuration == 30)
        #expect(copy.applicationPassword == SecretBytes(utf8: "app"))
        #expect(!copy.isOwnerAuthenticated)
    }

    @Test("responses round-trip: items with secrets, states, errors with Apple's status")
    func responseRoundTrip() throws {
        let item = Item(itemClass: .genericPassword, attributes: ["acct": .string("a"), "cdat": .date(12.5), "port": .number(1)])
        let responses: [Response] = [
            .done, .progress(done: 5, total: 9), .state(KeychainState(exists: true, isLocked: false, hasPassword: true)),
            .listedKeychains([]),
            .listedKeychains([ListedKeychain(KeychainReference(path: "/k/login.keychain-db"),
                                             KeychainState(exists: true, isLocked: true, hasPassword: true)),
                              ListedKeychain(KeychainReference(path: "/k/gone.keychain-db"),
                                             KeychainState(exists: false, isLocked: false, hasPassword: false))]),
            .settings(KeychainSettings(lockInterval: nil, lockOnSleep: true)), .count(3),
            .items([FoundItem(item: item, secret: SecretBytes(utf8: "x")), FoundItem(item: item, secret: nil)]),
            .listMatch(.found(KeychainReference(path: "/k/work.keychain-db"), [FoundItem(item: item, secret: SecretBytes(utf8: "x"))])),
            .listMatch(.found(KeychainReference(path: "/k/work.keychain-db"), [])), .listMatch(.callerWalks),
            .failure(KeychainError(.itemNotFound)),
            .event(KeychainEvent(kind: .passwordChanged, keychain: "/k/work.keychain-db", pid: 4242)),
            .event(KeychainEvent(kind: .keychainListChanged, keychain: nil, pid: 1)),
        ]
        for response in responses {
            let bytes = response.encode()
            #expect(try Response.decode(bytes).encode() == bytes)
        }
        guard case .failure(let error) = try Response.decode(Response.failure(KeychainError(.duplicateItem)).encode()) else {
            Issue.record("not a failure")
            return
        }
        #expect(error.status == .duplicateItem)
    }

    @Test("truncated, oversized and garbage frames are errors, never crashes", arguments: 0..<300)
    func hostileFrames(seed: Int) throws {
        var generator = SplitMix64(seed: UInt64(seed))
        let add = try QueryParser.parse(["class": "genp", "acct": "a", "v_Data": .secret(SecretBytes(utf8: "s"))], for: .add)
        let valid = try Request.add(add, nil).encode()
        var bytes = valid
        switch seed % 3 {
        case 0: bytes = Array(bytes.prefix(Int(generator.next() % UInt64(bytes.count))))
        case 1:
            for _ in 0..<4 { bytes[Int(generator.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: generator.next()) }
        default: bytes = (0..<Int(generator.next() % 64)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        }
        _ = try? Request.decode(bytes)
        _ = try? Response.decode(bytes)
    }

    @Test("a greeting of another version is refused with a message that says what to do")
    func versionMismatch() {
        #expect(throws: WireError.versionMismatch(client: keychainProtocolVersion, daemon: 99)) {
            try Framing.checkHello(Array("KCW".utf8) + [99])
        }
        // keychaind tells an older client its own version and what to do, from the client's side.
        #expect(throws: WireError.versionMismatch(client: keychainProtocolVersion - 1, daemon: keychainProtocolVersion)) {
            try Framing.checkClientHello(Array("KCW".utf8) + [UInt8(keychainProtocolVersion - 1)])
        }
        #expect(throws: WireError.malformed("greeting")) { try Framing.checkClientHello(Array("KCX".utf8) + [5]) }
        let older = WireError.versionMismatch(client: 4, daemon: 5).message
        #expect(older.hasPrefix("this program speaks keychain protocol 4, the running keychaind speaks 5"))
        #expect(older.contains("this program is older than keychaind") && !older.contains("restart keychaind"))
        #expect(WireError.versionMismatch(client: 5, daemon: 4).message.contains("restart keychaind"))
    }
}

@Suite("Caller policy: the daemon decides who is calling")
struct CallerPolicyTests {
    @Test("the keychain's tools in keychaind's directory see every group; elsewhere they are ordinary programs")
    func tools() {
        let policy = CallerPolicy(toolDirectory: "/opt/kc/bin")
        let tool = policy.caller(for: PeerIdentity(pid: 1, uid: 0, executable: "/opt/kc/bin/security"))
        #expect(tool?.hasWildcard == true)
        let impostor = policy.caller(for: PeerIdentity(pid: 1, uid: 0, executable: "/tmp/security"))
        #expect(impostor?.hasWildcard == false)
        #expect(impostor?.accessGroups == ["security"])
        // Only that directory, not one below it or a name that merely ends the same.
        #expect(policy.caller(for: PeerIdentity(pid: 1, uid: 0, executable: "/opt/kc/bin/x/security"))?.hasWildcard == false)
        #expect(policy.caller(for: PeerIdentity(pid: 1, uid: 0, executable: "/opt/kc/bin/not-security"))?.hasWildcard == false)
        let atRoot = CallerPolicy(toolDirectory: "/")
        #expect(atRoot.caller(for: PeerIdentity(pid: 1, uid: 0, executable: "/security"))?.hasWildcard == true)
    }

    @Test("an executable's path splits into its directory and name as the tool check compares them")
    func split() {
        #expect(CallerPolicy.split("/opt/kc/bin/security") == ("/opt/kc/bin", "security"))
        #expect(CallerPolicy.split("/security") == ("/", "security"))
        #expect(CallerPolicy.split("/usr/bin/python3 (deleted)") == ("/usr/bin", "python3 (deleted)"))
        // Cut at the byte: a combining mark after the slash is the name's, never dropped (it would make the name
        // "security" and the program a tool).
        #expect(CallerPolicy.split("/opt/kc/bin/\u{301}security").name.unicodeScalars.first == "\u{301}")
        let marked = CallerPolicy(toolDirectory: "/opt/kc/bin")
            .caller(for: PeerIdentity(pid: 1, uid: 0, executable: "/opt/kc/bin/\u{301}security"))
        #expect(marked?.hasWildcard == false)
    }

    @Test("no program's files claim the wildcard or keychaind's groups (its own, the Secret portal's)")
    func claimable() {
        let claimed = CallerPolicy.claimable(["org.example.app", Caller.wildcardGroup, Caller.portalSecretGroup,
                                              Caller.syncStateGroup, Caller.accessLogGroup])
        #expect(claimed == ["org.example.app"])
    }

    @Test("installed means only root can change it: root's all the way up, writable by nobody else (a sticky /tmp aside)",
          .enabled(if: geteuid() == 0))
    func installedLocation() throws {
        #expect(CallerPolicy.isInstalled("/usr/bin/env"))
        #expect(!CallerPolicy.isInstalled("/nonexistent/security"))
        let directory = URL(fileURLWithPath: "/tmp/policy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: directory) }
        chmod(directory.path, 0o755)
        let file = directory.appendingPathComponent("tool")
        try Data().write(to: file)
        chmod(file.path, 0o755)
        #expect(CallerPolicy.isInstalled(file.path))  // root's, in a root directory inside the sticky /tmp
        chmod(directory.path, 0o777)  // anyone could replace it now
        #expect(!CallerPolicy.isInstalled(file.path))
        chmod(directory.path, 0o755)
        chown(file.path, 65534, 65534)  // another user's file
        #expect(!CallerPolicy.isInstalled(file.path))
    }

    @Test("another program's groups come from the files beside its executable, never from its environment")
    func applications() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("policy-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let plist = """
            <?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict><key>keychain-access-groups</key>
            <array><string>team.shared</string></array></dict></plist>
            """
        try Data(plist.utf8).write(to: dir.appendingPathComponent("app.entitlements"))
        let caller = CallerPolicy(toolDirectory: "/opt/kc/bin")
            .caller(for: PeerIdentity(pid: 1, uid: 0, executable: dir.appendingPathComponent("app").path))
        #expect(caller?.accessGroups == ["team.shared", "app"])
        // A program's files cannot give it the wildcard only the keychain's own tools have (it would see every
        // group and pass for security when backing the keychain up).
        let greedy = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><plist version=\"1.0\"><dict>"
            + "<key>keychain-access-groups</key><array><string>*</string><string>team.shared</string></array></dict></plist>"
        try Data(greedy.utf8).write(to: dir.appendingPathComponent("security.entitlements"))
        let impostor = CallerPolicy(toolDirectory: "/opt/kc/bin")
            .caller(for: PeerIdentity(pid: 1, uid: 0, executable: dir.appendingPathComponent("security").path))
        #expect(impostor?.hasWildcard == false)
        #expect(impostor?.accessGroups.contains("team.shared") == true)
        #expect(impostor.map(AccessEvaluator.mayActOnWholeKeychain) == false)
        #expect(CallerPolicy(toolDirectory: "/x").caller(for: PeerIdentity(pid: 1, uid: 0, executable: nil)) == nil)
    }
}

extension WireTests {
    @Test("a backup report comes back with every count")
    func backupReportRoundTrip() throws {
        let report = BackupReport(items: 7, thisDeviceOnly: 3, kept: 2, skippedOtherDevice: 1, leftOutPasscode: 4,
                                  leftOutApplicationPassword: 5)
        guard case .backupReport(let decoded) = try Response.decode(Response.backupReport(report).encode()) else {
            Issue.record("not a backup report")
            return
        }
        #expect(decoded == report)
    }
}

extension WireTests {
    @Test("an import report comes back with its counts and every failure")
    func importReportRoundTrip() throws {
        let report = ImportReport(added: ["genp": 3, "inet": 1], alreadyThere: 2, failures: [
            .init(name: "email/alice", status: .decode, message: "gpg could not decrypt it"),
        ])
        guard case .importReport(let decoded) = try Response.decode(Response.importReport(report).encode()) else {
            Issue.record("not an import report")
            return
        }
        #expect(decoded == report)
    }
}

extension WireTests {
    @Test("a sync report comes back whole, with the recovery key only when there is one")
    func syncReportRoundTrip() throws {
        for report in [
            SyncReport(server: "https://s", account: "aa", device: "bb", epoch: 2, items: 5, sent: 1, received: 2,
                       deleted: 3, conflicts: 4, lastSync: 1_790_000_000.25, recoveryKey: SecretBytes(utf8: "r-k")),
            SyncReport(server: "http://127.0.0.1:1", account: "", device: "", epoch: 1),
            { () -> SyncReport in
                var report = SyncReport(server: "https://s", account: "", device: "d", epoch: 0)
                report.joinCode = "ABCDE12345"
                report.words = ["acid", "acorn"]
                report.joined = true
                report.devices = 3
                report.deviceList = [SyncDevice(id: "aa", approvedBy: "aa", isThisDevice: true),
                                     SyncDevice(id: "bb", approvedBy: "recovery", isThisDevice: false)]
                return report
            }(),
        ] {
            guard case .syncReport(let decoded) = try Response.decode(Response.syncReport(report).encode()) else {
                Issue.record("not a sync report")
                return
            }
            #expect(decoded == report)
        }
    }
}

extension WireTests {
    /// The fuzz target's rule for any frame: refused with a WireError, or decoded to a message whose encoding decodes
    /// and encodes to the same bytes again. A time field that went through Double and back used to trap here (an
    /// Int64 near its limit became 2⁶³) or drift (milliseconds divided and multiplied by 1000).
    private func expectRefusedOrStable(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws {
        if let request = try? Request.decode(bytes) {
            let encoded = try request.encode()
            #expect(try Request.decode(encoded).encode() == encoded, sourceLocation: sourceLocation)
        }
        if let response = try? Response.decode(bytes) {
            let encoded = response.encode()
            #expect(try Response.decode(encoded).encode() == encoded, sourceLocation: sourceLocation)
        }
    }

    /// `frame` with the big-endian 8 bytes of `old` (which must occur once) replaced by those of `new`.
    private func replacing(_ old: Int64, with new: Int64, in frame: [UInt8]) throws -> [UInt8] {
        let needle: [UInt8] = withUnsafeBytes(of: old.bigEndian) { Array($0) }
        let patch: [UInt8] = withUnsafeBytes(of: new.bigEndian) { Array($0) }
        let starts = frame.indices.dropLast(7).filter { Array(frame[$0..<$0 + 8]) == needle }
        try #require(starts.count == 1, "the marker value occurs once in the frame")
        var patched = frame
        patched.replaceSubrange(starts[0]..<starts[0] + 8, with: patch)
        return patched
    }

    @Test("a time in a frame, at any value, is refused or written back exactly: never a trap",
          arguments: [Int64.max, Int64.min, 1_000_000_000_000_001, -1_000_000_000_000_001, 1_000_000_000_000_000,
                      999_999_999_999_999, 123_456_789_012_345, -1, 0])
    func timesAtTheirLimits(value: Int64) throws {
        let marker: Int64 = 0x0123_4567_89AB
        let item = FoundItem(item: Item(itemClass: .certificate, attributes: [:]), secret: nil)
        let certificate = CertificateRecord(
            item: item, sha1: Data(), sha256: Data(), commonName: nil, emailAddresses: [], subjectSummary: nil,
            hasPrivateKey: false, notBefore: nil, notAfter: Date(timeIntervalSince1970: TimeInterval(marker)))
        let sync = SyncReport(server: "s", account: "", device: "", epoch: 0, lastSync: Double(marker) / 1000)
        let accessLog = try Request.accessLog(.read(AccessLogFilter(since: Date(timeIntervalSince1970: Double(marker) / 1000))))
            .encode()
        for frame in [Response.certificates([certificate]).encode(), Response.syncReport(sync).encode(), accessLog] {
            let patched = try replacing(marker, with: value, in: frame)
            try expectRefusedOrStable(patched)
            let decodes = (try? Response.decode(patched)) != nil || (try? Request.decode(patched)) != nil
            #expect(decodes == (value.magnitude <= 1_000_000_000_000_000), "in range decodes, out of range is refused")
        }
    }

    @Test("times read from a frame are the times that were sent (milliseconds for sync and the access log)")
    func timesKeepTheirValue() throws {
        let sync = SyncReport(server: "s", account: "", device: "", epoch: 0, lastSync: 1_790_000_000.125)
        guard case .syncReport(let decoded) = try Response.decode(Response.syncReport(sync).encode()) else {
            Issue.record("not a sync report")
            return
        }
        #expect(decoded.lastSync == 1_790_000_000.125)
        let since = Date(timeIntervalSince1970: 1_790_000_000.5)
        guard case .accessLog(.read(let filter)) = try Request.decode(Request.accessLog(.read(AccessLogFilter(since: since))).encode())
        else {
            Issue.record("not an access log request")
            return
        }
        #expect(filter.since == since)
    }
}
