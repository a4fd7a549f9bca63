import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage
import Synchronization
import Testing

/// The open files of a host (issue 22 §1: a global lock over opening a keychain file, which reads every row, held
/// up every caller of every file meanwhile).
@Suite("Open keychain files")
struct OpenKeychainsTests {
    /// A scratch directory for keychain files, and the configuration they are made and opened with.
    static func scratch() throws -> (URL, KeychainFile.Configuration) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("kc-open-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        var configuration = KeychainFile.Configuration(stateDirectory: root.appendingPathComponent("state"))
        configuration.kdf = .fastForTests
        return (root, configuration)
    }

    @Test("a file being opened holds up only its own callers: an open file is served meanwhile, and the slow one opens once")
    func openingHoldsOnlyItsFile() throws {
        let (root, configuration) = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let slow = root.appendingPathComponent("slow.keychain-db")
        let quick = root.appendingPathComponent("quick.keychain-db")
        for url in [slow, quick] {
            try KeychainFile.create(at: url, password: nil, settings: .never, configuration: configuration).close()
        }

        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let slowOpens = Atomic(0)
        let keychains = OpenKeychains(opening: { url, configuration throws(KeychainError) in
            if url.lastPathComponent == slow.lastPathComponent {
                slowOpens.add(1, ordering: .relaxed)
                entered.signal()
                release.wait()  // a large file's row scan, held here
            }
            return try KeychainFile.open(at: url, configuration: configuration)
        })
        let open = try keychains.file(at: quick, configuration: configuration, createWithPassword: nil, create: false)

        // Two callers of the slow file: one opens it, the other waits for that handle.
        let callers = DispatchGroup()
        let slowHandles = Mutex<[KeychainFile]>([])
        for _ in 0..<2 {
            callers.enter()
            Thread {
                defer { callers.leave() }
                if let file = try? keychains.file(at: slow, configuration: configuration, createWithPassword: nil, create: false) {
                    slowHandles.withLock { $0.append(file) }
                }
            }.start()
        }
        entered.wait()

        // Meanwhile the open file is served (before, this waited for the slow open: the test's release comes later).
        let served = DispatchSemaphore(value: 0)
        let again = Mutex<KeychainFile?>(nil)
        Thread {
            let file = try? keychains.file(at: quick, configuration: configuration, createWithPassword: nil, create: false)
            again.withLock { $0 = file }
            served.signal()
        }.start()
        let answered = served.wait(timeout: .now() + 20) == .success
        #expect(answered, "a call for an open file waited for another file's open")
        release.signal()
        callers.wait()
        if !answered { served.wait() }
        #expect(again.withLock { $0 } === open)

        let handles = slowHandles.withLock { $0 }
        #expect(handles.count == 2)
        #expect(handles.first === handles.last)
        #expect(slowOpens.load(ordering: .relaxed) == 1)
        keychains.closeAll()
    }

    @Test("once its host stops (closeAll finally), nothing opens, and an open under way closes what it opened")
    func closedForGood() throws {
        let (root, configuration) = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let slow = root.appendingPathComponent("slow.keychain-db")
        try KeychainFile.create(at: slow, password: nil, settings: .never, configuration: configuration).close()
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let keychains = OpenKeychains(opening: { url, configuration throws(KeychainError) in
            entered.signal()
            release.wait()
            return try KeychainFile.open(at: url, configuration: configuration)
        })
        let outcome = Mutex<KeychainStatus?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            let result = Result(catching: { () throws(KeychainError) -> KeychainFile in
                try keychains.file(at: slow, configuration: configuration, createWithPassword: nil, create: false)
            })
            if case .failure(let error) = result { outcome.withLock { $0 = error.status } }
            done.signal()
        }.start()
        entered.wait()
        keychains.closeAll(finally: true)
        release.signal()
        done.wait()
        #expect(outcome.withLock { $0 } == .notAvailable)
        #expect(keychains.all.isEmpty)
        #expect(throws: KeychainError.self) {
            try keychains.file(at: slow, configuration: configuration, createWithPassword: nil, create: false)
        }
    }

    @Test("a path with no keychain is errSecNoSuchKeychain and leaves nothing open")
    func missingFile() throws {
        let keychains = OpenKeychains()
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("none-\(UUID().uuidString).keychain-db")
        let configuration = KeychainFile.Configuration(stateDirectory: FileManager.default.temporaryDirectory)
        #expect(throws: KeychainError.self) {
            try keychains.file(at: missing, configuration: configuration, createWithPassword: nil, create: false)
        }
        #expect(keychains.all.isEmpty)
    }
}
