import Foundation
import KeychainCore
import KeychainInterface
import KeychainStorage
import Synchronization

/// The keychain files a host has open, one handle per file, so that every API of the host shares one lock state
/// (unlocking through `SecKeychainUnlock` unlocks for `SecItemCopyMatching` too). An embedding process uses
/// ``shared``; keychaind makes its own and gives it to every service it runs, so that what it locks, lists and
/// closes is exactly its own.
///
/// Opening a file reads every row (checked against the manifest), which takes a while for a large one: it happens
/// under its path's lock (one of a fixed set), so it holds up the callers of that file, never those of files
/// already open.
public final class OpenKeychains: Sendable {
    public static let shared = OpenKeychains()
    public typealias Opener = @Sendable (URL, KeychainFile.Configuration) throws(KeychainError) -> KeychainFile

    private let files = Mutex<[String: KeychainFile]>([:])
    /// Moves on after every handle added to ``files`` or taken from it: a handle looked up before is still the one
    /// for its path while this has not moved.
    private let changes = Atomic<UInt64>(0)
    /// For each open file's path, the directory watch's stamp when the file was last seen there (``stillThere(_:)``).
    private let seen = Mutex<[String: UInt64]>([:])
    /// For each open file's path, the file it opened (device and inode, taken before opening). A keychain deleted
    /// and made again at its path by another process between two calls is another file: its old handle must not
    /// be handed out, or what is written through it would go to the deleted file and be lost.
    private let identities = Mutex<[String: FileIdentity]>([:])
    private struct FileIdentity: Equatable {
        var device: UInt64
        var inode: UInt64

        /// The file at `path`, following symbolic links (as opening it does); nil when there is none.
        init?(path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            self.init(info)
        }

        init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }
    /// Set by ``closeAll(finally:)`` when its host stops: an open that was under way then closes what it opened.
    private let closed = Atomic(false)
    /// The locks held while a path is opened, created, adopted, closed or forgotten: a fixed set, each path on one
    /// of them (two paths rarely share one; a client that names any number of paths adds nothing).
    private let pathLocks = (0..<64).map { _ in PathLock() }
    private final class PathLock: Sendable { let mutex = Mutex<Void>(()) }
    private let open: Opener
    /// Told of each file's path once it is open and listed (keychaind's sync watches the keychains it has open).
    private let openObserver = Mutex<(@Sendable (String) -> Void)?>(nil)

    public init() {
        open = { url, configuration throws(KeychainError) in try KeychainFile.open(at: url, configuration: configuration) }
    }

    /// With another way of opening a file (tests: one that waits, to show who else is held up meanwhile).
    package init(opening: @escaping Opener) { open = opening }

    /// Calls `observer` with the path of every file opened from now on, after it is in the list, on the opening
    /// thread (so it must only take note: the file's path lock is held).
    public func observeOpening(_ observer: @escaping @Sendable (String) -> Void) {
        openObserver.withLock { $0 = observer }
    }

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
        if let file = files.withLock({ $0[key] }), stillThere(key).there { return file }
        let url = URL(fileURLWithPath: path)
        guard create || StandardPath.exists(key) else { throw KeychainError(.noSuchKeychain, url.lastPathComponent) }
        return try lock(for: key).mutex.withLock { _ throws(KeychainError) -> KeychainFile in
            // Opened by another caller while this one waited.
            if let file = files.withLock({ $0[key] }), stillThere(key).there { return file }
            guard !closed.load(ordering: .acquiring) else { throw KeychainError(.notAvailable, "the keychain service is stopping") }
            let file: KeychainFile
            // Taken before the open: should the file be replaced in between, the next look sees a mismatch and
            // opens again, rather than keep a handle to a file that is gone.
            var identity = FileIdentity(path: key)
            if identity != nil || !create {
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
                identity = FileIdentity(path: key)
            }
            // Its host stopped meanwhile: nothing would close this handle.
            guard !closed.load(ordering: .acquiring) else {
                file.close()
                throw KeychainError(.notAvailable, "the keychain service is stopping")
            }
            files.withLock { $0[key] = file }
            identities.withLock { $0[key] = identity }
            changes.add(1, ordering: .releasing)
            file.announceIdleDeadline()  // a keychain made unlocked is in the list only now
            openObserver.withLock { $0 }?(file.url.path)
            return file
        }
    }

    /// The handle for `path` if it is open here and its file is still there; nil otherwise (nothing is opened).
    public func openFile(atPath path: String) -> KeychainFile? { watchedOpenFile(atPath: path)?.file }

    /// ``openFile(atPath:)``, with the directory watch's stamp for which the file was known to be there (nil when
    /// it was looked at without a watch).
    func watchedOpenFile(atPath path: String) -> (file: KeychainFile, stamp: UInt64?)? {
        let key = StandardPath.of(path)
        guard let file = files.withLock({ $0[key] }) else { return nil }
        let (there, stamp) = stillThere(key)
        return there ? (file, stamp) : nil
    }

    /// The number of handle changes so far (see ``changes``).
    var changeCount: UInt64 { changes.load(ordering: .acquiring) }

    /// Whether the file at `key` (a standardized path) still exists: a deleted keychain's handle is not handed out.
    /// Looked at once per change in its directory (``DirectoryWatch``), since an `access(2)` per call was a tenth of
    /// an in-process find; every call where the directory cannot be watched, or the path is a symbolic link (whose
    /// target may be elsewhere).
    /// `stamp`: the watch's stamp for which the answer holds, nil when it was looked at without a watch.
    /// The same file, that is: one replaced at its path by another counts as gone (``identities``).
    private func stillThere(_ key: String) -> (there: Bool, stamp: UInt64?) {
        guard let slash = key.utf8.lastIndex(of: UInt8(ascii: "/")), slash != key.utf8.startIndex,
            let stamp = DirectoryWatch.shared.stamp(covering: String(key[..<slash]), .entries)
        else { return (isOpenedFile(key, FileIdentity(path: key)), nil) }
        if seen.withLock({ $0[key] }) == stamp { return (true, stamp) }
        var info = stat()
        guard lstat(key, &info) == 0 else { return (false, nil) }
        if info.st_mode & S_IFMT == S_IFLNK { return (isOpenedFile(key, FileIdentity(path: key)), nil) }
        guard isOpenedFile(key, FileIdentity(info)) else { return (false, nil) }
        seen.withLock { $0[key] = stamp }
        return (true, stamp)
    }

    /// Whether `found` (the file now at `key`) is the one its handle opened; a handle whose file could not be
    /// identified when it was opened counts any file there as its own.
    private func isOpenedFile(_ key: String, _ found: FileIdentity?) -> Bool {
        guard let found else { return false }
        guard let opened = identities.withLock({ $0[key] }) else { return true }
        return opened == found
    }

    private func lock(for key: String) -> PathLock {
        pathLocks[Int(UInt(bitPattern: key.hashValue) % UInt(pathLocks.count))]
    }

    /// Takes a handle this process just created (so that later opens share it).
    public func adopt(_ file: KeychainFile) {
        let key = file.url.standardizedFileURL.path
        lock(for: key).mutex.withLock { _ in
            files.withLock { $0[key] = file }
            identities.withLock { $0[key] = FileIdentity(path: key) }
        }
        changes.add(1, ordering: .releasing)
        file.announceIdleDeadline()
    }

    /// Every handle open in this process.
    public var all: [KeychainFile] { files.withLock { Array($0.values) } }

    /// Closes every handle (a command-line tool calls this before it exits): the WAL is folded into each file and
    /// the files are recorded as checked, so the next process opens them without re-reading every row. `finally`
    /// (keychaind stopping): no file opens after this, and one being opened now is closed when its open ends.
    public func closeAll(finally: Bool = false) {
        if finally { closed.store(true, ordering: .releasing) }
        let open = files.withLock { files in
            defer { files.removeAll() }
            return Array(files.values)
        }
        identities.withLock { $0.removeAll() }
        changes.add(1, ordering: .releasing)
        for file in open { file.close() }
    }

    /// Closes one file's handle, if open (see ``KeychainFile/close()``).
    public func close(_ url: URL) {
        let key = url.standardizedFileURL.path
        let file = lock(for: key).mutex.withLock { _ in
            identities.withLock { _ = $0.removeValue(forKey: key) }
            return files.withLock { $0.removeValue(forKey: key) }
        }
        changes.add(1, ordering: .releasing)
        _ = seen.withLock { $0.removeValue(forKey: key) }
        file?.close()
    }

    /// Forgets the handle of a deleted keychain (after an open of it under way has ended, so it does not come back).
    public func forget(_ url: URL) {
        let key = url.standardizedFileURL.path
        lock(for: key).mutex.withLock { _ in
            identities.withLock { _ = $0.removeValue(forKey: key) }
            _ = files.withLock { $0.removeValue(forKey: key) }
        }
        changes.add(1, ordering: .releasing)
        _ = seen.withLock { $0.removeValue(forKey: key) }
    }
}
