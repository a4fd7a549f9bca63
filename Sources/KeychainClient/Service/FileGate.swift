import Foundation
import KeychainCore
import KeychainInterface
import KeychainStorage

/// A keychain file as the Asker checks answers against it.
public struct FileGate: AskerGate {
    public let file: KeychainFile

    public init(file: KeychainFile) { self.file = file }

    public var keychainName: String { file.url.deletingPathExtension().lastPathComponent }
    public var keychainPath: String { file.url.path }

    public var authenticator: any Authenticator { file.authenticator }

    public func unlock(password: SecretBytes) throws(KeychainError) { try file.unlock(password: password) }

    public func authenticateOwner(password: SecretBytes, context: AuthenticationContext?) throws(KeychainError) -> Bool {
        try file.authenticateOwner(password, for: context ?? AuthenticationContext())
    }

    public func trust(_ application: TrustedApplication, item: UUID, grants: AccessGrants) throws(KeychainError) {
        try file.trust(application, item: item, grants: grants)
    }
}

/// The owner's proof for an act on the whole keychain (a backup, a restore): its password, which also unlocks a
/// locked keychain, so that the person is asked once.
struct OwnerGate: PasswordGate {
    let file: KeychainFile

    var keychainName: String { FileGate(file: file).keychainName }
    var keychainPath: String { file.url.path }

    func unlock(password: SecretBytes) throws(KeychainError) { try file.unlock(password: password) }

    func authenticateOwner(password: SecretBytes, context: AuthenticationContext?) throws(KeychainError) -> Bool {
        guard file.isLocked else { return try file.authenticateOwner(password, for: context ?? AuthenticationContext()) }
        do {
            try file.unlock(password: password)
            return true
        } catch where error.status == .authFailed {
            return false
        }
    }
}
