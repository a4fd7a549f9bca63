import Crypto
import Foundation
import KeychainCore
import KeychainStorage

extension EmbeddedKeychainService {
    /// The secret of the sandboxed application `appID`, for the Secret portal (docs/SECRET-SERVICE.md "Sandboxed
    /// applications"): 64 random bytes, made at the first request and kept in the login keychain as a generic
    /// password (service `org.freedesktop.portal.Secret`, account the application id) in a group only keychaind
    /// writes, trusted to no program. Only keychaind calls this, for the portal it has identified; it decides
    /// nothing about the caller itself.
    ///
    /// - Throws: errSecNoSuchKeychain without a login keychain; errSecInteractionNotAllowed while it is locked (it
    ///   must have been unlocked once since keychaind started).
    public func portalSecret(for appID: String) throws(KeychainError) -> SecretBytes {
        // The login keychain at its standard place, never where the preferences point: a program of the user could
        // point them at a keychain whose password it knows, and the next application's secret would be made there.
        let keychain = KeychainReference(path: StandardPath.of(locations.loginKeychain.path))
        guard StandardPath.exists(keychain.path) else { throw KeychainError(.noSuchKeychain, keychain.fileName) }
        let file = try file(keychain)
        let found = try file.keychaindSecret(.portalSecret(appID: appID)) {
            SymmetricKey(size: SymmetricKeySize(bitCount: 512)).withUnsafeBytes { SecretBytes(copying: $0) }
        }
        if found.made { AccessTrail.noteAdded(found.item, keychain: file.url.path) }
        AccessTrail.note(.readSecret, found.item, keychain: file.url.path, decision: .allow)
        return found.secret
    }
}
