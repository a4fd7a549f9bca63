#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The kinds of item a keychain stores (`kSecClass`).
public enum ItemClass: String, CaseIterable, Hashable, Sendable, Codable {
    case genericPassword = "genp"
    case internetPassword = "inet"
    case certificate = "cert"
    case key = "keys"
    /// Not stored: the join of a private key and its certificate. Queries for it arrive with certificates.
    case identity = "idnt"

    /// The classes that have rows of their own.
    public static let stored: [ItemClass] = [.genericPassword, .internetPassword, .certificate, .key]

    /// Parses Apple's class string. `apls` (AppleShare) and anything unknown give `errSecNoSuchClass`.
    public init(code: String) throws(KeychainError) {
        guard let value = ItemClass(rawValue: code) else {
            throw KeychainError(.noSuchClass, "class \(code.debugDescription)")
        }
        self = value
    }
}
