#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

/// The protocol version. A client and a daemon of different versions refuse each other with a clear error.
public let keychainProtocolVersion = 5

/// Hard limits: a request carries at most one secret (4 MiB; an upsert too: its changes carry none) and its query;
/// answers may list many items.
public enum WireLimits {
    public static let maximumRequest = 8 << 20
    public static let maximumResponse = 128 << 20
}

/// Where the client's user can be asked: its terminal and display, sent once after the greeting (the daemon has
/// neither). The daemon runs its own pinentry there; which program runs is never the client's choice.
public struct ClientSession: Sendable, Hashable {
    public var terminal: String?
    public var display: String?
    public var waylandDisplay: String?
    public var term: String?

    public init(terminal: String?, display: String?, waylandDisplay: String?, term: String?) {
        self.terminal = terminal
        self.display = display
        self.waylandDisplay = waylandDisplay
        self.term = term
    }

    public var canAsk: Bool { terminal != nil || display != nil || waylandDisplay != nil }
}

/// One call of ``KeychainService``, as the client sends it.
public enum Request: Sendable {
    case session(ClientSession)
    case resolve(String)
    case defaultKeychain, loginKeychain, searchList
    /// The search list with each keychain's state (protocol 4): what a search along it needs, in one round trip.
    case searchListStates
    case setDefaultKeychain(KeychainReference?)
    case setLoginKeychain(KeychainReference?)
    case setSearchList([KeychainReference])
    case state(KeychainReference)
    case createKeychain(KeychainReference, password: SecretBytes?, settings: KeychainSettings)
    case deleteKeychain(KeychainReference)
    case lock(KeychainReference)
    case lockAll
    case unlock(KeychainReference, password: SecretBytes?)
    case settings(KeychainReference)
    case setSettings(KeychainSettings, KeychainReference)
    case changePassword(KeychainReference, old: SecretBytes?, new: SecretBytes?)
    case add(ItemQuery, KeychainReference?)
    case search(ItemQuery, KeychainReference?)
    /// A search of the search list's keychains, in order, up to the first with a match.
    case firstMatch(ItemQuery)
    case update(ItemQuery, ItemUpdate, KeychainReference?)
    case delete(ItemQuery, KeychainReference?)
    case upsert(ItemQuery, ItemUpdate, KeychainReference?)
    case replaceAll(ItemQuery, ItemQuery, KeychainReference?)
    case allItems(KeychainReference, includingSecrets: Bool)
    case authenticateOwner(SecretBytes, AuthenticationContext.Snapshot, KeychainReference?)
    case useKey(ItemQuery, KeyUse, KeychainReference?)
    case generateKeyPair(KeyGeneration, KeychainReference?)
    case importItems(ItemImport, KeychainReference?)
    case exportItems(ItemExport, KeychainReference?)
    case certificates(ItemQuery, KeychainReference?)
    /// Turns this connection into an event stream: the daemon answers `done`, then sends `event` frames only.
    case subscribe
    /// From another keychaind started for the Secret Service (D-Bus activation) while this one serves the socket:
    /// serve org.freedesktop.secrets on that session bus too, so that one keychaind holds the keys.
    case serveSecretService(busAddress: String, replace: Bool)
    /// From `security trust-program PATH`: let the program now at PATH use the access groups it claims, after the
    /// user says yes where the asking program cannot answer. The answer is how many of its groups it may use.
    case trustProgram(path: String)
    /// `security backup-keychain`: every item of the keychain into a backup file at an absolute path.
    case backUp(KeychainReference, path: String, password: SecretBytes)
    /// `security restore-keychain`: a backup file's items into the keychain, in one transaction.
    case restore(path: String, password: SecretBytes, KeychainReference)
    /// `security import-secrets`: secrets read from another store (or a keyring file to read), stored as items.
    case importSecrets(SecretImport, KeychainReference?)
    /// `security sync-setup`, `sync-now`, `sync-status`, `sync-leave`: the keychain's sync, run by keychaind.
    case sync(SyncRequest, KeychainReference)
    /// `security access-log`, `verify-access-log`: the log keychaind keeps.
    case accessLog(AccessLogRequest)

    public func encode() throws(WireError) -> [UInt8] {
        var w = WireWriter()
        switch self {
        case .resolve(let name): w.byte(1); w.string(name)
        case .defaultKeychain: w.byte(2)
        case .loginKeychain: w.byte(3)
        case .searchList: w.byte(4)
        case .searchListStates: w.byte(39)
        case .setDefaultKeychain(let r): w.byte(5); w.optionalReference(r)
        case .setLoginKeychain(let r): w.byte(6); w.optionalReference(r)
        case .setSearchList(let list):
            w.byte(7)
            w.int(Int64(list.count))
            for r in list { w.reference(r) }
        case .state(let r): w.byte(8); w.reference(r)
        case .createKeychain(let r, let password, let settings):
            w.byte(9); w.reference(r); w.optionalSecret(password); w.settings(settings)
        case .deleteKeychain(let r): w.byte(10); w.reference(r)
        case .lock(let r): w.byte(11); w.reference(r)
        case .lockAll: w.byte(12)
        case .unlock(let r, let password): w.byte(13); w.reference(r); w.optionalSecret(password)
        case .settings(let r): w.byte(14); w.reference(r)
        case .setSettings(let s, let r): w.byte(15); w.settings(s); w.reference(r)
        case .changePassword(let r, let old, let new):
            w.byte(16); w.reference(r); w.optionalSecret(old); w.optionalSecret(new)
        case .add(let q, let r): w.byte(17); w.itemQuery(q); w.optionalReference(r)
        case .search(let q, let r): w.byte(18); w.itemQuery(q); w.optionalReference(r)
        case .firstMatch(let q): w.byte(40); w.itemQuery(q)
        case .update(let q, let u, let r): w.byte(19); w.itemQuery(q); w.itemUpdate(u); w.optionalReference(r)
        case .delete(let q, let r): w.byte(20); w.itemQuery(q); w.optionalReference(r)
        case .upsert(let q, let u, let r): w.byte(21); w.itemQuery(q); w.itemUpdate(u); w.optionalReference(r)
        case .replaceAll(let m, let q, let r): w.byte(22); w.itemQuery(m); w.itemQuery(q); w.optionalReference(r)
        case .allItems(let r, let secrets): w.byte(23); w.reference(r); w.bool(secrets)
        case .authenticateOwner(let password, let context, let r):
            w.byte(25); w.secret(password); w.contextSnapshot(context); w.optionalReference(r)
        case .session(let c):
            w.byte(24); w.optionalString(c.terminal); w.optionalString(c.display); w.optionalString(c.waylandDisplay)
            w.optionalString(c.term)
        case .subscribe: w.byte(26)
        case .serveSecretService(let address, let replace): w.byte(32); w.string(address); w.bool(replace)
        case .trustProgram(let path): w.byte(33); w.string(path)
        case .backUp(let r, let path, let password): w.byte(34); w.reference(r); w.string(path); w.secret(password)
        case .restore(let path, let password, let r): w.byte(35); w.string(path); w.secret(password); w.reference(r)
        case .accessLog(.read(let filter)):
            w.byte(38); w.byte(0)
            w.optionalString(filter.program); w.optionalString(filter.item)
            w.bool(filter.since != nil); w.milliseconds(filter.since?.timeIntervalSince1970 ?? 0)
        case .accessLog(.verify): w.byte(38); w.byte(1)
        case .sync(let request, let r):
            w.byte(37)
            switch request {
            case .setUp(let server, let authorities, let token):
                w.byte(0); w.string(server); w.optionalBlob(authorities); w.optionalSecret(token)
            case .now: w.byte(1)
            case .status: w.byte(2)
            case .leave: w.byte(3)
            case .join(let server, let authorities): w.byte(4); w.string(server); w.optionalBlob(authorities)
            case .joinStatus: w.byte(5)
            case .approve(let code): w.byte(6); w.string(code)
            case .removeDevice(let id): w.byte(7); w.string(id)
            case .recover(let server, let key, let authorities):
                w.byte(8); w.string(server); w.secret(key); w.optionalBlob(authorities)
            }
            w.reference(r)
        case .importSecrets(let request, let r):
            w.byte(36); w.bool(request.dryRun)
            switch request.source {
            case .entries(let entries):
                w.byte(0)
                w.int(Int64(entries.count))
                for entry in entries { try w.dictionary(entry.attributes); w.secret(entry.secret); w.string(entry.name) }
            case .gnomeKeyringFile(let file, let password):
                w.byte(1); w.secret(file); w.secret(password)
            }
            w.optionalReference(r)
        case .useKey(let q, let use, let r): w.byte(27); w.itemQuery(q); w.keyUse(use); w.optionalReference(r)
        case .generateKeyPair(let g, let r):
            w.byte(28); w.string(g.keyType); w.int(Int64(g.bits)); try w.dictionary(g.privateAttributes)
            w.bool(g.publicAttributes != nil)
            if let publicAttributes = g.publicAttributes { try w.dictionary(publicAttributes) }
            w.optionalReference(r)
        case .importItems(let i, let r):
            w.byte(29); w.secret(i.file); w.optionalString(i.format?.rawValue); w.optionalSecret(i.passphrase)
            try w.dictionary(i.attributes); try w.dictionary(i.privateKeyAttributes); w.optionalReference(r)
        case .exportItems(let e, let r):
            w.byte(30); w.byte(e.selection.rawValue); w.string(e.format.rawValue); w.optionalSecret(e.passphrase)
            w.optionalReference(r)
        case .certificates(let q, let r): w.byte(31); w.itemQuery(q); w.optionalReference(r)
        }
        return w.finish()
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> Request {
        var r = WireReader(bytes)
        let request: Request
        switch try r.byte() {
        case 1: request = .resolve(try r.string())
        case 2: request = .defaultKeychain
        case 3: request = .loginKeychain
        case 4: request = .searchList
        case 39: request = .searchListStates
        case 5: request = .setDefaultKeychain(try r.optionalReference())
        case 6: request = .setLoginKeychain(try r.optionalReference())
        case 7:
            let n = try r.elementCount()
            var list: [KeychainReference] = []
            for _ in 0..<n { list.append(try r.reference()) }
            request = .setSearchList(list)
        case 8: request = .state(try r.reference())
        case 9: request = .createKeychain(try r.reference(), password: try r.optionalSecret(), settings: try r.settings())
        case 10: request = .deleteKeychain(try r.reference())
        case 11: request = .lock(try r.reference())
        case 12: request = .lockAll
        case 13: request = .unlock(try r.reference(), password: try r.optionalSecret())
        case 14: request = .settings(try r.reference())
        case 15: request = .setSettings(try r.settings(), try r.reference())
        case 16: request = .changePassword(try r.reference(), old: try r.optionalSecret(), new: try r.optionalSecret())
        case 17: request = .add(try r.itemQuery(), try r.optionalReference())
        case 18: request = .search(try r.itemQuery(), try r.optionalReference())
        case 40: request = .firstMatch(try r.itemQuery())
        case 19: request = .update(try r.itemQuery(), try r.itemUpdate(), try r.optionalReference())
        case 20: request = .delete(try r.itemQuery(), try r.optionalReference())
        case 21: request = .upsert(try r.itemQuery(), try r.itemUpdate(), try r.optionalReference())
        case 22: request = .replaceAll(try r.itemQuery(), try r.itemQuery(), try r.optionalReference())
        case 23: request = .allItems(try r.reference(), includingSecrets: try r.bool())
        case 25: request = .authenticateOwner(try r.secret(), try r.contextSnapshot(), try r.optionalReference())
        case 24:
            let session = ClientSession(terminal: try r.optionalString(), display: try r.optionalString(),
                                        waylandDisplay: try r.optionalString(), term: try r.optionalString())
            if let terminal = session.terminal, !terminal.hasPrefix("/dev/") { throw .malformed("terminal") }
            request = .session(session)
        case 26: request = .subscribe
        case 32: request = .serveSecretService(busAddress: try r.string(), replace: try r.bool())
        case 33: request = .trustProgram(path: try r.string())
        case 34: request = .backUp(try r.reference(), path: try r.string(), password: try r.secret())
        case 35: request = .restore(path: try r.string(), password: try r.secret(), try r.reference())
        case 38:
            switch try r.byte() {
            case 0:
                let program = try r.optionalString(), item = try r.optionalString()
                let hasSince = try r.bool(), since = try r.milliseconds()
                request = .accessLog(.read(AccessLogFilter(
                    program: program, item: item, since: hasSince ? Date(timeIntervalSince1970: since) : nil)))
            case 1: request = .accessLog(.verify)
            default: throw .malformed("access log request")
            }
        case 37:
            let sync: SyncRequest
            switch try r.byte() {
            case 0: sync = .setUp(server: try r.string(), certificateAuthorities: try r.optionalBlob(),
                                  registrationToken: try r.optionalSecret())
            case 1: sync = .now
            case 2: sync = .status
            case 3: sync = .leave
            case 4: sync = .join(server: try r.string(), certificateAuthorities: try r.optionalBlob())
            case 5: sync = .joinStatus
            case 6: sync = .approve(code: try r.string())
            case 7: sync = .removeDevice(id: try r.string())
            case 8: sync = .recover(server: try r.string(), recoveryKey: try r.secret(),
                                    certificateAuthorities: try r.optionalBlob())
            default: throw .malformed("sync request")
            }
            request = .sync(sync, try r.reference())
        case 36:
            let dryRun = try r.bool()
            let source: SecretImport.Source
            switch try r.byte() {
            case 0:
                let n = try r.elementCount()
                var entries: [ImportedSecret] = []
                for _ in 0..<n {
                    entries.append(ImportedSecret(attributes: try r.dictionary(), secret: try r.secret(), name: try r.string()))
                }
                source = .entries(entries)
            case 1: source = .gnomeKeyringFile(try r.secret(), password: try r.secret())
            default: throw .malformed("import source")
            }
            request = .importSecrets(SecretImport(source, dryRun: dryRun), try r.optionalReference())
        case 27: request = .useKey(try r.itemQuery(), try r.keyUse(), try r.optionalReference())
        case 28:
            let keyType = try r.string()
            guard let bits = Int(exactly: try r.int()), (0...16384).contains(bits) else { throw .malformed("key size") }
            let privateAttributes = try r.dictionary()
            let publicAttributes = try r.bool() ? try r.dictionary() : nil
            request = .generateKeyPair(KeyGeneration(keyType: keyType, bits: bits, privateAttributes: privateAttributes,
                                                     publicAttributes: publicAttributes), try r.optionalReference())
        case 29:
            let file = try r.secret()
            let formatName = try r.optionalString()
            let format = try formatName.map { name throws(WireError) in
                guard let format = ItemFileFormat(rawValue: name) else { throw .malformed("file format") }
                return format
            }
            request = .importItems(ItemImport(file: file, format: format, passphrase: try r.optionalSecret(),
                                              attributes: try r.dictionary(), privateKeyAttributes: try r.dictionary()),
                                   try r.optionalReference())
        case 30:
            guard let selection = ItemExport.Selection(rawValue: try r.byte()),
                  let format = ItemFileFormat(rawValue: try r.string())
            else { throw .malformed("export") }
            request = .exportItems(ItemExport(selection: selection, format: format, passphrase: try r.optionalSecret()),
                                   try r.optionalReference())
        case 31: request = .certificates(try r.itemQuery(), try r.optionalReference())
        default: throw .malformed("request")
        }
        guard r.atEnd else { throw .malformed("request (trailing bytes)") }
        return request
    }
}

/// The daemon's answer to one request.
extension Request {
    /// Whether keychaind sends ``Response/progress(done:total:)`` frames before this request's answer.
    public var reportsProgress: Bool {
        switch self {
        case .backUp, .restore: true
        default: false
        }
    }

    /// Whether sending this request a second time, when keychaind went away after it was sent but before it
    /// answered, does nothing the first one may have done already: it reads, and what it may write besides is the
    /// same the second time (an Always Allow answered again, a missing login keychain made); the user may be asked
    /// again, as the first keychaind's question was lost with it. A change is never sent twice: the first may have
    /// been made (an add repeated would answer errSecDuplicateItem for an item the program did add).
    public var isSafeToRepeat: Bool {
        switch self {
        case .resolve, .defaultKeychain, .loginKeychain, .searchList, .searchListStates, .state, .settings, .search,
             .firstMatch, .allItems, .certificates, .exportItems:
            true
        default:
            false
        }
    }
}

public enum Response: Sendable {
    case done
    case reference(KeychainReference)
    case references([KeychainReference])
    case state(KeychainState)
    case listedKeychains([ListedKeychain])
    case settings(KeychainSettings)
    case count(Int)
    case found(FoundItem)
    case items([FoundItem])
    case listMatch(SearchListMatch)
    case failure(KeychainError)
    /// Pushed on a subscribed connection.
    case event(KeychainEvent)
    /// The result of a key operation (a signature, a plaintext, a shared secret, a public key).
    case secret(SecretBytes)
    /// A generated, stored key pair.
    case keyPair(GeneratedKeyPair)
    case certificates([CertificateRecord])
    case backupReport(BackupReport)
    case importReport(ImportReport)
    case syncReport(SyncReport)
    /// Sent as its JSON form (what `security access-log --json` prints).
    case accessLogReport(AccessLogReport)
    /// Before the answer to a long request (a backup, a restore): how far it got. Any number may come; the
    /// answer follows.
    case progress(done: Int64, total: Int64)
    /// The answer to a session: something the client's user should read (a program left out of its access groups,
    /// and how to let it in). Shown once per process on standard error.
    case notice(String)

    public func encode() -> [UInt8] {
        var w = WireWriter()
        switch self {
        case .done: w.byte(1)
        case .reference(let r): w.byte(2); w.reference(r)
        case .references(let list):
            w.byte(3)
            w.int(Int64(list.count))
            for r in list { w.reference(r) }
        case .state(let s): w.byte(4); w.state(s)
        case .listedKeychains(let list):
            w.byte(20)
            w.int(Int64(list.count))
            for listed in list { w.reference(listed.keychain); w.state(listed.state) }
        case .settings(let s): w.byte(5); w.settings(s)
        case .count(let n): w.byte(6); w.int(Int64(n))
        case .found(let f): w.byte(7); w.found(f)
        case .items(let list):
            w.byte(8)
            w.int(Int64(list.count))
            for f in list { w.found(f) }
        case .listMatch(.found(let keychain, let list)):
            w.byte(21)
            w.bool(true)
            w.reference(keychain)
            w.int(Int64(list.count))
            for f in list { w.found(f) }
        case .listMatch(.callerWalks): w.byte(21); w.bool(false)
        case .failure(let e): w.byte(9); w.error(e)
        case .progress(let done, let total): w.byte(18); w.int(done); w.int(total)
        case .notice(let text): w.byte(19); w.string(text)
        case .event(let e): w.byte(10); w.int(Int64(e.kind.rawValue)); w.optionalString(e.keychain); w.int(Int64(e.pid))
        case .secret(let s): w.byte(11); w.secret(s)
        case .keyPair(let pair): w.byte(12); w.found(pair.privateKey); w.blob(pair.publicKey)
        case .backupReport(let report):
            w.byte(14)
            for n in [report.items, report.thisDeviceOnly, report.kept, report.skippedOtherDevice, report.leftOutPasscode,
                      report.leftOutApplicationPassword] { w.int(Int64(n)) }
        case .accessLogReport(let report):
            w.byte(17)
            w.blob((try? JSONEncoder().encode(report)) ?? Data())
        case .syncReport(let report):
            w.byte(16)
            w.string(report.server); w.string(report.account); w.string(report.device)
            for n in [report.epoch, report.items, report.sent, report.received, report.deleted, report.conflicts] {
                w.int(Int64(n))
            }
            w.bool(report.lastSync != nil); w.milliseconds(report.lastSync ?? 0)
            w.optionalSecret(report.recoveryKey)
            w.int(Int64(report.devices)); w.optionalString(report.joinCode); w.bool(report.joined)
            w.int(Int64(report.words.count))
            for word in report.words { w.string(word) }
            w.int(Int64(report.deviceList.count))
            for device in report.deviceList { w.string(device.id); w.string(device.approvedBy); w.bool(device.isThisDevice) }
        case .importReport(let report):
            w.byte(15)
            w.int(Int64(report.added.count))
            for (code, n) in report.added.sorted(by: { $0.key < $1.key }) { w.string(code); w.int(Int64(n)) }
            w.int(Int64(report.alreadyThere))
            w.int(Int64(report.failures.count))
            for failure in report.failures {
                w.string(failure.name); w.int(Int64(failure.status.rawValue)); w.string(failure.message)
            }
        case .certificates(let list):
            w.byte(13)
            w.int(Int64(list.count))
            for c in list {
                w.found(c.item); w.blob(c.sha1); w.blob(c.sha256); w.optionalString(c.commonName)
                w.int(Int64(c.emailAddresses.count))
                for address in c.emailAddresses { w.string(address) }
                w.optionalString(c.subjectSummary); w.bool(c.hasPrivateKey)
                for time in [c.notBefore, c.notAfter] {
                    w.bool(time != nil)
                    if let time { w.seconds(time.timeIntervalSince1970) }
                }
            }
        }
        return w.finish()
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> Response {
        var r = WireReader(bytes)
        let response: Response
        switch try r.byte() {
        case 1: response = .done
        case 2: response = .reference(try r.reference())
        case 3:
            let n = try r.elementCount()
            var list: [KeychainReference] = []
            for _ in 0..<n { list.append(try r.reference()) }
            response = .references(list)
        case 4: response = .state(try r.state())
        case 20:
            let n = try r.elementCount()
            var list: [ListedKeychain] = []
            for _ in 0..<n { list.append(ListedKeychain(try r.reference(), try r.state())) }
            response = .listedKeychains(list)
        case 5: response = .settings(try r.settings())
        case 6:
            let n = try r.int()
            guard let count = Int(exactly: n), count >= 0 else { throw .malformed("count") }
            response = .count(count)
        case 7: response = .found(try r.found())
        case 8:
            let n = try r.elementCount()
            var list: [FoundItem] = []
            for _ in 0..<n { list.append(try r.found()) }
            response = .items(list)
        case 21:
            guard try r.bool() else {
                response = .listMatch(.callerWalks)
                break
            }
            let keychain = try r.reference()
            let n = try r.elementCount()
            var list: [FoundItem] = []
            for _ in 0..<n { list.append(try r.found()) }
            response = .listMatch(.found(keychain, list))
        case 9: response = .failure(try r.error())
        case 18:
            let done = try r.int(), total = try r.int()
            guard done >= 0, total >= 0 else { throw .malformed("progress") }
            response = .progress(done: done, total: total)
        case 19: response = .notice(try r.string())
        case 10:
            guard let raw = UInt32(exactly: try r.int()), let kind = KeychainEvent.Kind(rawValue: raw) else {
                throw .malformed("event")
            }
            let keychain = try r.optionalString()
            guard let pid = Int32(exactly: try r.int()) else { throw .malformed("event") }
            response = .event(KeychainEvent(kind: kind, keychain: keychain, pid: pid))
        case 11: response = .secret(try r.secret())
        case 12: response = .keyPair(GeneratedKeyPair(privateKey: try r.found(), publicKey: Data(try r.blob())))
        case 13:
            let n = try r.elementCount()
            var list: [CertificateRecord] = []
            for _ in 0..<n {
                let item = try r.found()
                let sha1 = Data(try r.blob()), sha256 = Data(try r.blob())
                let commonName = try r.optionalString()
                let addressCount = try r.elementCount()
                var addresses: [String] = []
                for _ in 0..<addressCount { addresses.append(try r.string()) }
                let summary = try r.optionalString()
                let hasPrivateKey = try r.bool()
                var times: [Date?] = []
                for _ in 0..<2 { times.append(try r.bool() ? Date(timeIntervalSince1970: try r.seconds()) : nil) }
                list.append(CertificateRecord(item: item, sha1: sha1, sha256: sha256, commonName: commonName,
                                              emailAddresses: addresses, subjectSummary: summary,
                                              hasPrivateKey: hasPrivateKey, notBefore: times[0], notAfter: times[1]))
            }
            response = .certificates(list)
        case 14:
            var counts: [Int] = []
            for _ in 0..<6 {
                guard let n = Int(exactly: try r.int()), n >= 0 else { throw .malformed("backup report") }
                counts.append(n)
            }
            response = .backupReport(BackupReport(items: counts[0], thisDeviceOnly: counts[1], kept: counts[2],
                                                  skippedOtherDevice: counts[3], leftOutPasscode: counts[4],
                                                  leftOutApplicationPassword: counts[5]))
        case 17:
            guard let report = try? JSONDecoder().decode(AccessLogReport.self, from: Data(try r.blob())) else {
                throw .malformed("access log report")
            }
            response = .accessLogReport(report)
        case 16:
            let server = try r.string(), account = try r.string(), device = try r.string()
            var counts: [Int] = []
            for _ in 0..<6 {
                guard let n = Int(exactly: try r.int()), n >= 0 else { throw .malformed("sync report") }
                counts.append(n)
            }
            let hasLast = try r.bool()
            let last = try r.milliseconds()
            var report = SyncReport(server: server, account: account, device: device, epoch: counts[0],
                                    items: counts[1], sent: counts[2], received: counts[3], deleted: counts[4],
                                    conflicts: counts[5], lastSync: hasLast ? last : nil,
                                    recoveryKey: try r.optionalSecret())
            guard let devices = Int(exactly: try r.int()), devices >= 0 else { throw .malformed("sync report") }
            report.devices = devices
            report.joinCode = try r.optionalString()
            report.joined = try r.bool()
            for _ in 0..<(try r.elementCount()) { report.words.append(try r.string()) }
            for _ in 0..<(try r.elementCount()) {
                report.deviceList.append(SyncDevice(id: try r.string(), approvedBy: try r.string(),
                                                    isThisDevice: try r.bool()))
            }
            response = .syncReport(report)
        case 15:
            var report = ImportReport()
            for _ in 0..<(try r.elementCount()) {
                let code = try r.string()
                guard let n = Int(exactly: try r.int()), n >= 0 else { throw .malformed("import report") }
                report.added[code] = n
            }
            guard let there = Int(exactly: try r.int()), there >= 0 else { throw .malformed("import report") }
            report.alreadyThere = there
            for _ in 0..<(try r.elementCount()) {
                let name = try r.string()
                guard let status = Int32(exactly: try r.int()) else { throw .malformed("import report") }
                report.failures.append(.init(name: name, status: KeychainStatus(status), message: try r.string()))
            }
            response = .importReport(report)
        default: throw .malformed("response")
        }
        guard r.atEnd else { throw .malformed("response (trailing bytes)") }
        return response
    }
}

extension Request {
    /// The client's session (where its user can be asked): the one frame a client sends along with its greeting.
    public var isSession: Bool {
        if case .session = self { return true }
        return false
    }
}
