import Foundation
import KeychainCore
import KeychainStorage
import Testing
@testable import KeychainDaemon

/// keychaind's keeper of the access log with a real login keychain: the log's secrets go into it, and every finished
/// file leaves its checkpoint there, so that records cut from it while no keychaind runs are found even after a kill.
@Suite("Access log keeper")
struct AccessLogKeeperTests {
    @Test("a file finished by rotation leaves its checkpoint in the login keychain; a cut of it is then found")
    func checkpointAtRotation() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keeper-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        var configuration = KeychainFile.Configuration(stateDirectory: root.appendingPathComponent("state"))
        configuration.kdf = KDFParameters(id: 1, n: 1 << 15, r: 8, p: 1)
        let login = try KeychainFile.create(at: root.appendingPathComponent("keychains/login.keychain-db"), password: nil,
                                            settings: .never, configuration: configuration)
        let directory = root.appendingPathComponent("log")
        let keeper = try AccessLogKeeper(directory: directory, maximumFileSize: 1_000)
        keeper.keyReady(in: login)
        #expect(keeper.isKeyed)
        for n in 1...12 {
            try keeper.record([AccessLogRecord(time: Date(), keychain: login.url.path, action: .readSecret, outcome: .allowed,
                                               item: Item(itemClass: .genericPassword, attributes: ["labl": .string("item \(n)")]))])
        }
        guard let stored = try login.keychaindSecret(.accessLogKey),
              let secrets = stored.withUnsafeBytes({ AccessLogSecrets(encoded: [UInt8]($0)) }),
              let checkpoint = secrets.checkpoint
        else { Issue.record("no checkpoint in the login keychain"); return }
        #expect(checkpoint.file >= 1)
        #expect(try keeper.report(.verify, secrets: stored).check.isIntact)

        // The checkpointed file loses its last frame (its close): well formed, and found.
        let url = directory.appendingPathComponent(String(format: "access-log-%06u", checkpoint.file))
        let bytes = try Data(contentsOf: url)
        try bytes.prefix(bytes.count - (4 + 9 + 8 + 32)).write(to: url)  // the close frame (format 2)
        let problem = try keeper.report(.verify, secrets: stored).check.problem ?? ""
        #expect(problem.contains("changed after it was finished") || problem.contains("does not follow"), "\(problem)")
    }
}
