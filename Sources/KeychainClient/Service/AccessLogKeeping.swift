import KeychainCore
import KeychainStorage

/// What keeps the access log (keychaind; docs/ACCESS-LOG.md). The embedded service reads it through this after the
/// owner's keychain password; a process that embeds the keychain keeps no log.
public protocol AccessLogKeeping: Sendable {
    /// `login` is open and unlocked: it gets the log's private key if it does not hold it yet, and the log is
    /// sealed to the key it holds.
    func keyReady(in login: KeychainFile)
    /// The records `request` asks for, or the check, opened with what the login keychain keeps for the log
    /// (its private key, the runs' secrets, the last checkpoint: ``AccessLogSecrets``).
    func report(_ request: AccessLogRequest, secrets: SecretBytes) throws(KeychainError) -> AccessLogReport
}
