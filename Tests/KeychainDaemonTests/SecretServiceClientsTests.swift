import Foundation
import KeychainDBus
@testable import KeychainDaemon
import KeychainTestSupport
import Synchronization
import Testing

/// keychaind's Secret Service in process, on a private bus: what it keeps per client, and that it lets go of it.
@Suite("Secret Service: clients that come and go", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")))
struct SecretServiceClientsTests {
    @Test("a client that called is forgotten when it leaves (its session closes); one that never called is not remembered")
    func forgottenOnLeaving() throws {
        let daemon = try InProcessDaemonTests.Running()
        let bus = try PrivateSessionBus(serviceActivation: false)
        try daemon.server.serveSecretService(on: try DBusConnection(address: bus.address), replace: false)
        let server = try #require(daemon.server.secretService.withLock { $0 })
        defer { server.connection.close() }

        func waitUntil(_ condition: () -> Bool) -> Bool {
            for _ in 0..<200 where !condition() { usleep(10_000) }
            return condition()
        }
        // A program that comes and goes without calling us (most of a desktop's bus) is not remembered.
        let bystander = try DBusConnection(address: bus.address)
        bystander.close()

        let client = try DBusConnection(address: bus.address)
        let opened = try client.call(.methodCall(
            destination: SecretServiceServer.busName, path: SecretServiceServer.servicePath,
            interface: SecretServiceServer.serviceInterface, member: "OpenSession", body: [.string("plain"), .variant(.string(""))]))
        #expect(opened.kind == .methodReturn)
        #expect(server.callers.withLock { $0 } == [client.uniqueName])
        #expect(server.state.withLock { $0.sessions.count } == 1)

        client.close()
        #expect(waitUntil {
            server.state.withLock { $0.sessions.isEmpty } && server.callers.withLock { $0.isEmpty } && server.lanes.busyClients == 0
        })
    }
}
