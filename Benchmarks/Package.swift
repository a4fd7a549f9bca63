// swift-tools-version: 6.1
// Benchmarks live in their own package so that users of swift-keychain never resolve the benchmark tooling.
import PackageDescription

import struct Foundation.URL

// A path dependency is named after its folder, which differs between clones.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

let package = Package(
    name: "swift-keychain-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
    ],
    targets: [
        // The store both executables read, built once per size.
        .target(
            name: "BenchmarkFixtures",
            dependencies: [
                .product(name: "KeychainStorage", package: root),
                .product(name: "KeychainCore", package: root),
            ],
            path: "Sources/BenchmarkFixtures"
        ),
        .executableTarget(
            name: "StorageBenchmarks",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "KeychainStorage", package: root),
                .product(name: "KeychainCore", package: root),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Benchmarks/StorageBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "MemoryProbe",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "KeychainStorage", package: root),
                .product(name: "KeychainCore", package: root),
            ],
            path: "Sources/MemoryProbe"
        ),
        // What the keychaind benchmarks share (a connection, latency arithmetic).
        .target(
            name: "DaemonBenchmarkSupport",
            dependencies: [.product(name: "KeychainClient", package: root)],
            path: "Sources/DaemonBenchmarkSupport"
        ),
        .executableTarget(
            name: "DaemonLoad",
            dependencies: [
                "DaemonBenchmarkSupport",
                .product(name: "KeychainClient", package: root),
                .product(name: "KeychainCore", package: root),
            ],
            path: "Sources/DaemonLoad"
        ),
        .executableTarget(
            name: "SecItemFind",
            dependencies: [
                .product(name: "Security", package: root),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Sources/SecItemFind"
        ),
        .executableTarget(
            name: "DaemonScale",
            dependencies: [
                "DaemonBenchmarkSupport",
                .product(name: "KeychainClient", package: root),
                .product(name: "KeychainCore", package: root),
                .product(name: "KeychainWire", package: root),
            ],
            path: "Sources/DaemonScale"
        ),
        .executableTarget(
            name: "PeerWorkload",
            dependencies: [
                .product(name: "KeychainClient", package: root),
                .product(name: "KeychainCore", package: root),
                .product(name: "KeychainStorage", package: root),
            ],
            path: "Sources/PeerWorkload"
        ),
        // Signed item writes against keychain-sync-server instances, from many accounts at once.
        .executableTarget(
            name: "SyncLoad",
            dependencies: [
                .product(name: "KeychainSyncProtocol", package: root),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Sources/SyncLoad"
        ),
    ],
    swiftLanguageModes: [.v6]
)
