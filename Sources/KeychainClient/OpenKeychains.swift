import Foundation
import KeychainCore
import KeychainStorage
import Synchronization

/// The keychain files a host has open, one handle per file, so that every API of the host shares one lock state
/// (unlocking through `SecKeychainUnlock` unlocks for `SecItemCopyMatching` too). An embedding process uses
/// ``shared``; keychaind makes its own and gives it to every service it runs, so that what it locks, lists and
/// closes is exactly its own.
///
/// Opening a file reads every row (checked against the manifest), which takes a while for a large one: it happens
/// under that file's own lock, so it holds up the callers of that file only, never those of files already open.
public final class OpenKeychains: Sendable {
    public static let shared = OpenKeychains()
    public typealias Opener = @Sendable (URL, KeychainFile.Configuration) throws(KeychainError) -> KeychainFile

    private let files = Mutex<[String: KeychainFile]>([:])
    /// One lock per path, held while that path is opened or created (made for paths that exist or are being
    /// created, so their number is bounded by the files there are).
    private let opening = Mutex<[String: OpeningLock]>([:])
    private final class OpeningLock: Sendable { let mutex = Mutex<Void>(()) }
    private let open: Opener

    public init() {
        open = { url, configuration throws(KeychainError) in try KeychainFile.open(at: url, configuration: configuration) }
    }

    /// With another way of opening a file (tests: one that waits, to show who else is held up meanwhile).
    package init(opening: @escaping Opener) { open = opening }

    /// The configuration every handle of this process gets. There is one handle per file and process, so it must
    /// not depend on which API happened to open the file first: every opener uses this. (Who asks the user is the
    /// calling service's Asker, never the file.)
    public static func standardConfiguration(locations: KeychainLocations = .current()) -> KeychainFile.Configuration {
        KeychainFile.Configuration(stateDirectory: locations.stateDirectory)
    }

    /// The open handle for `url`, opening it, or creating it (with `password`, or none) if it does not exist.
    public func file(at url: URL, configuration: KeychainFile.Configuration, createWithPassword password: SecretBytes?,
                     create: Bool = true) throws(KeychainError) -> KeychainFile {
        try file(atPath: url.path, configuration: configuration, createWithPassword: password, create: create)
    }

    /// As ``file(at:configuration:createWithPassword:create:)``, by path: a file already open costs a dictionary
    /// lookup and one `access(2)`, no URL (making one per call was a tenth of an in-process find).
    public func file(atPath path: String, configuration: KeychainFile.Configuration,
                     createWithPassword password: SecretBytes?, create: Bool = true) throws(KeychainError) -> KeychainFile {
        let key = StandardPath.of(path)
        if let file = files.withLock({ $0[key] }), StandardPath.exists(key) { return file }
        let url = URL(fileURLWithPath: path)
        guard create || StandardPath.exists(key) else { throw KeychainError(.noSuchKeychain, url.lastPathComponent) }
        let lock = opening.withLock { locks in
            if let lock = locks[key] { return lock }
            let lock = OpeningLock()
            locks[key] = lock
            return lock
        }
        return try lock.mutex.withLock { _ throws(KeychainError) -> KeychainFile in
            // Opened by another caller while this one waited.
            if let file = files.withLock({ $0[key] }), StandardPath.exists(key) { return file }
            let file: KeychainFile
            if StandardPath.exists(key) || !create {
                file = try open(url, configuration)
            } else {
                do throws(KeychainError) {
                    file = try KeychainFile.create(at: url, password: password, settings: .never,
                                                   configuration: configuration)
                } catch KeychainStatus.duplicateKeychain {
                    file = try open(url, configuration)  // another process won
                } catch {
                    throw error
                }
            }
            files.withLock { $0[key] = file }
            return file
        }
    }

    /// Takes a handle this process just created (so that later opens share it).
    public func adopt(_ file: KeychainFile) {
        files.withLock { $0[file.url.standardizedFileURL.path] = file }
    }

    /// Every handle open in this process.
    public var all: [KeychainFile] { files.withLock { Array($0.values) } }

    /// Closes every handle (a command-line tool calls this before it exits): the WAL is folded into each file and
    /// the files are recorded as checked, so the next process opens them without re-reading every row.
    public func closeAll() {
        let open = files.withLock { files in
            defer { files.removeAll() }
            return Array(files.values)
        }
        for file in open { file.close() }
    }

    /// Closes one file's handle, if open (see ``KeychainFile/close()``).
    public func close(_ url: URL) {
        let file = files.withLock { $0.removeValue(forKey: url.standardizedFileURL.path) }
        file?.close()
    }

    /// Forgets the handle of a deleted keychain.
    public func forget(_ url: URL) { _ = files.withLock { $0.removeValue(forKey: url.standardizedFileURL.path) } }
}
