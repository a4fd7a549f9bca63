import Foundation
import KeychainCore
import KeychainInterface
import KeychainStorage
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The user's default keychain and keychain search list, kept in `$XDG_CONFIG_HOME/keychain/`
/// (`default-keychain`: one path; `search-list`: one path per line), as macOS keeps them in its preferences.
public struct KeychainPreferences: Sendable {
    public let locations: KeychainLocations
    // Worked out once: Foundation's URL building costs more than the cached reads below.
    private let defaultKeychainFile: URL
    private let loginKeychainFile: URL
    private let searchListFile: URL
    private let filePaths: (defaultKeychain: String, loginKeychain: String, searchList: String, standardLogin: String,
                            directory: String)
    /// The last ``paths()`` and the directory watch's stamp it was read at.
    private let memo = Memo()
    private final class Memo: Sendable {
        let kept = Mutex<(stamp: UInt64, paths: Paths)?>(nil)
    }
    private let standardLoginKeychain: URL

    public init(locations: KeychainLocations = .current()) {
        self.locations = locations
        defaultKeychainFile = locations.defaultKeychainFile
        loginKeychainFile = locations.loginKeychainFile
        searchListFile = locations.searchListFile
        standardLoginKeychain = locations.loginKeychain
        filePaths = (defaultKeychainFile.path, loginKeychainFile.path, searchListFile.path, standardLoginKeychain.path,
                     locations.configDirectory.path)  // as the files are read: `..` after a link is the kernel's
    }

    /// The default keychain: the configured one, else the login keychain.
    public func defaultKeychain() -> URL {
        if let text = read(defaultKeychainFile)?.trimmingCharacters(in: .whitespacesAndNewlines),
            !text.isEmpty
        {
            return URL(fileURLWithPath: text)
        }
        return loginKeychain()
    }

    /// The login keychain: the configured one, else `login` in the keychain directory.
    public func loginKeychain() -> URL {
        if let text = read(loginKeychainFile)?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty {
            return URL(fileURLWithPath: text)
        }
        return standardLoginKeychain
    }

    /// Sets (or, with nil, resets to `login`) the login keychain.
    public func setLoginKeychain(_ url: URL?) throws(KeychainError) {
        try write(loginKeychainFile, url.map { $0.path + "\n" } ?? "")
    }

    /// Sets (or, with nil, resets to `login`) the default keychain.
    public func setDefaultKeychain(_ url: URL?) throws(KeychainError) {
        try write(defaultKeychainFile, url.map { $0.path + "\n" } ?? "")
    }

    /// The keychains searched when none is named: the configured list, else the default keychain alone.
    public func searchList() -> [URL] {
        guard let text = read(searchListFile) else { return [defaultKeychain()] }
        return text.split(separator: "\n").map(String.init).filter { !$0.isEmpty }.map { URL(fileURLWithPath: $0) }
    }

    /// The default keychain, the login keychain and the search list as standardized paths, as the keychain service
    /// compares them. Worked out again only when one of the three files changed (keychaind asks on every call).
    public func paths() -> Paths { watchedPaths().paths }

    /// ``paths()``, and the directory watch's stamp they hold for (``DirectoryWatch``); nil when they are not kept
    /// (no watch, or a preference file that is a symbolic link).
    func watchedPaths() -> (paths: Paths, stamp: UInt64?) {
        // Unchanged while nothing in the preferences' directory changed: one read(2), no path looked up.
        let stamp = DirectoryWatch.shared.stamp(covering: filePaths.directory, .contents)
        if let stamp, let kept = memo.kept.withLock({ $0 }), kept.stamp == stamp { return (kept.paths, stamp) }
        let paths = readPaths()
        // A preference file that is a symbolic link may be changed where no watch sees it: never kept then.
        guard let stamp, !linked() else { return (paths, nil) }
        memo.kept.withLock { $0 = (stamp, paths) }
        return (paths, stamp)
    }

    /// Whether one of the three files is a symbolic link.
    private func linked() -> Bool {
        [filePaths.defaultKeychain, filePaths.loginKeychain, filePaths.searchList].contains { path in
            var info = stat()
            return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK
        }
    }

    /// The paths as the three files say now.
    private func readPaths() -> Paths {
        let texts = Texts(defaultKeychain: read(path: filePaths.defaultKeychain), loginKeychain: read(path: filePaths.loginKeychain),
                          searchList: read(path: filePaths.searchList), standardLogin: filePaths.standardLogin)
        if let known = Self.derived.withLock({ $0[texts] }) { return known }
        func firstLine(_ text: String?) -> String? {
            guard let line = text?.trimmingCharacters(in: .whitespacesAndNewlines), !line.isEmpty else { return nil }
            return line
        }
        let login = StandardPath.of(firstLine(texts.loginKeychain) ?? texts.standardLogin)
        let preferred = firstLine(texts.defaultKeychain).map(StandardPath.of) ?? login
        let list = texts.searchList.map { text in
            text.split(separator: "\n").map(String.init).filter { !$0.isEmpty }.map(StandardPath.of)
        } ?? [preferred]
        let paths = Paths(defaultKeychain: preferred, loginKeychain: login, searchList: list)
        Self.derived.withLock { derived in
            if derived.count > 16 { derived.removeAll() }
            derived[texts] = paths
        }
        return paths
    }

    public struct Paths: Sendable, Hashable {
        public let defaultKeychain: String
        public let loginKeychain: String
        public let searchList: [String]
    }

    /// What ``paths()`` is a pure function of.
    private struct Texts: Hashable {
        let defaultKeychain: String?, loginKeychain: String?, searchList: String?, standardLogin: String
    }

    private static let derived = Mutex<[Texts: Paths]>([:])

    /// Replaces the search list; an empty list clears it.
    public func setSearchList(_ urls: [URL]) throws(KeychainError) {
        try write(searchListFile, urls.map { $0.path + "\n" }.joined())
    }

    /// Deletes a keychain file and drops it from the search list and the default.
    public func deleteKeychain(_ url: URL) throws(KeychainError) {
        try KeychainFile.delete(at: url)
        if read(searchListFile) != nil {
            try setSearchList(searchList().filter { $0.standardizedFileURL != url.standardizedFileURL })
        }
        if defaultKeychain().standardizedFileURL == url.standardizedFileURL, read(defaultKeychainFile) != nil {
            try setDefaultKeychain(nil)
        }
    }

    /// The file's text (nil when it does not exist), read again only when the file changed: keychaind answers
    /// every Secret Service call from the search list and the default keychain, and the files are small but the
    /// reads were a fifth of its work per call. One `stat` tells a replaced or rewritten file (writes are atomic
    /// renames: a new inode) from the one read before.
    private func read(_ url: URL) -> String? { read(path: url.path) }

    private func read(path: String) -> String? { Self.files.value(at: path) { $0 } }

    private static let files = ChangedFileCache<String>()

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
