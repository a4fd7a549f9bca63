// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "PortingSampleApp",
    dependencies: [.package(path: "../swift-keychain"), .package(path: "../Wrapper")],
    targets: [
        .executableTarget(
            name: "porting-sample",
            dependencies: [
                .product(name: "TinyKeychain", package: "Wrapper"),
                .product(name: "Security", package: "swift-keychain", condition: .when(platforms: [.linux])),
            ]
        )
    ]
)
