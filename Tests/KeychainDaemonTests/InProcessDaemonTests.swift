import Foundation
import KeychainClient
import KeychainCore
import KeychainDaemon
import KeychainTestSupport
import Testing

/// keychaind's server run inside the test process on a temporary socket, reached through RemoteKeychainService.
@Suite("keychaind in process: contexts held by the daemon")
struct InProcessDaemonTests {
    final class Running {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("kcd-\(UUID().uuidString)")
        let server: KeychainDaemonServer
        let thread: Thread

        init() throws {
            let locations = KeychainLocations(
                keychainDirectory: root.appendingPathComponent("data/keychains"),
                stateDirectory: root.appendingPathComponent("state/keychain"),
                configDirectory: root.appendingPathComponent("config/keychain"),
                runtimeDirectory: root.appendingPathComponent("run"))
            let server = try KeychainDaemonServer(locations: locations, policy: CallerPolicy(toolDirectory: "/nowhere"))
            self.server = server
            thread = Thread { server.run() }
            thread.start()
        }

        func connect() throws -> RemoteKeychainService {
            try #require(try RemoteKeychainService.connect(to: server.socket))
        }

        deinit {
            server.stop()
            try? FileManager.default.removeItem(at: root)
        }
    }

    @Test("LAContext's check runs in the daemon; the daemon's copy of the context then meets an item's user presence")
    func contextThroughDaemon() throws {
        let daemon = try Running()
        let client = try daemon.connect()
        defer { client.close() }
        let work = client.resolve("work")
        try client.createKeychain(work, password: SecretBytes(utf8: "pw"), settings: .never)
        let ac = try AccessControl(protection: .whenUnlocked, flags: [.userPresence])
        try client.add(["class": "genp", "acct": "p", "v_Data": .secret(SecretBytes(utf8: "guarded")),
                        "accc": .accessControl(ac)], to: work)
        let context = AuthenticationContext()
        context.interactionNotAllowed = true
        let read: [String: QueryValue] = ["class": "genp", "acct": "p", "r_Data": true,
                                          "u_AuthCtx": .authenticationContext(context)]
        #expect(status { _ = try client.search(read, in: work) } == -25308)
        #expect(try client.authenticateOwner(SecretBytes(utf8: "wrong"), for: context, in: work) == false)
        #expect(try client.authenticateOwner(SecretBytes(utf8: "pw"), for: context, in: work))
        #expect(try client.search(read, in: work).first?.secret?.unprotectedString() == "guarded")
        // Another context, even with the same settings, is not authenticated: only the daemon's copy of that id is.
        let other = AuthenticationContext()
        other.interactionNotAllowed = true
        #expect(status {
            _ = try client.search(["class": "genp", "acct": "p", "r_Data": true,
                                   "u_AuthCtx": .authenticationContext(other)], in: work)
        } == -25308)
        // Invalidated on the client: the daemon's copy is invalidated with it.
        context.invalidate()
        #expect(status { _ = try client.search(read, in: work) } == -25293)
    }
}
