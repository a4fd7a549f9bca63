import Foundation
import Testing

/// A server of one's own on the internet: behind TLS with a certificate of the user's own CA (devices trust it through
/// `--ca-file`, that CA alone, kept with the keychain's sync state for every later round), and making accounts only
/// for those given its registration token.
@Suite("Sync: a server of one's own (a private CA, a registration token)", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")))
struct SyncOwnServerTests {
    /// A CA and a certificate it signed for localhost and 127.0.0.1, made with openssl in `directory`.
    static func makeCertificates(in directory: URL) throws -> (ca: String, certificate: String, key: String) {
        let ca = directory.appendingPathComponent("ca.pem").path, caKey = directory.appendingPathComponent("ca.key").path
        let key = directory.appendingPathComponent("server.key").path
        let request = directory.appendingPathComponent("server.csr").path
        let certificate = directory.appendingPathComponent("server.pem").path
        let names = directory.appendingPathComponent("names.ext")
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(to: names, atomically: true, encoding: .utf8)
        for arguments in [
            ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", caKey,
             "-out", ca, "-days", "2", "-subj", "/CN=Keychain Test CA"],
            ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
             "-out", request, "-subj", "/CN=localhost"],
            ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-out", certificate,
             "-days", "2", "-extfile", names.path],
        ] {
            let made = try run("/usr/bin/openssl", arguments)
            guard made.status == 0 else { throw FixtureError("openssl \(arguments[0]): \(made.stderr)") }
        }
        return (ca, certificate, key)
    }

    /// A private PostgreSQL cluster and a scratch directory, both gone afterwards.
    static func withDatabase(_ body: (PostgresCluster, URL) throws -> Void) throws {
        let database = try PostgresCluster()
        defer { database.stop() }
        let scratch = URL(fileURLWithPath: "/tmp/kcown-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        try body(database, scratch)
    }

    @Test("--ca-file trusts a server whose certificate a private CA signed, for setup, join and every later round; without it, or with a file that holds no certificate, nothing is set up")
    func privateAuthority() throws {
        try Self.withDatabase { database, scratch in
            let (ca, certificate, key) = try Self.makeCertificates(in: scratch)
            let server = try SyncServerProcess(database: database, extra: ["--tls-certificate", certificate, "--tls-key", key])
            defer { server.stop() }
            let url = "https://localhost:\(server.port)"
            let first = try Device("tls-first"), second = try Device("tls-second")
            defer {
                first.cleanUp()
                second.cleanUp()
            }
            #expect(try first.example("set", "canary-svc-tls", "acct", stdin: "canary-secret-tls").status == 0)

            // The system's roots do not know the CA: refused, and the keychain does not sync.
            let untrusted = try first.security("sync-setup", "--server", url)
            #expect(untrusted.status == 204)  // errSecNetworkFailure
            #expect(untrusted.stderr.contains("cannot be reached"), "\(untrusted.stderr)")
            #expect(try first.security("sync-status").status == 44)  // does not sync: errSecItemNotFound
            // A file that holds no certificate is refused before anything is sent.
            let notPEM = scratch.appendingPathComponent("not.pem")
            try "not a certificate\n".write(to: notPEM, atomically: true, encoding: .utf8)
            let refused = try first.security("sync-setup", "--server", url, "--ca-file", notPEM.path)
            #expect(refused.status == 206)  // errSecParam
            #expect(refused.stderr.contains("the CA file holds no certificate"), "\(refused.stderr)")
            #expect(try first.security("sync-setup", "--server", url, "--ca-file", scratch.appendingPathComponent("missing").path)
                    .stderr.contains("cannot read the CA file"))
            #expect(try first.security("sync-status").status == 44)  // does not sync: errSecItemNotFound

            // With the CA: set up, and the item goes up in the first round.
            let setUp = try first.security("sync-setup", "--server", url, "--ca-file", ca)
            #expect(setUp.status == 0, "\(setUp.stdout) \(setUp.stderr)")
            #expect(setUp.stdout.contains("sent 1"), "\(setUp.stdout)")

            // A second device joins through the same CA and gets the item; later rounds use the CA kept with the state.
            let asked = try second.security("sync-join", "--server", url, "--ca-file", ca, "--no-wait")
            let code = try #require(SyncDevicesTests.code(in: asked.stdout), "\(asked.stdout) \(asked.stderr)")
            #expect(try first.security("sync-approve", code).status == 0)
            let joined = try second.security("sync-join")
            #expect(joined.status == 0, "\(joined.stdout) \(joined.stderr)")
            #expect(try second.example("get", "canary-svc-tls", "acct").stdout == "canary-secret-tls\n")
            #expect(try second.example("set", "canary-svc-tls", "acct", stdin: "changed-over-tls").status == 0)
            #expect(try second.security("sync-now").status == 0)
            #expect(try first.security("sync-now").status == 0)
            #expect(try first.example("get", "canary-svc-tls", "acct").stdout == "changed-over-tls\n")
        }
    }

    @Test("with --registration-token-file the server makes accounts only for the token, read from a file or standard input; joining needs none")
    func registrationToken() throws {
        try Self.withDatabase { database, scratch in
            let token = "k7Q4-mZ9T-bX2p-Lw8e-R5nY"
            let tokenFile = scratch.appendingPathComponent("token")
            try "\(token)\n".write(to: tokenFile, atomically: true, encoding: .utf8)
            let wrongFile = scratch.appendingPathComponent("wrong")
            try "not-the-token-at-all-really\n".write(to: wrongFile, atomically: true, encoding: .utf8)
            // A token too short to be one is refused at start.
            let short = scratch.appendingPathComponent("short")
            try "abc\n".write(to: short, atomically: true, encoding: .utf8)
            #expect(throws: FixtureError.self) {
                try SyncServerProcess(database: database, extra: ["--registration-token-file", short.path]).stop()
            }

            let server = try SyncServerProcess(database: database, extra: ["--registration-token-file", tokenFile.path])
            defer { server.stop() }
            let first = try Device("tok-first"), second = try Device("tok-second")
            defer {
                first.cleanUp()
                second.cleanUp()
            }
            let without = try first.security("sync-setup", "--server", server.url)
            #expect(without.status == 51)  // errSecAuthFailed
            #expect(without.stderr.contains("only with its registration token"), "\(without.stderr)")
            let wrong = try first.security("sync-setup", "--server", server.url, "--registration-token-file", wrongFile.path)
            #expect(wrong.status == 51)
            #expect(try first.security("sync-status").status == 44)  // does not sync: errSecItemNotFound
            #expect(try database.sql("SELECT count(*) FROM accounts") == "0\n")

            let fromStandardInput = try first.security("sync-setup", "--server", server.url, "--registration-token-file", "-",
                                                       stdin: token + "\n")
            #expect(fromStandardInput.status == 0, "\(fromStandardInput.stdout) \(fromStandardInput.stderr)")
            #expect(try second.security("sync-setup", "--server", server.url, "--registration-token-file", tokenFile.path)
                    .status == 0)
            // Joining an existing account is the account's devices' decision, not the operator's: no token.
            let third = try Device("tok-third")
            defer { third.cleanUp() }
            let asked = try third.security("sync-join", "--server", server.url, "--no-wait")
            let code = try #require(SyncDevicesTests.code(in: asked.stdout), "\(asked.stdout) \(asked.stderr)")
            #expect(try first.security("sync-approve", code).status == 0)
            #expect(try third.security("sync-join").status == 0)
        }
    }
}
