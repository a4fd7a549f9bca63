import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage
import KeychainWire

/// The access log's side of serving: the decisions a call made, completed with who made it, written before its
/// answer goes out (docs/ACCESS-LOG.md).
extension KeychainDaemonServer {
    /// Runs `body` with a trail bound, so that storage and the Asker note every decision about an item on it.
    func tracingDecisions<T>(_ body: () throws -> T) rethrows -> (T, [AccessLogRecord]) {
        let trail = AccessTrail()
        let result = try AccessTrail.$current.withValue(trail) { try body() }
        return (result, trail.take())
    }

    /// Who a record says called: worked out once per connection (the digest's hex is not free).
    struct LoggedCaller: Sendable {
        let program: String
        let digest: String
        let pid: Int32
        let door: AccessLogRecord.FrontEnd

        init(peer: PeerIdentity, caller: Caller, door: AccessLogRecord.FrontEnd? = nil) {
            program = caller.application?.path ?? peer.executable ?? ""
            digest = peer.executableDigest.map { Hex.string($0) } ?? ""
            pid = peer.pid
            self.door = door ?? KeychainDaemonServer.frontEnd(of: caller)
        }
    }

    /// Writes what a call decided, with the program, its process and its door filled in. A failed item call that
    /// decided about no item is written as one record with its status (a refused group, a duplicate); a search that
    /// found nothing is not. Nil when written; else the error the call must answer instead (no answer goes out
    /// that the log does not hold).
    ///
    /// - Parameter keychain: the keychain a failed item call named (asked only then), nil for none.
    func log(_ records: [AccessLogRecord], failure: KeychainError?, keychain: () -> String?,
             by caller: LoggedCaller) -> KeychainError? {
        var records = records
        if records.isEmpty, let failure, failure.status != .itemNotFound, let keychain = keychain() {
            records = [AccessLogRecord(time: Date(), keychain: keychain, action: .call, outcome: .failed,
                                       status: failure.status.rawValue)]
        }
        guard !records.isEmpty else { return nil }
        for index in records.indices {
            records[index].program = caller.program
            records[index].digest = caller.digest
            records[index].pid = caller.pid
            records[index].frontEnd = caller.door
        }
        do throws(KeychainError) {
            try accessLog.record(records)
            return nil
        } catch {
            return KeychainError(.io, "the access log cannot be written, so keychaind answers nothing: \(error.message)")
        }
    }

    /// The door a socket client came through: the keychain's own tools by their group, anything else through the
    /// Security API (or the native one, which is the same door).
    static func frontEnd(of caller: Caller) -> AccessLogRecord.FrontEnd {
        guard caller.hasWildcard else { return .securityAPI }
        switch caller.accessGroups.first {
        case "security": return .securityCommand
        case "git-credential-keychain": return .git
        case "docker-credential-keychain": return .docker
        default: return .securityAPI
        }
    }

    /// The keychain an item request names (nil: the default keychain, as the service resolves it), or nil for a
    /// request that is not about items.
    static func itemKeychain(of request: Request, service: EmbeddedKeychainService) -> String? {
        let named: KeychainReference?
        switch request {
        case .add(_, let r), .search(_, let r), .update(_, _, let r), .delete(_, let r), .upsert(_, _, let r),
             .replaceAll(_, _, let r), .useKey(_, _, let r), .exportItems(_, let r), .certificates(_, let r),
             .importItems(_, let r), .generateKeyPair(_, let r):
            named = r
        case .allItems(let r, _), .backUp(let r, _, _), .restore(_, _, let r), .sync(_, let r): named = r
        case .importSecrets(_, let r): named = r
        case .firstMatch: named = nil  // a failure's keychain is not told: the default one, the list's first
        case .accessLog: named = KeychainReference(path: service.locations.loginKeychain.path)
        default: return nil
        }
        return (named ?? service.defaultKeychain()).path
    }

    /// The login keychain gets the log's private key once it is open and unlocked: at start (a keychain without a
    /// password), and at its unlock (``publish(_:)``).
    /// Cheap while there is no login keychain yet (one `access(2)`): it runs after every call until the key is kept.
    func accessLogKeyReady() {
        // At its standard place (see EmbeddedKeychainService.accessLog): never a keychain the preference names.
        let login = loginKeychainPath
        guard access(login, F_OK) == 0,
              case .success(let file) = Result(catching: { () throws(KeychainError) in
                  try keychains.file(at: URL(fileURLWithPath: login), configuration: fileConfiguration,
                                     createWithPassword: nil, create: false)
              })
        else { return }
        accessLog.keyReady(in: file)
    }
}
