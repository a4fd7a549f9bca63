// swift-tools-version: 6.1
// A wrapper library as published for Apple platforms, with the one change Linux needs: on Linux, `Security` is a
// package product (swift-keychain), so the target depends on it there (docs/PORTING.md, recipe 5).
import PackageDescription

let package = Package(
    name: "TinyKeychain",
    products: [.library(name: "TinyKeychain", targets: ["TinyKeychain"])],
    dependencies: [.package(path: "../swift-keychain")],
    targets: [
        .target(
            name: "TinyKeychain",
            dependencies: [.product(name: "Security", package: "swift-keychain", condition: .when(platforms: [.linux]))]
        )
    ]
)
