import Foundation
import KeychainCore
import KeychainInterface
import KeychainStorage
import Synchronization

extension KeychainClient {
    /// An embedded client for a keychain by name or path, created (with `password`, or none) if it does not exist.
    public static func open(
        keychain nameOrPath: String, locations: KeychainLocations = .current(), caller: Caller,
        createWithPassword password: SecretBytes? = nil, kdf: KDFParameters = .standard,
        clock: (@Sendable () -> Date)? = nil
    ) throws(KeychainError) -> KeychainClient {
        let service = EmbeddedKeychainService(locations: locations, caller: caller) { configuration in
            configuration.kdf = kdf
            if let clock { configuration.clock = clock }
        }
        let reference = service.resolve(nameOrPath)
        try service.createKeychainIfMissing(reference, password: password, settings: .never)
        return KeychainClient(service: service, keychain: reference)
    }

    /// The process's client for the default keychain (`login` unless configured), with the application's access
    /// groups (see ``ApplicationIdentity``). Opening happens at the first call, not here.
    /// The service is chosen by ``KeychainBackend`` (keychaind when it runs, or with `KEYCHAIN_BACKEND=daemon`).
    public static func shared() throws(KeychainError) -> KeychainClient {
        try sharedClient.withLock { (client: inout KeychainClient?) throws(KeychainError) -> KeychainClient in
            if let client { return client }
            let made = KeychainClient(service: try KeychainBackend.service())
            client = made
            return made
        }
    }

    /// A client of the user's default keychain for a tool that declares its groups when embedded (the credential
    /// helpers); through keychaind the daemon decides. With no keychain at all, the first call creates `login`
    /// without a password and says so once.
    public static func openDefault(caller: Caller, locations: KeychainLocations = .current()) throws(KeychainError)
        -> KeychainClient
    {
        KeychainClient(service: try KeychainBackend.service(caller: caller, locations: locations))
    }
}

/// The process's shared client (``KeychainClient/shared()``).
private let sharedClient = Mutex<KeychainClient?>(nil)
