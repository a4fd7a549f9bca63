import AsyncHTTPClient
import Crypto
import Foundation
import KeychainSyncProtocol
import NIOCore
import NIOHTTP1

// Item writes against keychain-sync-server instances, as devices make them (signed, one item ciphertext each, a
// compare-and-swap on the item's version), from many accounts at once.
//   SyncLoad URL[,URL…] ACCOUNTS SECONDS [CONCURRENCY]
// Creates ACCOUNTS accounts (one device each), then for SECONDS keeps CONCURRENCY writes in flight, spread over
// the accounts and round-robin over the URLs. Prints writes per second and the median and 99th percentile latency.

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count >= 3, let accountsCount = Int(arguments[arguments.startIndex + 1]),
      let seconds = Double(arguments[arguments.startIndex + 2])
else {
    FileHandle.standardError.write(Data("usage: SyncLoad URL[,URL…] ACCOUNTS SECONDS [CONCURRENCY]\n".utf8))
    exit(2)
}
let urls = arguments.first!.split(separator: ",").map(String.init)
let concurrency = arguments.count > 3 ? Int(arguments[arguments.startIndex + 3]) ?? 32 : 32

struct Device: Sendable {
    let account = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
    let id = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
    let key = P256.Signing.PrivateKey()
    let agreement = Curve25519.KeyAgreement.PrivateKey()

    var record: DeviceRecord {
        DeviceRecord(id: id, signingKey: key.publicKey.x963Representation,
                     agreementKey: agreement.publicKey.rawRepresentation)
    }

    func send(_ base: String, _ method: HTTPMethod, _ path: String, body: Data) async throws -> Int {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        let signature = try RequestSignature.sign(method: method.rawValue, target: path, body: body, device: id, key: key)
        request.headers.add(name: "Authorization", value: signature.headerValue)
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 20)
        return Int(response.status.code)
    }
}

let devices = (0..<accountsCount).map { _ in Device() }
let createStart = ContinuousClock.now
try await withThrowingTaskGroup(of: Void.self) { group in
    for (index, device) in devices.enumerated() {
        if index >= 64 { try await group.next() }
        group.addTask {
            let genesis = try DeviceLogEntry(kind: .genesis, seq: 0, previous: Data(count: 32), account: device.account,
                                             device: device.record, epoch: 1, time: 0).signed(by: device.id, key: device.key)
            let body = try JSONEncoder().encode(AccountCreation(account: device.account, device: device.record,
                                                                genesis: genesis))
            let status = try await device.send(urls[index % urls.count], .POST, "/v1/accounts", body: body)
            guard status == 201 else { throw CancellationError() }
        }
    }
    try await group.waitForAll()
}
print("accounts\t\(accountsCount)\tcreated in\t\(ContinuousClock.now - createStart)")

// Each write is a new item of a random account (base 0): the server's whole path, the account's row lock and
// change counter, the unique index, the NOTIFY.
let ciphertext = Data((0..<1052).map { _ in UInt8.random(in: 0...255) })
let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
let latencies = try await withThrowingTaskGroup(of: [Duration].self) { group in
    for worker in 0..<concurrency {
        group.addTask {
            var mine: [Duration] = []
            var n = 0
            while ContinuousClock.now < deadline {
                let device = devices[Int.random(in: 0..<devices.count)]
                let item = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
                let body = try JSONEncoder().encode(ItemWrite(base: 0, epoch: 1, ciphertext: ciphertext))
                let start = ContinuousClock.now
                let status = try await device.send(urls[(worker + n) % urls.count], .PUT,
                                                   "/v1/accounts/\(device.account.hexString)/items/\(item.hexString)",
                                                   body: body)
                guard status == 200 else { throw CancellationError() }
                mine.append(ContinuousClock.now - start)
                n += 1
            }
            return mine
        }
    }
    var all: [Duration] = []
    for try await part in group { all += part }
    return all.sorted()
}
func ms(_ d: Duration) -> String {
    String(format: "%.2f", Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15)
}
print("writes\t\(latencies.count)\tper second\t\(Int(Double(latencies.count) / seconds))\tmedian ms\t\(ms(latencies[latencies.count / 2]))\tp99 ms\t\(ms(latencies[latencies.count * 99 / 100]))")
