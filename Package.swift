// swift-tools-version: 6.1
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

#if canImport(Glibc)
import Glibc
#endif

// How our programs are linked in a release build (scripts/install.sh, the .deb, the benchmarks). Each tool is a new
// process per command (every `security` call, every git or docker credential lookup), so its start is its cost:
// - lld with packed relative relocations (DT_RELR): the Swift runtime and metadata linked in need ~39,000 pointers
//   relocated at every start; packed, the table the loader reads is 7 KB instead of 0.9 MB. The program stays
//   position-independent (its addresses random at every start), unlike a non-PIE link, which would save a little
//   more by giving that up. Only where this machine's C library (the one linked against) is 2.36 or later: an older
//   loader refuses such a program, and lld does not check;
// - no dynamic symbol table of our own (swiftc's static-stdlib link exports every symbol of ours: 4,820 in
//   `security`, which the runtime's start walks through `dladdr`). Nothing loads into these programs that would
//   look them up.
// Measured in docs/PERFORMANCE.md ("Linked for a fast start").
let releaseLinking: [LinkerSetting] = {
    var flags = ["-Xlinker", "--no-export-dynamic"]
    if cLibraryPacksRelocations { flags = ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"] + flags }
    return [.unsafeFlags(flags, .when(platforms: [.linux], configuration: .release))]
}()

/// Whether the C library of the building machine is glibc 2.36 or later, whose loader reads DT_RELR.
var cLibraryPacksRelocations: Bool {
    #if canImport(Glibc)
    var text = [CChar](repeating: 0, count: 64)  // "glibc 2.36"
    guard confstr(Int32(_CS_GNU_LIBC_VERSION), &text, text.count) > 0 else { return false }
    let bytes = text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
    let version = String(decoding: bytes, as: UTF8.self).split(separator: " ").last?.split(separator: ".")
        .compactMap { Int($0) } ?? []
    return version.count >= 2 && (version[0], version[1]) >= (2, 36)
    #else
    return false
    #endif
}

let package = Package(
    name: "swift-keychain",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "KeychainCore", targets: ["KeychainCore"]),
        .library(name: "KeychainStorage", targets: ["KeychainStorage"]),
        .library(name: "KeychainClient", targets: ["KeychainClient"]),
        // For the fuzzers in Fuzz/: the daemon protocol's decoders.
        .library(name: "KeychainWire", targets: ["KeychainWire"]),
        // For the fuzzers in Fuzz/: the `security` command's option grammar.
        .library(name: "SecurityCommandLine", targets: ["SecurityCommandLine"]),
        // For the fuzzers in Fuzz/: the D-Bus message decoder.
        .library(name: "KeychainDBus", targets: ["KeychainDBus"]),
        .library(name: "KeychainCertificates", targets: ["KeychainCertificates"]),
        .library(name: "Security", targets: ["Security"]),
        .library(name: "LocalAuthentication", targets: ["LocalAuthentication"]),
        .executable(name: "security", targets: ["SecurityTool"]),
        .executable(name: "keychaind", targets: ["keychaind"]),
        .executable(name: "keychain-embedded", targets: ["keychain-embedded"]),
        .executable(name: "git-credential-keychain", targets: ["GitCredentialKeychain"]),
        .executable(name: "docker-credential-keychain", targets: ["DockerCredentialKeychain"]),
        .executable(name: "keychain-sync-server", targets: ["keychain-sync-server"]),
        // For the benchmarks in Benchmarks/: a load on the sync server speaks its protocol.
        .library(name: "KeychainSyncProtocol", targets: ["KeychainSyncProtocol"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.2.0"),
        // The sync service (keychain-sync-server) and keychaind's side of it. None of these reach `security`.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    ],
    targets: [
        // Apple's item model, query rules, status codes. Pure: no I/O.
        .target(
            name: "KeychainCore",
            dependencies: [],
            swiftSettings: strictSettings
        ),
        // The keychain file: GRDB, key hierarchy, sealing, lock state. The only target that imports GRDB.
        .target(
            name: "KeychainStorage",
            dependencies: [
                "KeychainCore",
                "KeychainThreads",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                // The row scan at every open reads the columns straight from SQLite (Manifest+Scan.swift).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // A tiny C shim for what Swift cannot call: prctl (variadic). Later also SO_PEERCRED for the daemon.
        .target(name: "CKeychainLinux"),
        // Threads without Foundation's Thread (not in FoundationEssentials): a detached POSIX thread kept parked
        // between short jobs, and a condition variable on the monotonic clock.
        .target(
            name: "KeychainThreads",
            dependencies: ["CKeychainLinux"],
            swiftSettings: strictSettings
        ),
        // The daemon protocol: framing, messages, size limits. Values only; no sockets of its own beyond send/recv.
        .target(
            name: "KeychainWire",
            dependencies: ["KeychainCore"],
            swiftSettings: strictSettings
        ),
        // The client interface every front end speaks (the KeychainService protocol), its remote implementation over
        // keychaind, and the backend choice. No engine (no GRDB, no crypto): a program that links only this starts
        // in a couple of milliseconds.
        .target(
            name: "KeychainInterface",
            dependencies: ["KeychainCore", "KeychainWire", "KeychainThreads", "CKeychainLinux"],
            swiftSettings: strictSettings
        ),
        // Everything on the client side: KeychainInterface (re-exported), the embedded implementation (the engine in
        // this process) and the native API. The front ends below depend on it and on Core only, never on
        // KeychainStorage.
        .target(
            name: "KeychainClient",
            dependencies: ["KeychainInterface", "KeychainCore", "KeychainStorage", "KeychainKeys", "KeychainCertificates", "KeychainWire",
                           "CKeychainLinux",
                           // A gnome-keyring keyring file is decrypted where the keychain's ciphers are (Migration/).
                           .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "_CryptoExtras", package: "swift-crypto"),
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: strictSettings
        ),
        // The D-Bus wire protocol (marshalling, messages, a bus connection), for the Secret Service. Our own, in Swift:
        // libdbus aborts the process on some malformed input and a parser reading every process's messages must be
        // memory-safe and fuzzable.
        .target(
            name: "KeychainDBus",
            dependencies: ["KeychainThreads", "CKeychainLinux"],
            swiftSettings: strictSettings
        ),
        // keychaind as a library (testable without a socket): peer identity, caller policy, dispatch, the server.
        .target(
            name: "KeychainDaemon",
            dependencies: ["KeychainClient", "KeychainInterface", "KeychainCore", "KeychainStorage", "KeychainWire", "KeychainDBus",
                           "KeychainThreads", "CKeychainLinux",
                           .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "_CryptoExtras", package: "swift-crypto"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "keychaind",
            dependencies: ["KeychainDaemon", "KeychainClient", "KeychainDBus", "CKeychainLinux", "KeychainSync",
                           "KeychainInterface", "KeychainThreads", "KeychainCore", "KeychainStorage",
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                           .product(name: "UnixSignals", package: "swift-service-lifecycle")],
            swiftSettings: strictSettings,
            linkerSettings: releaseLinking
        ),
        // Asymmetric keys (EC P-256/384/521, RSA): generation, Apple's external representations, signatures,
        // encryption. Where key material is used, in an app or (for keys that must not leave) in keychaind.
        .target(
            name: "KeychainKeys",
            dependencies: [
                "KeychainCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        // X.509 certificates read from DER with swift-asn1 (not swift-certificates' X509: it imports Security when it
        // can, ARCHITECTURE §7): what SecCertificate and `cert` items derive from a certificate.
        .target(
            name: "KeychainCertificates",
            dependencies: [
                "KeychainCore", "KeychainKeys", .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        // Apple's spellings on Linux: kSec*, errSec*, SecItem*, SecAccessControl, SecKey, CF stand-ins. No rules of
        // its own.
        .target(
            name: "Security",
            dependencies: ["KeychainClient", "KeychainCore", "KeychainKeys", "KeychainCertificates"],
            swiftSettings: strictSettings
        ),
        // LAContext and LAError with Apple's spellings, over the engine's authentication context.
        .target(
            name: "LocalAuthentication",
            dependencies: ["Security", "KeychainClient", "KeychainCore"],
            swiftSettings: strictSettings
        ),
        // The `security` command's option grammar (getopt and each subcommand's flags), apart so it can be fuzzed.
        .target(
            name: "SecurityCommandLine",
            swiftSettings: strictSettings
        ),
        // The command-line tools' programs (`security`, mirroring macOS's; git's and docker's credential helpers),
        // over the client interface alone.
        // `security import-secrets`: other stores read as items (pass through gpg, KeePassXC's exports, another
        // Secret Service over D-Bus). No cipher here: a keyring file is decrypted by the keychain service.
        .target(
            name: "KeychainMigration",
            dependencies: ["KeychainCore", "KeychainInterface", "KeychainDBus"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "KeychainTools",
            dependencies: ["SecurityCommandLine", "KeychainInterface", "KeychainCore", "KeychainMigration",
                           .product(name: "SwiftASN1", package: "swift-asn1")],
            swiftSettings: strictSettings
        ),
        // `security`: links no engine, so that going through keychaind it starts fast (EmbeddedTwin).
        .executableTarget(
            name: "SecurityTool",
            dependencies: ["KeychainTools", "KeychainInterface", "KeychainCore"],
            swiftSettings: strictSettings,
            linkerSettings: releaseLinking
        ),
        // The same tools with the engine linked in: what they become when the keychain is opened in-process.
        .executableTarget(
            name: "keychain-embedded",
            dependencies: ["KeychainTools", "KeychainClient", "KeychainCore", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strictSettings,
            linkerSettings: releaseLinking
        ),
        // Credential helpers for git and docker: like `security`, the client interface only (their programs are in
        // KeychainTools; keychain-embedded runs them with the engine).
        .executableTarget(
            name: "GitCredentialKeychain",
            dependencies: ["KeychainTools", "KeychainInterface", "KeychainCore"],
            swiftSettings: strictSettings,
            linkerSettings: releaseLinking
        ),
        .executableTarget(
            name: "DockerCredentialKeychain",
            dependencies: ["KeychainTools", "KeychainInterface", "KeychainCore"],
            swiftSettings: strictSettings,
            linkerSettings: releaseLinking
        ),
        // Stores and reads a secret from the shell through the native API (the README's first command).
        .executableTarget(
            name: "keychain-example",
            dependencies: ["KeychainClient", "KeychainCore"],
            swiftSettings: strictSettings,
            linkerSettings: releaseLinking
        ),
        // Sync (docs/SYNC.md): what a device and the server agree on. Values, canonical bytes and the item cipher;
        // no I/O, so both sides and the fuzzers share it.
        .target(
            name: "KeychainSyncProtocol",
            dependencies: [
                "KeychainCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        // The device side of sync, run by keychaind: device keys, the account's item keys, push and pull over HTTPS.
        .target(
            name: "KeychainSync",
            dependencies: [
                "KeychainSyncProtocol", "KeychainClient", "KeychainInterface", "KeychainThreads", "KeychainStorage", "KeychainCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // A server whose certificate a private CA signed: trusted through that CA alone (--ca-file).
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // The sync server as a library (routes, PostgreSQL store, migrations, request signatures), testable in-process.
        .target(
            name: "KeychainSyncServer",
            dependencies: [
                "KeychainSyncProtocol",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "keychain-sync-server",
            dependencies: ["KeychainSyncServer", "KeychainInterface"],
            swiftSettings: strictSettings,
            linkerSettings: releaseLinking
        ),
        // Shared by the test targets only: a seeded generator, the status of a call.
        .target(
            name: "KeychainTestSupport",
            dependencies: ["KeychainCore"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "KeychainCoreTests",
            dependencies: ["KeychainCore"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "KeychainMigrationTests",
            dependencies: ["KeychainMigration", "KeychainCore"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "KeychainStorageTests",
            dependencies: [
                "KeychainCore", "KeychainStorage", "KeychainClient", "KeychainTestSupport", "KeychainThreads",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            resources: [.copy("Fixtures")],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["KeychainClient", "KeychainCore", "KeychainInterface", "KeychainTestSupport", "KeychainDBus",
                           "KeychainWire"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "SecurityCompatTests",
            dependencies: ["Security", "LocalAuthentication", "KeychainCore", "KeychainInterface", "KeychainTestSupport",
                           .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(
            name: "KeychainDaemonTests",
            dependencies: ["KeychainDaemon", "KeychainWire", "KeychainClient", "KeychainCore", "KeychainKeys",
                           "KeychainTestSupport", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "KeychainDBusTests",
            dependencies: ["KeychainDBus", "KeychainTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "KeychainSyncTests",
            dependencies: ["KeychainSyncServer", "KeychainSyncProtocol", "KeychainSync", "KeychainClient", "KeychainInterface",
                           "KeychainStorage",
                           "KeychainCore", "KeychainTestSupport",
                           .product(name: "PostgresNIO", package: "postgres-nio"),
                           .product(name: "AsyncHTTPClient", package: "async-http-client"),
                           .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "KeychainClientTests",
            dependencies: ["KeychainClient", "KeychainCore", "KeychainStorage", "KeychainWire", "KeychainThreads", "CKeychainLinux",
                           "KeychainTestSupport"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
