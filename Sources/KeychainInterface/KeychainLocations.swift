#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif
import KeychainCore

/// Where keychains, their device key and the user's preferences live (XDG base directories).
///
/// - Keychains: `$XDG_DATA_HOME/keychains/NAME.keychain-db` (default `~/.local/share/keychains`).
/// - Device key and per-keychain state: `$XDG_STATE_HOME/keychain` (default `~/.local/state/keychain`).
/// - Default keychain and search list: `$XDG_CONFIG_HOME/keychain` (default `~/.config/keychain`).
public struct KeychainLocations: Sendable, Hashable {
    public var keychainDirectory: URL
    public var stateDirectory: URL
    public var configDirectory: URL
    /// Where keychaind's socket lives: `$XDG_RUNTIME_DIR/keychain` (else `/tmp/keychain-UID`).
    public var runtimeDirectory: URL

    public init(keychainDirectory: URL, stateDirectory: URL, configDirectory: URL, runtimeDirectory: URL? = nil) {
        self.keychainDirectory = keychainDirectory
        self.stateDirectory = stateDirectory
        self.configDirectory = configDirectory
        self.runtimeDirectory = runtimeDirectory
            ?? URL(fileURLWithPath: "/tmp/keychain-\(getuid())")
    }

    /// keychaind's socket for these locations. One daemon serves one set of keychain, state and config
    /// directories: the user's own are `keychaind.sock`; any other set (tests, a second home) gets a socket of its
    /// own, named by a hash of its directories, so that it never reaches another set's daemon.
    public var daemonSocket: URL { daemonSocket(home: Self.homeDirectory(ProcessEnvironment.current())) }

    /// The socket for these locations when the user's home is `home`.
    func daemonSocket(home: String) -> URL {
        // By path: a URL made while a directory did not exist differs from one made after (a trailing slash), and
        // the client's locations are made before keychaind creates its directories. Joined as strings, as
        // `current(environment:)` joins them.
        let keychains = keychainDirectory.path, state = stateDirectory.path, config = configDirectory.path
        let runtime = runtimeDirectory.path
        func standard(_ name: String) -> String { URL(fileURLWithPath: Self.joined(home, name), isDirectory: true).path }
        if keychains == standard(".local/share/keychains"), state == standard(".local/state/keychain"),
           config == standard(".config/keychain")
        {
            return URL(fileURLWithPath: Self.joined(runtime, "keychaind.sock"), isDirectory: false)
        }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a: stable across processes, unlike Hasher
        for byte in (keychains + "\0" + state + "\0" + config).utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return URL(fileURLWithPath: Self.joined(runtime, "keychaind-\(String(hash, radix: 16)).sock"), isDirectory: false)
    }

    /// The keychain, state and configuration directories, as keychaind names them in its greeting.
    public var servedDirectories: [String] { [keychainDirectory.path, stateDirectory.path, configDirectory.path] }

    /// The locations for the current user, from the environment.
    ///
    /// The paths are joined as strings and made directory URLs once: `appendingPathComponent` asks the file system
    /// whether each result is a directory (a `stat`), and its first use in a process costs a command-line tool more
    /// of its start than the rest of this. The paths are the same either way.
    public static func current(environment: [String: String] = ProcessEnvironment.current()) -> Self {
        let home = Self.homeDirectory(environment)
        func base(_ variable: String, _ fallback: String) -> String {
            if let value = environment[variable], value.hasPrefix("/") { return value }
            return joined(home, fallback)
        }
        func directory(_ path: String) -> URL { URL(fileURLWithPath: path, isDirectory: true) }
        let runtime = environment["XDG_RUNTIME_DIR"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        return Self(
            keychainDirectory: directory(joined(base("XDG_DATA_HOME", ".local/share"), "keychains")),
            stateDirectory: directory(joined(base("XDG_STATE_HOME", ".local/state"), "keychain")),
            configDirectory: directory(joined(base("XDG_CONFIG_HOME", ".config"), "keychain")),
            runtimeDirectory: runtime.map { directory(joined($0, "keychain")) })
    }

    /// `directory/name`, as `appendingPathComponent` joins them (one slash between).
    private static func joined(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    /// Resolves a keychain name or path as macOS does (semantics §7, §8.1): a path beginning with `/` is taken as
    /// is; anything else is relative to the keychain directory (as macOS resolves it under `~/Library/Keychains`),
    /// with the `.keychain-db` naming (`NAME` and `NAME.keychain` both become `NAME.keychain-db`). The one rule for
    /// every front end.
    public func url(forKeychain nameOrPath: String) -> URL {
        if nameOrPath.hasPrefix("/") { return URL(fileURLWithPath: nameOrPath).standardizedFileURL }
        var name = nameOrPath
        if name.hasSuffix(".keychain") { name += "-db" }
        if !name.hasSuffix(".keychain-db") { name += ".keychain-db" }
        return keychainDirectory.appendingPathComponent(name).standardizedFileURL
    }

    public var loginKeychain: URL { url(forKeychain: "login") }
    public var defaultKeychainFile: URL { configDirectory.appendingPathComponent("default-keychain") }
    public var loginKeychainFile: URL { configDirectory.appendingPathComponent("login-keychain") }
    public var searchListFile: URL { configDirectory.appendingPathComponent("search-list") }

    /// `$HOME`, else the user database's home directory.
    static func homeDirectory(_ environment: [String: String]) -> String {
        if let home = environment["HOME"], !home.isEmpty { return home }
        if let entry = getpwuid(getuid()), let directory = entry.pointee.pw_dir { return String(cString: directory) }
        return "/"
    }
}
