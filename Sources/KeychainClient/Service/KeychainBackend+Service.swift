import Foundation
import KeychainCore
import KeychainInterface

extension KeychainBackend {
    /// The service for this process (see ``KeychainBackend``). `caller` is what an embedded service uses; the daemon
    /// decides for itself.
    public static func service(caller: Caller? = nil, locations: KeychainLocations = .current(),
                               environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(KeychainError) -> any KeychainService
    {
        switch try choose(locations: locations, environment: environment) {
        case .remote(let remote): return remote
        case .embedded: return EmbeddedKeychainService(locations: locations, caller: caller)
        }
    }
}
