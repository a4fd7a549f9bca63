// swift-tools-version: 6.1
// libFuzzer targets, in a package of their own: they have no main (libFuzzer brings it) and build only with
//   swift build -c release --sanitize fuzzer -Xswiftc -parse-as-library      (scripts/fuzz.sh does it)
import PackageDescription

import struct Foundation.URL

// A path dependency is named after its folder, which differs between clones.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

let package = Package(
    name: "swift-keychain-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "..")],
    targets: [
        .executableTarget(
            name: "FuzzQueryParser",
            dependencies: [.product(name: "KeychainCore", package: root)],
            path: "Sources/FuzzQueryParser"
        ),
        .executableTarget(
            name: "FuzzKeychainFile",
            dependencies: [
                .product(name: "KeychainCore", package: root),
                .product(name: "KeychainStorage", package: root),
            ],
            path: "Sources/FuzzKeychainFile"
        ),
        .executableTarget(
            name: "FuzzBackup",
            dependencies: [
                .product(name: "KeychainCore", package: root),
                .product(name: "KeychainStorage", package: root),
            ],
            path: "Sources/FuzzBackup"
        ),
        .executableTarget(
            name: "FuzzWire",
            dependencies: [.product(name: "KeychainWire", package: root)],
            path: "Sources/FuzzWire"
        ),
        .executableTarget(
            name: "FuzzCertificate",
            dependencies: [.product(name: "KeychainCertificates", package: root)],
            path: "Sources/FuzzCertificate"
        ),
        .executableTarget(
            name: "FuzzPKCS12",
            dependencies: [.product(name: "KeychainCertificates", package: root)],
            path: "Sources/FuzzPKCS12"
        ),
        .executableTarget(
            name: "FuzzDBus",
            dependencies: [.product(name: "KeychainDBus", package: root)],
            path: "Sources/FuzzDBus"
        ),
        .executableTarget(
            name: "FuzzCommandLine",
            dependencies: [.product(name: "SecurityCommandLine", package: root)],
            path: "Sources/FuzzCommandLine"
        ),
    ],
    swiftLanguageModes: [.v6]
)
