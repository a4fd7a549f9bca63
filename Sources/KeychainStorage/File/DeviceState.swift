import Crypto
import Foundation
import KeychainCore

/// Per-keychain state kept beside the device key, MACed under a key only the device key yields: the newest
/// epoch this device has seen (against rollback of the whole file) and the wrong-password counter.
struct DeviceState: Codable, Equatable, Sendable {
    var epoch: Int64 = 0
    var failedAttempts: Int = 0
    /// Seconds since 1970 before which no unlock is tried.
    var nextAttemptAt: Double = 0
    /// The fingerprint of the files (``FileFingerprint``) when this device last read every row against the manifest
    /// or closed the file after writing it itself; nil before that (and in states written by older versions).
    var verifiedFiles: String?
    var mac: Data = Data()

    static let hardLimit = 100

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
        guard let bytes = FileSystem.readFile(path) else { return DeviceState() }
        guard let state = try? JSONDecoder().decode(DeviceState.self, from: Data(bytes)),
            HMAC<SHA256>.isValidAuthenticationCode(state.mac, authenticating: state.macInput(dbUUID: dbUUID), using: key)
        else { throw KeychainError(.decode, "the keychain's device state was altered") }
        return state
    }

    func save(path: String, key: SymmetricKey, dbUUID: UUID, sync: Bool) throws(KeychainError) {
        var copy = self
        copy.mac = Data(HMAC<SHA256>.authenticationCode(for: macInput(dbUUID: dbUUID), using: key))
        guard let json = try? JSONEncoder().encode(copy) else { throw KeychainError(.internalComponent) }
        try FileSystem.replaceFile(path, bytes: [UInt8](json), sync: sync)
    }
}
