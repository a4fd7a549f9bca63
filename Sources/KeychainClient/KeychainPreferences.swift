import Foundation
import KeychainCore
import KeychainStorage

/// The user's default keychain and keychain search list, kept in `$XDG_CONFIG_HOME/keychain/`
/// (`default-keychain`: one path; `search-list`: one path per line), as macOS keeps them in its preferences.
public struct KeychainPreferences: Sendable {
    public let locations: KeychainLocations

    public init(locations: KeychainLocations = .current()) { self.locations = locations }

    /// The default keychain: the configured one, else the login keychain.
    public func defaultKeychain() -> URL {
        if let text = read(locations.defaultKeychainFile)?.trimmingCharacters(in: .whitespacesAndNewlines),
            !text.isEmpty
        {
            return URL(fileURLWithPath: text)
        }
        return loginKeychain()
    }

    /// The login keychain: the configured one, else `login` in the keychain directory.
    public func loginKeychain() -> URL {
        if let text = read(locations.loginKeychainFile)?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty {
            return URL(fileURLWithPath: text)
        }
        return locations.loginKeychain
    }

    /// Sets (or, with nil, resets to `login`) the login keychain.
    public func setLoginKeychain(_ url: URL?) throws(KeychainError) {
        try write(locations.loginKeychainFile, url.map { $0.path + "\n" } ?? "")
    }

    /// Sets (or, with nil, resets to `login`) the default keychain.
    public func setDefaultKeychain(_ url: URL?) throws(KeychainError) {
        try write(locations.defaultKeychainFile, url.map { $0.path + "\n" } ?? "")
    }

    /// The keychains searched when none is named: the configured list, else the default keychain alone.
    public func searchList() -> [URL] {
        guard let text = read(locations.searchListFile) else { return [defaultKeychain()] }
        return text.split(separator: "\n").map(String.init).filter { !$0.isEmpty }.map { URL(fileURLWithPath: $0) }
    }

    /// Replaces the search list; an empty list clears it.
    public func setSearchList(_ urls: [URL]) throws(KeychainError) {
        try write(locations.searchListFile, urls.map { $0.path + "\n" }.joined())
    }

    /// Deletes a keychain file and drops it from the search list and the default.
    public func deleteKeychain(_ url: URL) throws(KeychainError) {
        try KeychainFile.delete(at: url)
        if read(locations.searchListFile) != nil {
            try setSearchList(searchList().filter { $0.standardizedFileURL != url.standardizedFileURL })
        }
        if defaultKeychain().standardizedFileURL == url.standardizedFileURL, read(locations.defaultKeychainFile) != nil {
            try setDefaultKeychain(nil)
        }
    }

    private func read(_ url: URL) -> String? { try? String(contentsOf: url, encoding: .utf8) }

    private func write(_ url: URL, _ text: String) throws(KeychainError) {
        do {
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            try Data(text.utf8).write(to: url, options: .atomic)
        } catch {
            throw KeychainError(.io, "cannot write \(url.lastPathComponent)")
        }
    }
}
