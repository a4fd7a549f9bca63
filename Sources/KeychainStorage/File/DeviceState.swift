import Crypto
import Foundation
import KeychainCore

#if canImport(Glibc)
import Glibc
#endif

/// Per-keychain state kept beside the device key, MACed under a key only the device key yields: the newest
/// epoch this device has seen (against rollback of the whole file) and the wrong-password counter.
struct DeviceState: Codable, Equatable, Sendable {
    var epoch: Int64 = 0
    var failedAttempts: Int = 0
    /// Seconds since 1970 before which no unlock is tried.
    var nextAttemptAt: Double = 0
    /// A files' fingerprint that versions before 2026-11-23 recorded to skip the row scan at open (which was
    /// unsafe: see ``KeychainFile/verifyManifest()``). Still read, because the MAC of such a state covers it;
    /// never written again.
    var verifiedFiles: String?
    var mac: Data = Data()

    static let hardLimit = 100
    /// Wrong passwords tried without a wait.
    static let freeAttempts = 5

    /// The wait imposed after `failures` consecutive wrong passwords (5 free, then 1, 5, 15, 60 minutes).
    static func delay(afterFailures failures: Int) -> Double {
        switch failures {
        case ..<5: 0
        case 5: 60
        case 6: 300
        case 7: 900
        default: 3600
        }
    }

    private func macInput(dbUUID: UUID) -> [UInt8] {
        var aad = AAD("kc1/state")
        aad.append(dbUUID)
        aad.append(epoch)
        aad.append(Int64(failedAttempts))
        aad.append(Int64(bitPattern: nextAttemptAt.bitPattern))
        if let verifiedFiles { aad.append(verifiedFiles) }
        return aad.bytes
    }

    static func load(path: String, key: SymmetricKey, dbUUID: UUID) throws(KeychainError) -> DeviceState {
        try loadIfPresent(path: path, key: key, dbUUID: dbUUID) ?? DeviceState()
    }

    /// The state, or nil when there is no state file.
    static func loadIfPresent(path: String, key: SymmetricKey, dbUUID: UUID) throws(KeychainError) -> DeviceState? {
        guard let bytes = FileSystem.readFile(path) else { return nil }
        // Version 1 states were JSON; they are still read, and rewritten as lines at the next save.
        let parsed = bytes.first == UInt8(ascii: "{")
            ? try? JSONDecoder().decode(DeviceState.self, from: Data(bytes)) : parse(bytes)
        guard let state = parsed,
            HMAC<SHA256>.isValidAuthenticationCode(state.mac, authenticating: state.macInput(dbUUID: dbUUID), using: key)
        else { throw KeychainError(.decode, "the keychain's device state was altered") }
        return state
    }

    /// Runs `body` holding an exclusive lock on the state at `path` (flock on a lock file beside it), so that the
    /// read-modify-write sequences of several processes never lose each other's changes: a counted wrong password,
    /// an epoch. Nothing slow runs under it (the KDF runs after the attempt is recorded).
    static func withLock<T>(path: String, _ body: () throws(KeychainError) -> T) throws(KeychainError) -> T {
        let fd = open(path + ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeychainError(.io, "cannot open the device state's lock (errno \(errno))") }
        defer { close(fd) }  // closing the descriptor releases the lock
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw KeychainError(.io, "cannot lock the device state (errno \(errno))") }
        }
        return try body()
    }

    /// Writes the state as `name value` lines. (Not JSON: every `security` command reads and writes this file,
    /// and a Codable round trip costs a statically linked command about a millisecond of runtime type lookups.)
    func save(path: String, key: SymmetricKey, dbUUID: UUID, sync: Bool) throws(KeychainError) {
        var saved = self
        saved.verifiedFiles = nil
        let mac = Data(HMAC<SHA256>.authenticationCode(for: saved.macInput(dbUUID: dbUUID), using: key))
        var text = "\(Self.magic)\nepoch \(epoch)\nfailed \(failedAttempts)\nnext \(nextAttemptAt.bitPattern)\n"
        text += "mac \(mac.base64EncodedString())\n"
        try FileSystem.replaceFile(path, bytes: Array(text.utf8), sync: sync)
    }

    private static let magic = "keychain-device-state 2"

    private static func parse(_ bytes: [UInt8]) -> DeviceState? {
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        guard lines.first == Substring(magic) else { return nil }
        var state = DeviceState()
        var seen = Set<Substring>()
        for line in lines.dropFirst() {
            guard let space = line.firstIndex(of: " ") else { return nil }
            let name = line[..<space], value = line[line.index(after: space)...]
            guard seen.insert(name).inserted else { return nil }
            switch name {
            case "epoch": guard let v = Int64(value) else { return nil }; state.epoch = v
            case "failed": guard let v = Int(value) else { return nil }; state.failedAttempts = v
            case "next": guard let v = UInt64(value) else { return nil }; state.nextAttemptAt = Double(bitPattern: v)
            case "verified": state.verifiedFiles = String(value)
            case "mac": guard let v = Data(base64Encoded: String(value)) else { return nil }; state.mac = v
            default: return nil
            }
        }
        return seen.isSuperset(of: ["epoch", "failed", "next", "mac"]) ? state : nil
    }
}
