import Foundation
import KeychainCore
import KeychainStorage

/// The keychain the benchmarks and the memory probe read: `size` generic passwords (service "bench", accounts
/// account-0…, a label each), built once per size under the temporary directory and reused by later runs.
public enum BenchmarkStore {
    public static let root = FileManager.default.temporaryDirectory.appendingPathComponent("swift-keychain-benchmarks")
    public static let password = SecretBytes(utf8: "benchmark password")
    public static let caller = Caller(accessGroups: ["bench"])

    public static func configuration() -> KeychainFile.Configuration {
        KeychainFile.Configuration(stateDirectory: root.appendingPathComponent("state"))
    }

    /// The store's file, created (with the standard KDF) if it does not exist yet.
    public static func url(size: Int) throws -> URL {
        let url = root.appendingPathComponent("keychain-\(size).keychain-db")
        guard !FileManager.default.fileExists(atPath: url.path) else { return url }
        let file = try KeychainFile.create(at: url, password: password, settings: .never, configuration: configuration())
        for start in stride(from: 0, to: size, by: 10_000) {
            try file.addAll((start..<min(size, start + 10_000)).map { i in
                try QueryParser.parse(
                    ["class": "genp", "svce": "bench", "acct": .string("account-\(i)"), "labl": .string("label \(i)"),
                     "v_Data": .data(Data("password-\(i)".utf8))], for: .add)
            }, caller: caller)
        }
        return url
    }
}
