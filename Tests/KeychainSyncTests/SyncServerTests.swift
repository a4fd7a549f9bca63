import AsyncHTTPClient
import Crypto
import Foundation
import KeychainSyncProtocol
import NIOCore
import NIOHTTP1
import Testing

/// keychain-sync-server against a real PostgreSQL, spoken to as a device would (and as a device must not).
@Suite("Sync server", .serialized)
struct SyncServerTests {
    /// A device as the server sees it: an id and a signing key; requests signed or not, as a test wants.
    struct Client: Sendable {
        let base: String
        var account = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        var device = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        var key = P256.Signing.PrivateKey()
        var agreement = Curve25519.KeyAgreement.PrivateKey()

        init(base: String) { self.base = base }

        /// The same device, through another server.
        init(base: String, sharing other: Client) {
            self.base = base
            account = other.account
            device = other.device
            key = other.key
            agreement = other.agreement
        }

        var record: DeviceRecord {
            DeviceRecord(id: device, signingKey: key.publicKey.x963Representation,
                         agreementKey: agreement.publicKey.rawRepresentation)
        }

        struct Reply {
            var status: Int
            var body: Data
            func decoded<T: Decodable>(_: T.Type) throws -> T { try JSONDecoder().decode(T.self, from: body) }
        }

        func send(_ method: HTTPMethod, _ path: String, body: Data? = nil, signature: RequestSignature? = nil,
                  signed: Bool = true, signer: P256.Signing.PrivateKey? = nil) async throws -> Reply {
            var request = HTTPClientRequest(url: base + path)
            request.method = method
            if signed {
                let header = try signature ?? RequestSignature.sign(method: method.rawValue, target: path,
                                                                    body: body ?? Data(), device: device,
                                                                    key: signer ?? key)
                request.headers.add(name: "Authorization", value: header.headerValue)
            }
            if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            let bytes = try await response.body.collect(upTo: 8 << 20)
            return Reply(status: Int(response.status.code), body: Data(bytes.readableBytesView))
        }

        func createAccount() async throws -> Reply {
            let genesis = try DeviceLogEntry(kind: .genesis, seq: 0, previous: Data(count: 32), account: account,
                                             device: record, epoch: 1, time: 0).signed(by: device, key: key)
            let body = try JSONEncoder().encode(AccountCreation(account: account, device: record, genesis: genesis))
            return try await send(.POST, "/v1/accounts", body: body)
        }

        func put(_ item: Data, base: Int64, size: Int = 540) async throws -> Reply {
            let body = try JSONEncoder().encode(ItemWrite(base: base, epoch: 1, ciphertext: Data(count: size)))
            return try await send(.PUT, "/v1/accounts/\(account.hexString)/items/\(item.hexString)", body: body)
        }

        /// A delete: the tombstone is sealed by the device; the server only needs a ciphertext of the right size.
        func delete(_ item: Data, base: Int64) async throws -> Reply {
            let body = try JSONEncoder().encode(ItemWrite(base: base, epoch: 1, ciphertext: Data(count: 540)))
            return try await send(.DELETE, "/v1/accounts/\(account.hexString)/items/\(item.hexString)", body: body)
        }

        func changes(after: Int64) async throws -> Reply {
            try await send(.GET, "/v1/accounts/\(account.hexString)/changes?after=\(after)")
        }
    }

    static func withServer(_ extra: [String] = [],
                           _ body: (PostgresCluster, SyncServerProcess) async throws -> Void) async throws {
        let database = try PostgresCluster()
        defer { database.stop() }
        let server = try SyncServerProcess(database: database, extra: extra)
        defer { server.stop() }
        try await body(database, server)
    }

    @Test("the schema is made once, with its migrations recorded; /health and /metrics answer")
    func schemaHealthAndMetrics() async throws {
        try await Self.withServer { database, server in
            #expect(try database.sql("SELECT version FROM schema_migrations ORDER BY version")
                .split(separator: "\n") == ["1", "2", "3", "4"])
            // A second instance on the same database finds nothing to migrate and serves beside the first.
            let second = try SyncServerProcess(database: database)
            defer { second.stop() }
            #expect(try database.sql("SELECT count(*) FROM schema_migrations") == "4\n")
            let client = Client(base: server.url)
            let health = try await client.send(.GET, "/health", signed: false)
            #expect(health.status == 200)
            _ = try await client.createAccount()
            let metrics = try await client.send(.GET, "/metrics", signed: false)
            #expect(metrics.status == 200)
            #expect(String(decoding: metrics.body, as: UTF8.self).contains("hb_requests"))
        }
    }

    @Test("requests are signed by a device of the account, once, on time; anything else is 401 and changes nothing")
    func signedRequestsOnly() async throws {
        try await Self.withServer { database, server in
            let client = Client(base: server.url)
            #expect(try await client.createAccount().status == 201)
            #expect(try await client.createAccount().status != 201)  // the same account again: a replay or 409
            let item = Data(repeating: 7, count: 16)
            let path = "/v1/accounts/\(client.account.hexString)/items/\(item.hexString)"
            let body = try JSONEncoder().encode(ItemWrite(base: 0, epoch: 1, ciphertext: Data(count: 540)))

            #expect(try await client.send(.PUT, path, body: body, signed: false).status == 401)
            // Signed by a key the account does not know.
            #expect(try await client.send(.PUT, path, body: body, signer: P256.Signing.PrivateKey()).status == 401)
            // Signed over another body.
            let other = try RequestSignature.sign(method: "PUT", target: path, body: Data("{}".utf8),
                                                  device: client.device, key: client.key)
            #expect(try await client.send(.PUT, path, body: body, signature: other).status == 401)
            // Ten minutes late.
            let late = try RequestSignature.sign(method: "PUT", target: path, body: body, device: client.device,
                                                 key: client.key, now: Date().addingTimeInterval(-600))
            #expect(try await client.send(.PUT, path, body: body, signature: late).status == 401)
            // A time whose difference from the server's clock overflows: refused, and the server is still there.
            let overflowing = RequestSignature(device: client.device, time: Int64.min, nonce: Data(count: 16),
                                               signature: Data(count: 64))
            #expect(try await client.send(.PUT, path, body: body, signature: overflowing).status == 401)
            #expect(try await client.send(.GET, "/health", signed: false).status == 200)
            #expect(try database.sql("SELECT count(*) FROM items").hasPrefix("0"))

            // The same signed request twice: the second is a replay.
            let once = try RequestSignature.sign(method: "PUT", target: path, body: body, device: client.device,
                                                 key: client.key)
            #expect(try await client.send(.PUT, path, body: body, signature: once).status == 200)
            let replay = try await client.send(.PUT, path, body: body, signature: once)
            #expect(replay.status == 401)
            #expect(try replay.decoded(SyncErrorBody.self).reason.contains("replayed"))
            // The replay wrote nothing (its nonce is recorded in the write's own transaction).
            #expect(try database.sql("SELECT last_seq FROM accounts WHERE id = '\\x\(client.account.hexString)'")
                .hasPrefix("1"))
            // A write that lost (409) used its nonce all the same: sent again, it is a replay, not another try.
            let losing = try RequestSignature.sign(method: "PUT", target: path, body: body, device: client.device,
                                                   key: client.key)
            #expect(try await client.send(.PUT, path, body: body, signature: losing).status == 409)
            #expect(try await client.send(.PUT, path, body: body, signature: losing).status == 401)
            // Another account's device cannot reach this account.
            let stranger = Client(base: server.url)
            #expect(try await stranger.createAccount().status == 201)
            let foreign = try await stranger.send(.GET, "/v1/accounts/\(client.account.hexString)/changes?after=0")
            #expect(foreign.status == 401)
            // A revoked device is refused.
            _ = try database.sql("UPDATE devices SET revoked = true WHERE id = '\\x\(client.device.hexString)'")
            #expect(try await client.changes(after: 0).status == 403)
        }
    }

    @Test("writes are compare-and-swap on a version the server assigns: the first writer wins, the loser gets the row")
    func compareAndSwap() async throws {
        try await Self.withServer { _, server in
            let client = Client(base: server.url)
            _ = try await client.createAccount()
            let item = Data(repeating: 1, count: 16)
            let first = try await client.put(item, base: 0)
            #expect(first.status == 200)
            #expect(try first.decoded(WriteAccepted.self) == WriteAccepted(version: 1, seq: 1))
            let lost = try await client.put(item, base: 0)
            #expect(lost.status == 409)
            #expect(try lost.decoded(WriteConflict.self).current?.version == 1)
            #expect(try await client.put(item, base: 1).decoded(WriteAccepted.self).version == 2)
            // Pages carry each item's latest state once, in change order.
            let other = Data(repeating: 2, count: 16)
            _ = try await client.put(other, base: 0)
            let page = try await client.changes(after: 0).decoded(ChangePage.self)
            #expect(page.changes.map(\.id) == [item, other])
            #expect(page.changes.map(\.version) == [2, 1])
            #expect(page.last == 3 && !page.more)
            #expect(try await client.changes(after: 2).decoded(ChangePage.self).changes.map(\.id) == [other])
            // A delete is a tombstone with the next version; a stale delete loses.
            #expect(try await client.delete(item, base: 1).status == 409)
            let deleted = try await client.delete(item, base: 2)
            #expect(try deleted.decoded(WriteAccepted.self).version == 3)
            let after = try await client.changes(after: 3).decoded(ChangePage.self)
            #expect(after.changes.count == 1 && after.changes[0].deleted && after.changes[0].ciphertext?.count == 540)
        }
    }

    @Test("bad input is a 4xx with a reason and changes nothing")
    func badInput() async throws {
        try await Self.withServer { database, server in
            let client = Client(base: server.url)
            _ = try await client.createAccount()
            let base = "/v1/accounts/\(client.account.hexString)"
            #expect(try await client.send(.PUT, base + "/items/zz", body: Data("{}".utf8)).status == 400)
            #expect(try await client.send(.PUT, base + "/items/\(Data(count: 16).hexString)",
                                          body: Data("not json".utf8)).status == 400)
            #expect(try await client.put(Data(count: 16), base: -1).status == 400)
            #expect(try await client.put(Data(count: 16), base: 0, size: 10).status == 413)
            #expect(try await client.put(Data(count: 16), base: 0, size: SyncLimits.maxCiphertext + 1).status == 413)
            #expect(try await client.send(.GET, base + "/changes?after=-4").status == 400)
            #expect(try await client.send(.GET, base + "/changes?limit=100000").status == 400)
            // An account whose first log entry is not its device's, signed by it.
            var forged = Client(base: server.url)
            let genesis = try DeviceLogEntry(kind: .genesis, seq: 0, previous: Data(count: 32), account: forged.account,
                                             device: forged.record, epoch: 1, time: 0)
                .signed(by: forged.device, key: P256.Signing.PrivateKey())
            let body = try JSONEncoder().encode(AccountCreation(account: forged.account, device: forged.record,
                                                                genesis: genesis))
            #expect(try await forged.send(.POST, "/v1/accounts", body: body).status == 400)
            forged = Client(base: server.url)
            #expect(try database.sql("SELECT count(*) FROM items").hasPrefix("0"))
            #expect(try database.sql("SELECT count(*) FROM accounts").hasPrefix("1"))
        }
    }

    @Test("tombstones are forgotten after the horizon the server publishes; a device behind it is told to resync")
    func tombstoneHorizon() async throws {
        try await Self.withServer(["--tombstone-seconds", "1"]) { database, server in
            let client = Client(base: server.url)
            _ = try await client.createAccount()
            let a = Data(repeating: 0xa, count: 16), b = Data(repeating: 0xb, count: 16)
            _ = try await client.put(a, base: 0)  // seq 1
            _ = try await client.put(b, base: 0)  // seq 2
            #expect(try await client.changes(after: 0).decoded(ChangePage.self).horizonSeconds == 1)
            _ = try await client.delete(a, base: 1)  // seq 3
            try await Task.sleep(for: .seconds(2))
            _ = try await client.delete(b, base: 1)  // seq 4; purges a's tombstone
            #expect(try database.sql("SELECT count(*) FROM items").hasPrefix("1"))
            let behind = try await client.changes(after: 2)
            #expect(behind.status == 410)
            // From the start, everything the server still has.
            let full = try await client.changes(after: 0).decoded(ChangePage.self)
            #expect(full.changes.map(\.id) == [b])
            #expect(try await client.changes(after: 3).status == 200)
        }
    }

    @Test("writes racing through two instances: one winner per version, change numbers 1…N with no gap or repeat")
    func racingWrites() async throws {
        try await Self.withServer { database, server in
            let second = try SyncServerProcess(database: database)
            defer { second.stop() }
            let client = Client(base: server.url)
            _ = try await client.createAccount()
            let other = Client(base: second.url, sharing: client)
            // 24 writers of one new item, half through each instance: exactly one creates it.
            let item = Data(repeating: 9, count: 16)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for writer in 0..<24 {
                    group.addTask { try await (writer % 2 == 0 ? client : other).put(item, base: 0).status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 1)
            #expect(statuses.filter { $0 == 409 }.count == 23)
            // 40 new items at once through both: change numbers 2…41, each once, and the account counts 41 items.
            let accepted = try await withThrowingTaskGroup(of: WriteAccepted.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        let id = Data([UInt8(index)] + Array(repeating: 0xA0, count: 15))
                        return try await (index % 2 == 0 ? client : other).put(id, base: 0).decoded(WriteAccepted.self)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(accepted.map(\.seq).sorted() == Array(2...41))
            let account = "'\\x\(client.account.hexString)'"
            #expect(try database.sql("SELECT last_seq, item_count FROM accounts WHERE id = \(account)") == "41|41\n")
        }
    }

    @Test("a request for changes may wait for the next one: a write through another server instance wakes it")
    func waitForChanges() async throws {
        try await Self.withServer { database, server in
            let second = try SyncServerProcess(database: database)
            defer { second.stop() }
            let client = Client(base: server.url)
            _ = try await client.createAccount()
            #expect(try await client.send(.GET, "/v1/accounts/\(client.account.hexString)/changes?wait=31").status == 400)
            // Nothing to wait for: a wait of 1 s comes back empty.
            let empty = try await client.send(.GET, "/v1/accounts/\(client.account.hexString)/changes?after=0&wait=1")
            #expect(try empty.decoded(ChangePage.self).changes.isEmpty)
            // A waiting request on one instance, a write through the other.
            let waiting = Task {
                try await client.send(.GET, "/v1/accounts/\(client.account.hexString)/changes?after=0&wait=30")
            }
            try await Task.sleep(for: .milliseconds(500))
            let writer = Client(base: second.url, sharing: client)
            #expect(try await writer.put(Data(repeating: 3, count: 16), base: 0).status == 200)
            let woken = try await waiting.value
            #expect(try woken.decoded(ChangePage.self).changes.count == 1)
        }
    }
}
