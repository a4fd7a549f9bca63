import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import Metrics
import NIOSSL
import PostgresNIO
import Prometheus
import ServiceLifecycle
import Synchronization

/// keychain-sync-server as a library: configuration in, a running Hummingbird application out.
public struct SyncServerConfiguration: Sendable {
    public enum Database: Sendable, Equatable {
        case socket(path: String, user: String, database: String)
        case tcp(host: String, port: Int, user: String, password: String?, database: String)
    }

    public var database: Database
    public var host = "127.0.0.1"
    public var port = 8443
    public var tlsCertificate: String?
    public var tlsKey: String?
    public var tombstoneHorizon: Int64 = 90 * 24 * 3600
    public var logLevel: Logger.Level = .info
    /// When set, a new account needs this token (`X-Registration-Token`): a server on the internet creates
    /// accounts only for those its operator gave it to. Joining or recovering an existing account needs none.
    public var registrationToken: String?

    public init(database: Database) { self.database = database }

    /// `postgres://user[:password]@host[:port]/database`, as libpq writes it (no query options).
    public static func database(url: String) -> Database? {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme),
              let host = components.host, !host.isEmpty, let user = components.user
        else { return nil }
        let name = String(components.path.dropFirst())
        return .tcp(host: host, port: components.port ?? 5432, user: user, password: components.password,
                    database: name.isEmpty ? user : name)
    }
}

public enum SyncServer {
    /// Builds the server: its PostgreSQL client runs as a service of the application, the schema is migrated
    /// before the first request is accepted, and SIGTERM/SIGINT end it gracefully (when run with ``run(_:)``).
    public static func application(_ configuration: SyncServerConfiguration,
                                   onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in })
        throws -> some ApplicationProtocol
    {
        let logger = {
            var logger = Logger(label: "keychain-sync-server")
            logger.logLevel = configuration.logLevel
            return logger
        }()
        let postgres = PostgresClient(configuration: postgresConfiguration(configuration.database), backgroundLogger: logger)
        let store = SyncStore(client: postgres, logger: logger, tombstoneHorizon: configuration.tombstoneHorizon)
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrapOnce(registry)

        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: MetricsMiddleware())
        router.add(middleware: LogRequestsMiddleware(.debug))
        router.get("/metrics") { _, _ in
            var buffer: [UInt8] = []
            registry.emit(into: &buffer)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: buffer)))
        }
        let notifier = ChangeNotifier()
        SyncRoutes(store: store, notifier: notifier, clock: { Date() },
                   registrationToken: configuration.registrationToken.map { Array($0.utf8) }).register(on: router)

        let server: HTTPServerBuilder
        if let certificate = configuration.tlsCertificate, let key = configuration.tlsKey {
            let chain = try NIOSSLCertificate.fromPEMFile(certificate).map { NIOSSLCertificateSource.certificate($0) }
            let tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain, privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
            server = try .tls(.http1(), tlsConfiguration: tls)
        } else {
            server = .http1()
        }
        var app = Application(
            router: router, server: server,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port),
                                 serverName: "keychain-sync-server"),
            services: [postgres, ChangeListener(client: postgres, notifier: notifier, logger: logger)],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger)
        app.beforeServerStarts {
            try await Migrations.run(on: postgres, logger: logger)
        }
        return app
    }

    static func postgresConfiguration(_ database: SyncServerConfiguration.Database) -> PostgresClient.Configuration {
        switch database {
        case .socket(let path, let user, let name):
            return PostgresClient.Configuration(unixSocketPath: path, username: user, password: nil, database: name)
        case .tcp(let host, let port, let user, let password, let name):
            return PostgresClient.Configuration(host: host, port: port, username: user, password: password,
                                                database: name, tls: .prefer(.makeClientConfiguration()))
        }
    }
}

extension MetricsSystem {
    private static let bootstrapped = Mutex(false)

    /// Tests build several servers in one process; the metrics system takes one factory per process.
    static func bootstrapOnce(_ registry: PrometheusCollectorRegistry) {
        bootstrapped.withLock { done in
            guard !done else { return }
            MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
            done = true
        }
    }
}
