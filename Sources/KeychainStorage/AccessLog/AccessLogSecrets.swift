import Crypto
import Foundation
import KeychainCore

/// What the login keychain keeps for the access log (``KeychaindItem/accessLogKey``): the private key that opens
/// the records, the run secrets of the keychaind runs whose files are kept (each run's first MAC keys need its own),
/// and where the log stood when keychaind last stopped cleanly (records cut after that point are noticed even
/// though no keychaind was running).
public struct AccessLogSecrets: Sendable, Equatable {
    public var privateKey: [UInt8]
    public var runSecrets: [[UInt8]]
    public var checkpoint: AccessLogHead?

    /// Run secrets kept: more than the files a log keeps, since every run starts one.
    static let keptRuns = 64

    public init(privateKey: [UInt8], runSecrets: [[UInt8]] = [], checkpoint: AccessLogHead? = nil) {
        self.privateKey = privateKey
        self.runSecrets = runSecrets
        self.checkpoint = checkpoint
    }

    /// Adds a run's secret (the oldest go beyond ``keptRuns``); false when it was there.
    public mutating func add(run secret: [UInt8]) -> Bool {
        guard !runSecrets.contains(secret) else { return false }
        runSecrets.append(secret)
        if runSecrets.count > Self.keptRuns { runSecrets.removeFirst(runSecrets.count - Self.keptRuns) }
        return true
    }

    public var key: Curve25519.KeyAgreement.PrivateKey? { try? .init(rawRepresentation: privateKey) }

    /// version 1 ‖ private key (32) ‖ runs (2) ‖ run secrets (32 each) ‖ checkpoint? (1 ‖ file 4 ‖ sequence 8 ‖ chain 32)
    public var encoded: [UInt8] {
        var out: [UInt8] = [1] + privateKey
        withUnsafeBytes(of: UInt16(runSecrets.count).bigEndian) { out.append(contentsOf: $0) }
        for secret in runSecrets { out += secret }
        if let checkpoint, checkpoint.chain.count == 32 {
            out.append(1)
            withUnsafeBytes(of: checkpoint.file.bigEndian) { out.append(contentsOf: $0) }
            withUnsafeBytes(of: checkpoint.sequence.bigEndian) { out.append(contentsOf: $0) }
            out += checkpoint.chain
        } else {
            out.append(0)
        }
        return out
    }

    public init?(encoded bytes: [UInt8]) {
        // The first form: the private key alone.
        if bytes.count == 32 {
            self.init(privateKey: bytes)
            return
        }
        guard bytes.count >= 1 + 32 + 2 + 1, bytes[0] == 1 else { return nil }
        let count = Int(bytes[33]) << 8 | Int(bytes[34])
        var offset = 35
        guard bytes.count >= offset + count * 32 + 1 else { return nil }
        let runs = (0..<count).map { Array(bytes[(offset + $0 * 32)..<(offset + $0 * 32 + 32)]) }
        offset += count * 32
        var checkpoint: AccessLogHead?
        switch bytes[offset] {
        case 0:
            guard bytes.count == offset + 1 else { return nil }
        case 1:
            guard bytes.count == offset + 1 + 4 + 8 + 32 else { return nil }
            let file = bytes[(offset + 1)..<(offset + 5)].reduce(0) { $0 << 8 | UInt32($1) }
            let sequence = bytes[(offset + 5)..<(offset + 13)].reduce(0) { $0 << 8 | UInt64($1) }
            checkpoint = AccessLogHead(file: file, sequence: sequence, chain: Array(bytes[(offset + 13)...]))
        default:
            return nil
        }
        self.init(privateKey: Array(bytes[1..<33]), runSecrets: runs, checkpoint: checkpoint)
    }
}
