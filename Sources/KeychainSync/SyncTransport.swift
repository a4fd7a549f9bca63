import AsyncHTTPClient
import Crypto
import Foundation
import KeychainCore
import KeychainSyncProtocol
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// Requests to the sync server, each signed by this device (docs/SYNC-PROTOCOL.md). Blocking: keychaind runs a
/// round on its own thread, holding no lock of the keychain while it waits for the network.
struct SyncTransport {
    let server: URL
    let device: Data
    let key: P256.Signing.PrivateKey
    /// PEM certificates that alone may vouch for the server's certificate (`--ca-file`); nil: the system's roots.
    var certificateAuthorities: Data? = nil

    /// One client for keychaind's lifetime, trusting the system's roots. An unreachable server fails after the
    /// connect timeout, not after the request's whole deadline of retries.
    static let client = makeClient(tls: nil)

    /// One client per set of private authorities, for keychaind's lifetime (a device syncs with few servers).
    private static let privateClients = Mutex<[Data: HTTPClient]>([:])

    private static func makeClient(tls: TLSConfiguration?) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        if let tls { configuration.tlsConfiguration = tls }
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(30))
        // A failed connect fails the request at once; the next round (or `sync-now`) tries again. With the pool's
        // own retries, its backoff grew with every failure while the server was down and outlived it: the first
        // rounds after the server came back waited for that backoff past their connect timeout and failed with the
        // outage's "connection refused" (SyncConvergenceTests, seed 10598181696766077933).
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.redirectConfiguration = .disallow  // a signed request goes to the server it was signed for
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    /// The certificates of a `--ca-file`: at least one, in PEM; otherwise errSecParam before anything is sent.
    static func authorities(_ pem: Data) throws(KeychainError) -> [NIOSSLCertificate] {
        guard let certificates = try? NIOSSLCertificate.fromPEMBytes(Array(pem)), !certificates.isEmpty else {
            throw .param("the CA file holds no certificate in PEM form (-----BEGIN CERTIFICATE-----)")
        }
        return certificates
    }

    static func checkAuthorities(_ pem: Data?) throws(KeychainError) {
        if let pem { _ = try authorities(pem) }
    }

    /// The client for this server: the system's roots, or only the authorities the user gave for it.
    func httpClient() throws(KeychainError) -> HTTPClient {
        guard let pem = certificateAuthorities else { return Self.client }
        if let known = Self.privateClients.withLock({ $0[pem] }) { return known }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try Self.authorities(pem))
        let made = Self.makeClient(tls: tls)
        return Self.privateClients.withLock { clients in
            if let raced = clients[pem] {
                try? made.syncShutdown()
                return raced
            }
            clients[pem] = made
            return made
        }
    }

    struct Reply {
        var status: Int
        var body: Data
    }

    /// The server's base URL from what the user typed: https, or http to this machine only (a server on loopback
    /// during tests or behind a local TLS proxy); the keychain's contents are end-to-end encrypted either way, but
    /// request metadata is not.
    static func serverURL(_ text: String) throws(KeychainError) -> URL {
        guard let url = URL(string: text.hasSuffix("/") ? String(text.dropLast()) : text),
              let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
              url.query == nil, url.fragment == nil, url.user == nil, url.password == nil
        else { throw .param("the sync server must be an https:// URL (with no user or password in it)") }
        let loopback = ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host.lowercased())
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw .param("the sync server must be an https:// URL (http:// only on this machine)")
        }
        return url
    }

    func send(_ method: HTTPMethod, _ path: String, body: Data? = nil, headers: [(String, String)] = [])
        throws(KeychainError) -> Reply
    {
        let payload = body ?? Data()
        let target = server.path + path
        let signature: RequestSignature
        do {
            signature = try RequestSignature.sign(method: method.rawValue, target: target, body: payload,
                                                  device: device, key: key)
        } catch {
            throw KeychainError(.internalComponent, "the request cannot be signed")
        }
        do {
            var request = try HTTPClient.Request(url: server.absoluteString + path, method: method)
            request.headers.add(name: "Authorization", value: signature.headerValue)
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(body)
            }
            let response = try httpClient().execute(request: request, deadline: .now() + .seconds(60)).wait()
            let bytes = response.body.map { Data($0.readableBytesView) } ?? Data()
            return Reply(status: Int(response.status.code), body: bytes)
        } catch {
            throw KeychainError(.networkFailure, "the sync server \(server.absoluteString) cannot be reached (\(error))")
        }
    }

    /// The reply decoded as `T` when its status is `expected`; otherwise an error with the server's reason.
    static func decode<T: Decodable>(_ type: T.Type, _ reply: Reply) throws(KeychainError) -> T {
        guard let value = try? JSONDecoder().decode(T.self, from: reply.body) else {
            throw KeychainError.decode("the sync server sent a malformed \(T.self)")
        }
        return value
    }

    static func failure(_ reply: Reply, doing what: String) -> KeychainError {
        // The server's words, shown to the user: printable characters only, and not too many.
        let said = (try? JSONDecoder().decode(SyncErrorBody.self, from: reply.body))?.reason ?? "HTTP \(reply.status)"
        let reason = String(String.UnicodeScalarView(said.unicodeScalars.filter {
            $0.properties.generalCategory != .control && $0.properties.generalCategory != .format }).prefix(200))
        switch reply.status {
        case 401, 403: return KeychainError(.authFailed, "the sync server refused to \(what): \(reason)")
        case 404: return KeychainError(.itemNotFound, "the sync server does not know this account: \(reason)")
        default: return KeychainError(.serviceNotAvailable, "the sync server could not \(what): \(reason)")
        }
    }
}
