import Foundation
import KeychainClient
import KeychainCore
@_exported import KeychainTestSupport
import KeychainStorage
import Synchronization

/// A keychain in a fresh temporary XDG tree, removed when the value goes away.
final class TestKeychain {
    let root: URL
    let locations: KeychainLocations
    let client: KeychainClient

    init(groups: [String] = ["G1", "G2"], password: String? = nil, clock: (@Sendable () -> Date)? = nil) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("kc-test-\(UUID().uuidString)")
        locations = KeychainLocations(
            keychainDirectory: root.appendingPathComponent("data/keychains"),
            stateDirectory: root.appendingPathComponent("state/keychain"),
            configDirectory: root.appendingPathComponent("config/keychain"))
        client = try KeychainClient.open(
            keychain: "test", locations: locations, caller: Caller(accessGroups: groups),
            createWithPassword: password.map { SecretBytes(utf8: $0) }, kdf: .fastForTests, clock: clock)
    }

    /// Another caller on the same file (the same process, so the same open handle).
    func client(groups: [String]) throws -> KeychainClient {
        let service = EmbeddedKeychainService(locations: locations, caller: Caller(accessGroups: groups)) {
            $0.kdf = .fastForTests
        }
        return KeychainClient(service: service, keychain: client.keychain)
    }

    deinit { try? FileManager.default.removeItem(at: root) }
}

extension KDFParameters {
    /// The smallest parameters a file may carry (N=2^15): keeps password tests quick.
    static let fastForTests = KDFParameters(id: 1, n: 1 << 15, r: 8, p: 1)
}


extension Data {
    init(_ string: String) { self = Data(string.utf8) }
}

/// A clock a test moves by hand (shared with the engine, so it is Sendable).
final class ManualClock: Sendable {
    private let time = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    var now: Date { time.withLock { $0 } }
    func advance(by seconds: TimeInterval) { time.withLock { $0 += seconds } }
    var read: @Sendable () -> Date { { [self] in self.now } }
}
