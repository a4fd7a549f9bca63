import Foundation
import KeychainClient

/// What the keychaind benchmarks share: the socket of the keychaind serving this environment's XDG directories, a
/// connection to it, and latency arithmetic.
public let daemonSocket = KeychainLocations.current().daemonSocket

/// A connection to that keychaind (`environment` says where its user can be asked); the benchmark ends when none
/// answers.
@Sendable public func connectToDaemon(environment: [String: String] = ProcessEnvironment.current()) -> RemoteKeychainService {
    guard let client = try? RemoteKeychainService.connect(to: daemonSocket, environment: environment) else {
        FileHandle.standardError.write(Data("\(CommandLine.arguments[0]): no keychaind at \(daemonSocket.path)\n".utf8))
        exit(1)
    }
    return client
}

@Sendable public func micros(_ duration: Duration) -> Int64 {
    duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
}

public func percentile(_ values: [Int64], _ p: Double) -> Int64 {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}
