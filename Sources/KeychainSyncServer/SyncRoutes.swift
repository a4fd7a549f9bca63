import Crypto
import Foundation
import Hummingbird
import KeychainSyncProtocol
import Logging
import NIOCore

/// The HTTP API (docs/SYNC-PROTOCOL.md). Every `/v1` request is signed by a device; bad input is a 4xx with a reason
/// and changes nothing.
struct SyncRoutes: Sendable {
    let store: SyncStore
    let notifier: ChangeNotifier
    let clock: @Sendable () -> Date
    /// The operator's registration token, if account creation needs one.
    var registrationToken: [UInt8]? = nil
    /// The largest request body: one item's ciphertext with its JSON and base64 around it.
    static let maxBody = SyncLimits.maxCiphertext * 4 / 3 + 4096

    func register(on router: Router<BasicRequestContext>) {
        router.get("/health") { _, _ in
            do {
                try await store.ping()
                return Self.text(.ok, "ok\n")
            } catch {
                return Self.text(.serviceUnavailable, "database unavailable\n")
            }
        }
        router.post("/v1/accounts") { request, context in
            await Self.answer(context.logger) { try await createAccount(request) }
        }
        router.get("/v1/accounts/:account/changes") { request, context in
            await Self.answer(context.logger) { try await changes(request, context) }
        }
        router.get("/v1/accounts/:account/devices") { request, context in
            await Self.answer(context.logger) { try await devices(request, context) }
        }
        router.put("/v1/accounts/:account/items/:item") { request, context in
            await Self.answer(context.logger) { try await writeItem(request, context) }
        }
        router.delete("/v1/accounts/:account/items/:item") { request, context in
            await Self.answer(context.logger) { try await deleteItem(request, context) }
        }
        router.post("/v1/accounts/:account/devices") { request, context in
            await Self.answer(context.logger) { try await addToLog(request, context) }
        }
        router.get("/v1/accounts/:account/shares") { request, context in
            await Self.answer(context.logger) { try await shares(request, context) }
        }
        router.post("/v1/joins") { request, context in
            await Self.answer(context.logger) { try await createJoin(request) }
        }
        router.get("/v1/joins/:code") { request, context in
            await Self.answer(context.logger) { try await joinStatus(request, context) }
        }
        router.post("/v1/joins/:code/claim") { request, context in
            await Self.answer(context.logger) { try await claimJoin(request, context) }
        }
    }

    // MARK: Devices

    private func createJoin(_ request: Request) async throws -> Response {
        let body = try await Self.body(of: request)
        let join = try Self.decode(JoinRequest.self, body)
        guard join.device.id.count == SyncLimits.idLength,
              (try? P256.Signing.PublicKey(x963Representation: join.device.signingKey)) != nil,
              join.device.agreementKey.count == 32
        else { throw Refusal(.badRequest, "malformed device") }
        // Signed by the key it registers; its nonces are kept under the device's id.
        let signature = try signature(of: request, account: join.device.id)
        guard signature.device == join.device.id,
              signature.isValid(method: "POST", target: Self.target(request), body: Data(body.readableBytesView),
                                publicKey: join.device.signingKey)
        else { throw Refusal(.unauthorized, "the request is not signed by the device that asks to join") }
        try await useNonce(signature, scope: join.device.id)
        switch try await store.createJoin(join, now: clock()) {
        case .ticket(let ticket): return Self.json(.created, ticket)
        case .full: throw Refusal(.serviceUnavailable, "too many devices are waiting to join; try again later")
        }
    }

    private func joinStatus(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let code = try Self.code(context)
        guard let join = try await store.join(code) else { throw Refusal(.notFound, "no such join code") }
        guard !join.expired || join.approved else { throw Refusal(.gone, "the join code expired") }
        // Only the device that asked to join may read its status (signed with its key).
        let signature = try signature(of: request, account: join.device.id)
        guard signature.device == join.device.id,
              signature.isValid(method: "GET", target: Self.target(request), body: Data(),
                                publicKey: join.device.signingKey)
        else { throw Refusal(.unauthorized, "only the joining device reads its join") }
        try await useNonce(signature, scope: join.device.id)
        let claim = join.claim.flatMap { try? JSONDecoder().decode(JoinClaim.self, from: $0) }
        return Self.json(.ok, JoinStatus(device: join.device, claim: claim, approved: join.approved))
    }

    private func claimJoin(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let code = try Self.code(context)
        let body = try await Self.body(of: request)
        let claim = try Self.decode(JoinClaim.self, body)
        guard claim.account.count == SyncLimits.idLength, claim.log.count <= 10_000 else {
            throw Refusal(.badRequest, "malformed claim")
        }
        let device = try await authenticate(request, account: claim.account, body: body)
        guard device.id == claim.approver else { throw Refusal(.badRequest, "the claim names another approver") }
        switch try await store.claimJoin(code, account: claim.account, claim: Data(body.readableBytesView)) {
        case .claimed(let joining): return Self.json(.ok, JoinStatus(device: joining, claim: claim, approved: false))
        case .noJoin: throw Refusal(.notFound, "no such join code, or it expired")
        case .takenByAnother: throw Refusal(.conflict, "another account claimed this join")
        }
    }

    private func addToLog(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let account = try Self.id(context, "account")
        let body = try await Self.body(of: request)
        let device = try await authenticate(request, account: account, body: body)
        let addition = try Self.decode(DeviceAddition.self, body)
        guard let entry = DeviceLogEntry(encoded: addition.entry.entry), entry.kind != .genesis,
              entry.account == account, entry.device.id.count == SyncLimits.idLength,
              (try? P256.Signing.PublicKey(x963Representation: entry.device.signingKey)) != nil,
              entry.device.agreementKey.count == 32
        else { throw Refusal(.badRequest, "not an entry that adds or removes a device of this account") }
        guard addition.entry.signer == device.id, addition.entry.isSigned(by: device.signingKey) else {
            throw Refusal(.badRequest, "the entry is not signed by the device that sends it")
        }
        guard addition.shares.count <= 1024,
              addition.shares.allSatisfy({ $0.account == account && $0.signer == device.id && $0.ciphertext.count <= 256 })
        else { throw Refusal(.badRequest, "malformed key shares") }
        switch try await store.appendToLog(account: account, entry: entry, signed: addition.entry,
                                           shares: addition.shares, join: addition.join) {
        case .added: return Self.json(.created, SyncErrorBody(reason: "added"))
        case .notNext: throw Refusal(.conflict, "the entry does not follow the device log's last entry")
        case .known: throw Refusal(.conflict, "the device is in the account already")
        case .badJoin: throw Refusal(.notFound, "no such join for this account and device, or it expired")
        case .noAccount: throw Refusal(.notFound, "no such account")
        }
    }

    private func shares(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let account = try Self.id(context, "account")
        let device = try await authenticate(request, account: account, body: ByteBuffer())
        return Self.json(.ok, try await store.shares(account: account, device: device.id))
    }

    static func code(_ context: BasicRequestContext) throws -> String {
        guard let code = context.parameters.get("code"), code.count == 10,
              code.allSatisfy({ "0123456789ABCDEFGHJKMNPQRSTVWXYZ".contains($0) })
        else { throw Refusal(.badRequest, "a join code is ten characters") }
        return code
    }

    private func useNonce(_ signature: RequestSignature, scope: Data) async throws {
        guard try await store.useNonce(account: scope, nonce: signature.nonce, expires: nonceExpiry())
        else { throw Refusal(.unauthorized, "the request was replayed") }
    }

    /// A nonce is kept while a request carrying it could still be inside the signature's time window.
    private func nonceExpiry() -> Date { clock().addingTimeInterval(Double(2 * SyncLimits.signatureWindow)) }

    // MARK: Handlers

    private func createAccount(_ request: Request) async throws -> Response {
        if let registrationToken {
            let wanted = Self.registrationTokenHeader.lowercased()
            let given = Array((request.headers.first { $0.name.canonicalName == wanted }?.value ?? "").utf8)
            guard Self.constantTimeEqual(given, registrationToken) else {
                throw Refusal(.forbidden, "this server makes accounts only with its registration token")
            }
        }
        let body = try await Self.body(of: request)
        let creation = try Self.decode(AccountCreation.self, body)
        guard creation.account.count == SyncLimits.idLength, creation.device.id.count == SyncLimits.idLength,
              (try? P256.Signing.PublicKey(x963Representation: creation.device.signingKey)) != nil,
              creation.device.agreementKey.count == 32
        else { throw Refusal(.badRequest, "malformed account or device") }
        guard let genesis = DeviceLogEntry(encoded: creation.genesis.entry), genesis.kind == .genesis,
              genesis.seq == 0, genesis.previous == Data(count: 32), genesis.account == creation.account,
              genesis.device == creation.device, creation.genesis.signer == creation.device.id,
              creation.genesis.isSigned(by: creation.device.signingKey)
        else { throw Refusal(.badRequest, "the device log's first entry is not the device's own, signed") }
        guard (creation.shares ?? []).count <= 4,
              (creation.shares ?? []).allSatisfy({ $0.account == creation.account && $0.signer == creation.device.id })
        else { throw Refusal(.badRequest, "malformed key shares") }
        // The request itself must be signed by the device it registers: proof that the caller holds its key.
        let signature = try signature(of: request, account: creation.account)
        guard signature.device == creation.device.id,
              signature.isValid(method: "POST", target: Self.target(request), body: Data(body.readableBytesView),
                                publicKey: creation.device.signingKey)
        else { throw Refusal(.unauthorized, "the request is not signed by the device it registers") }
        guard try await store.useNonce(account: creation.account, nonce: signature.nonce,
                                       expires: clock().addingTimeInterval(Double(2 * SyncLimits.signatureWindow)))
        else { throw Refusal(.unauthorized, "the request was replayed") }
        switch try await store.createAccount(creation) {
        case .created: return Self.json(.created, SyncErrorBody(reason: "created"))
        case .exists: throw Refusal(.conflict, "the account exists")
        }
    }

    private func changes(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let account = try Self.id(context, "account")
        try await authenticate(request, account: account, body: ByteBuffer())
        let query = request.uri.queryParameters
        guard let after = query["after"].map({ Int64(String($0)) }) ?? 0, after >= 0 else {
            throw Refusal(.badRequest, "after must be a change number")
        }
        guard let limit = query["limit"].map({ Int(String($0)) }) ?? SyncLimits.maxPage,
              (1...SyncLimits.maxPage).contains(limit)
        else { throw Refusal(.badRequest, "limit must be 1 to \(SyncLimits.maxPage)") }
        // wait=S: with nothing after `after`, hold the request up to S seconds for the account's next change.
        guard let wait = query["wait"].map({ Int(String($0)) }) ?? 0, (0...SyncLimits.maxWait).contains(wait) else {
            throw Refusal(.badRequest, "wait must be 0 to \(SyncLimits.maxWait) seconds")
        }
        let waiter = wait > 0 ? notifier.register(account) : nil
        defer { if let waiter { notifier.unregister(waiter, account: account) } }
        var outcome = try await store.changes(account: account, after: after, limit: limit)
        if let waiter, case .page(let page) = outcome, page.changes.isEmpty {
            await waiter.wait(timeout: .seconds(wait))
            outcome = try await store.changes(account: account, after: after, limit: limit)
        }
        switch outcome {
        case .page(let page): return Self.json(.ok, page)
        case .resync: throw Refusal(.gone, "tombstones after \(after) were forgotten: sync again from 0")
        case .noAccount: throw Refusal(.notFound, "no such account")
        }
    }

    private func devices(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let account = try Self.id(context, "account")
        try await authenticate(request, account: account, body: ByteBuffer())
        return Self.json(.ok, try await store.deviceLog(account: account))
    }

    private func writeItem(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await write(request, context, deleted: false)
    }

    /// A delete carries the item's sealed tombstone (docs/SYNC-PROTOCOL.md): the server keeps it in the row.
    private func deleteItem(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await write(request, context, deleted: true)
    }

    private func write(_ request: Request, _ context: BasicRequestContext, deleted: Bool) async throws -> Response {
        let account = try Self.id(context, "account")
        let item = try Self.id(context, "item")
        let body = try await Self.body(of: request)
        // The nonce is recorded inside the write's own transaction (one commit per write, not two).
        let caller = try await authenticate(request, account: account, body: body, recordingNonce: false)
        let write = try Self.decode(ItemWrite.self, body)
        guard write.base >= 0, write.epoch >= 1, !deleted || write.base >= 1 else {
            throw Refusal(.badRequest, "base and epoch out of range")
        }
        guard write.ciphertext.count <= SyncLimits.maxCiphertext, write.ciphertext.count >= 512 + 28 else {
            throw Refusal(.contentTooLarge, "an item's ciphertext is 540 bytes to \(SyncLimits.maxCiphertext)")
        }
        return try Self.outcome(await store.write(account: account, id: item, base: write.base, epoch: write.epoch,
                                                  ciphertext: write.ciphertext, deleted: deleted,
                                                  nonce: caller.nonce, nonceExpires: nonceExpiry()))
    }

    // MARK: Signatures

    private func signature(of request: Request, account: Data) throws -> RequestSignature {
        guard let header = request.headers[.authorization], let signature = RequestSignature(header: header) else {
            throw Refusal(.unauthorized, "the request is not signed")
        }
        let now = Int64(clock().timeIntervalSince1970)
        // Any Int64 parses: the difference must not overflow (a trap here would end the server for everyone).
        let (difference, overflow) = signature.time.subtractingReportingOverflow(now)
        guard !overflow, difference.magnitude <= UInt64(SyncLimits.signatureWindow) else {
            throw Refusal(.unauthorized, "the request's time is too far from the server's")
        }
        return signature
    }

    /// Checks the request's signature, time and nonce against a device of the account that is not revoked; that
    /// device's id and signing key, and the request's nonce. Without `recordingNonce` the caller records the nonce
    /// itself (a write, in its transaction) and refuses the request if it was used.
    @discardableResult
    private func authenticate(_ request: Request, account: Data, body: ByteBuffer, recordingNonce: Bool = true)
        async throws -> (id: Data, signingKey: Data, nonce: Data)
    {
        let signature = try signature(of: request, account: account)
        guard let device = try await store.device(account: account, id: signature.device) else {
            throw Refusal(.unauthorized, "no such device in this account")
        }
        guard !device.revoked else { throw Refusal(.forbidden, "this device was removed from the account") }
        guard signature.isValid(method: request.method.rawValue, target: Self.target(request),
                                body: Data(body.readableBytesView), publicKey: device.signingKey)
        else { throw Refusal(.unauthorized, "the signature does not match") }
        if recordingNonce { try await useNonce(signature, scope: account) }
        return (signature.device, device.signingKey, signature.nonce)
    }

    // MARK: Plumbing

    struct Refusal: Error {
        let status: HTTPResponse.Status
        let reason: String
        init(_ status: HTTPResponse.Status, _ reason: String) {
            self.status = status
            self.reason = reason
        }
    }

    static func target(_ request: Request) -> String { request.uri.description }

    static let registrationTokenHeader = syncRegistrationTokenHeader

    /// Equal bytes, in a time that depends on the lengths only.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }

    static func id(_ context: BasicRequestContext, _ name: String) throws -> Data {
        guard let text = context.parameters.get(name), text.count == 2 * SyncLimits.idLength,
              let id = Data(hex: text)
        else { throw Refusal(.badRequest, "\(name) must be \(SyncLimits.idLength) bytes in hex") }
        return id
    }

    static func body(of request: Request) async throws -> ByteBuffer {
        do {
            return try await request.body.collect(upTo: maxBody)
        } catch {
            throw Refusal(.contentTooLarge, "the request is larger than \(maxBody) bytes")
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ body: ByteBuffer) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(body.readableBytesView))
        } catch {
            throw Refusal(.badRequest, "the body is not a valid \(T.self)")
        }
    }

    static func outcome(_ outcome: SyncStore.WriteOutcome) throws -> Response {
        switch outcome {
        case .accepted(let accepted): return json(.ok, accepted)
        case .conflict(let current):
            return json(.conflict, WriteConflict(reason: "the item changed on the server", current: current))
        case .staleEpoch(let epoch):
            throw Refusal(.preconditionFailed, "the account is at epoch \(epoch): take its key from the device log")
        case .accountFull: throw Refusal(.init(code: 507, reasonPhrase: "Insufficient Storage"), "the account holds \(SyncLimits.maxItemsPerAccount) items")
        case .noAccount: throw Refusal(.notFound, "no such account")
        case .replayed: throw Refusal(.unauthorized, "the request was replayed")
        }
    }

    static func answer(_ logger: Logger, _ handler: () async throws -> Response) async -> Response {
        do {
            return try await handler()
        } catch let refusal as Refusal {
            return json(refusal.status, SyncErrorBody(reason: refusal.reason))
        } catch {
            logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            return json(.internalServerError, SyncErrorBody(reason: "the server failed; try again"))
        }
    }

    static func json(_ status: HTTPResponse.Status, _ value: some Encodable) -> Response {
        let data = (try? JSONEncoder().encode(value)) ?? Data("{}".utf8)
        return Response(status: status, headers: [.contentType: "application/json"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func text(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(status: status, headers: [.contentType: "text/plain; charset=utf-8"],
                 body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}
