import Foundation
import KeychainClient
import KeychainCore
import KeychainDaemon
import KeychainKeys
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
            thread = Thread { server.serveUntilStopped() }
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

    @Test("a private key that must not leave is used in the daemon: signatures and decryptions come back, its bytes never")
    func keyUsedWhereItLives() throws {
        let daemon = try Running()
        let client = try daemon.connect()
        defer { client.close() }
        let key = try AsymmetricKey.generate(type: .ec, bits: 256)
        let tag = Data("com.example.daemon-key".utf8)
        try client.add(["class": "keys", "kcls": .int(1), "type": .int(73), "bsiz": .int(256), "atag": .data(tag),
                        "extr": .bool(false), "v_Data": .secret(SecretBytes(key.externalRepresentation))], to: nil)
        let select: [String: QueryValue] = ["class": "keys", "atag": .data(tag)]
        // Read: refused, through the daemon as in-process.
        #expect(status { _ = try client.search(select.merging(["r_Data": true]) { a, _ in a }, in: nil) } == -25258)
        // Used: a signature that the public key verifies.
        let message = Data("signed in keychaind".utf8)
        let signature = try client.useKey(select, KeyUse(.sign, algorithm: "algid:sign:ECDSA:message-X962:SHA256",
                                                         input: SecretBytes(message)), in: nil)
        try key.publicKey.verify(signature.unprotectedData(), for: message,
                                 algorithm: KeyAlgorithm(identifier: "algid:sign:ECDSA:message-X962:SHA256"))
        // The public half, and an ECIES message opened where the key lives.
        let publicBytes = try client.useKey(select, KeyUse(.copyPublicKey), in: nil)
        #expect(publicBytes.unprotectedData() == key.publicKey.externalRepresentation)
        let ecies = KeyAlgorithm(identifier: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV")
        let sealed = try key.publicKey.encrypt(Data("for the daemon".utf8), algorithm: ecies)
        let opened = try client.useKey(select, KeyUse(.decrypt, algorithm: ecies.identifier, input: SecretBytes(sealed)), in: nil)
        #expect(opened.unprotectedString() == "for the daemon")
        // An unsupported algorithm is Apple's errSecParam; a missing key errSecItemNotFound.
        #expect(status { _ = try client.useKey(select, KeyUse(.sign, algorithm: "algid:sign:RSA:raw"), in: nil) } == -50)
        #expect(status {
            _ = try client.useKey(["class": "keys", "atag": .data(Data("none".utf8))], KeyUse(.copyPublicKey), in: nil)
        } == -25300)
    }

    @Test("a key pair generated in the daemon: the private key never leaves it; the public key and its item come back")
    func keyPairGeneratedInDaemon() throws {
        let daemon = try Running()
        let client = try daemon.connect()
        defer { client.close() }
        let tag = Data("com.example.generated".utf8)
        let pair = try client.generateKeyPair(
            KeyGeneration(keyType: "73", bits: 384, privateAttributes: ["atag": .data(tag), "extr": .bool(false)],
                          publicAttributes: ["atag": .data(tag)]), in: nil)
        #expect(pair.privateKey.secret == nil)
        #expect(pair.privateKey.item.attributes["kcls"]?.numberValue == 1)
        #expect(pair.privateKey.item.attributes["bsiz"]?.numberValue == 384)
        let publicKey = try AsymmetricKey(externalRepresentation: pair.publicKey, type: .ec, keyClass: .public)
        #expect(pair.privateKey.item.attributes["klbl"] == .data(publicKey.applicationLabel))
        // The stored public key is the one returned; the private key's bytes are refused.
        let storedPublic = try client.search(["class": "keys", "atag": .data(tag), "kcls": .int(0), "r_Data": true], in: nil)
        #expect(storedPublic.first?.secret?.unprotectedData() == pair.publicKey)
        #expect(status {
            _ = try client.search(["class": "keys", "atag": .data(tag), "kcls": .int(1), "r_Data": true], in: nil)
        } == -25258)
        // And it signs there.
        let algorithm = KeyAlgorithm(identifier: "algid:sign:ECDSA:message-RFC4754:SHA384")
        let message = Data("made and used in keychaind".utf8)
        let signature = try client.useKey(["class": "keys", "atag": .data(tag)],
                                          KeyUse(.sign, algorithm: algorithm.identifier, input: SecretBytes(message)), in: nil)
        try publicKey.verify(signature.unprotectedData(), for: message, algorithm: algorithm)
        // A bad key type is Apple's errSecParam, and nothing is stored.
        #expect(status {
            _ = try client.generateKeyPair(KeyGeneration(keyType: "99", bits: 256, privateAttributes: [:],
                                                         publicAttributes: nil), in: nil)
        } == -50)
    }
}

extension InProcessDaemonTests {
    @Test("only the keychain's own security may back up or restore a whole keychain through keychaind")
    func backupIsForTheSecurityCommand() throws {
        let daemon = try Running()
        let client = try daemon.connect()
        defer { client.close() }
        try client.add(["class": "genp", "acct": "a", "v_Data": .secret(SecretBytes(utf8: "mine"))], to: nil)
        let file = daemon.root.appendingPathComponent("stolen.backup").path
        #expect(status { _ = try client.backUp(client.defaultKeychain(), to: file, password: SecretBytes(utf8: "x")) }
                == -25293)
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(status {
            _ = try client.restore(from: file, password: SecretBytes(utf8: "x"), into: client.defaultKeychain())
        } == -25293)
    }
}
