import Foundation
import KeychainCore
import KeychainInterface
import KeychainStorage

/// A keychain file as the Asker checks answers against it.
public struct FileGate: AskerGate {
    public let file: KeychainFile

    public init(file: KeychainFile) { self.file = file }

    public var keychainName: String { file.url.deletingPathExtension().lastPathComponent }

    public var authenticator: any Authenticator { file.authenticator }

    public func unlock(password: SecretBytes) throws(KeychainError) { try file.unlock(password: password) }

    public func authenticateOwner(password: SecretBytes, context: AuthenticationContext?) throws(KeychainError) -> Bool {
        try file.authenticateOwner(password, for: context ?? AuthenticationContext())
    }

    public func trust(_ application: TrustedApplication, item: UUID, grants: AccessGrants) throws(KeychainError) {
        try file.trust(application, item: item, grants: grants)
    }
}
