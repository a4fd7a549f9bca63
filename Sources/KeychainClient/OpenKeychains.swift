import Foundation
import KeychainCore
import KeychainStorage
import Synchronization

/// The keychain files this process has open, one handle per file, so that every API in the process shares one
/// lock state (unlocking through `SecKeychainUnlock` unlocks for `SecItemCopyMatching` too).
public final class OpenKeychains: Sendable {
    public static let shared = OpenKeychains()
    private let files = Mutex<[String: KeychainFile]>([:])

    /// The configuration every handle of this process gets. There is one handle per file and process, so it must
    /// not depend on which API happened to open the file first: every opener uses this. (Who asks the user is the
    /// calling service's Asker, never the file.)
    public static func standardConfiguration(locations: KeychainLocations = .current()) -> KeychainFile.Configuration {
        KeychainFile.Configuration(stateDirectory: locations.stateDirectory)
    }

    /// The open handle for `url`, opening it, or creating it (with `password`, or none) if it does not exist.
    public func file(at url: URL, configuration: KeychainFile.Configuration, createWithPassword password: SecretBytes?,
                     create: Bool = true) throws(KeychainError) -> KeychainFile {
        let key = StandardPath.of(url.path)
        return try files.withLock { (files: inout [String: KeychainFile]) throws(KeychainError) -> KeychainFile in
            if let file = files[key], StandardPath.exists(key) { return file }
            let file: KeychainFile
            if StandardPath.exists(key) || !create {
                file = try KeychainFile.open(at: url, configuration: configuration)
            } else {
                do throws(KeychainError) {
                    file = try KeychainFile.create(at: url, password: password, settings: .never,
                                                   configuration: configuration)
                } catch KeychainStatus.duplicateKeychain {
                    file = try KeychainFile.open(at: url, configuration: configuration)  // another process won
                } catch {
                    throw error
                }
            }
            files[key] = file
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
