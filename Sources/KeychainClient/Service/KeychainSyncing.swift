import KeychainCore
import KeychainStorage

/// What runs a keychain's sync (the KeychainSync module, in keychaind): kept apart so that the HTTP client and the
/// sync protocol reach keychaind alone, never a program that embeds the keychain or the thin tools.
public protocol KeychainSyncing: Sendable {
    /// Runs `request` on `file`. Called with no lock held; a locked keychain is reported by throwing (the caller's
    /// Asker unlocks it and calls again).
    /// `confirm` asks the user a yes-or-no question where the asking program cannot answer it (keychaind's display,
    /// or the login terminal); never called with a lock held.
    func perform(_ request: SyncRequest, on file: KeychainFile,
                 confirm: (String) -> ConfirmationResponse) throws(KeychainError) -> SyncReport

    /// A keychain's items changed (a write through keychaind): a background round soon, if it syncs.
    func keychainChanged(at path: String)
}
