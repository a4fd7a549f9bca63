import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage
import Testing
@testable import KeychainInterface

/// The stamp that lets the keychain service skip its `stat` and `access` calls: it must move whenever what it covers
/// changed, whoever changed it, or a kept default keychain, search list or open handle would be stale.
@Suite("Directory watch")
struct DirectoryWatchTests {
    static func scratch() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("kc-watch-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        return root
    }

    /// Runs a shell command as another process and waits for it.
    static func elsewhere(_ command: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    @Test("a file made, rewritten in place, replaced by a rename or removed moves the stamp; nothing else does")
    func contents() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let watch = DirectoryWatch()
        let file = root.appendingPathComponent("default-keychain")
        var stamp = try #require(watch.stamp(covering: root.path, .contents))
        #expect(watch.stamp(covering: root.path, .contents) == stamp)
        func moved(_ change: () throws -> Void) rethrows -> Bool {
            try change()
            guard let now = watch.stamp(covering: root.path, .contents) else { return false }
            defer { stamp = now }
            return now != stamp
        }
        #expect(try moved { try Data("a\n".utf8).write(to: file) })
        #expect(watch.stamp(covering: root.path, .contents) == stamp)
        // Same length, same inode: only an event tells.
        #expect(try moved {
            let handle = try FileHandle(forWritingTo: file)
            try handle.write(contentsOf: Data("b\n".utf8))
            try handle.close()
        })
        #expect(try moved { try Data("c\n".utf8).write(to: file, options: .atomic) })
        _ = try Data(contentsOf: file)  // a read changes nothing
        #expect(watch.stamp(covering: root.path, .contents) == stamp)
        #expect(try moved { try FileManager.default.removeItem(at: file) })
        #expect(watch.stamp(covering: root.path, .contents) == stamp)
    }

    @Test("a change another process made is seen at the next call (the kernel queued it before that process went on)")
    func otherProcess() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let watch = DirectoryWatch()
        for command in ["echo x > '\(root.path)/f'", "printf y > '\(root.path)/f'", "mv '\(root.path)/f' '\(root.path)/g'",
                        "rm '\(root.path)/g'"] {
            let before = try #require(watch.stamp(covering: root.path, .contents))
            try Self.elsewhere(command)
            #expect(watch.stamp(covering: root.path, .contents) != before, "\(command)")
        }
    }

    @Test("a directory that does not exist yet is covered through its nearest ancestor, and watched once it is made")
    func missingDirectory() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let watch = DirectoryWatch()
        let deep = root.appendingPathComponent("config/keychain")
        let first = try #require(watch.stamp(covering: deep.path, .contents))
        #expect(watch.stamp(covering: deep.path, .contents) == first)
        // Made by another process, two levels at once.
        try Self.elsewhere("mkdir -p '\(deep.path)'")
        let made = try #require(watch.stamp(covering: deep.path, .contents))
        #expect(made != first)
        // From now on its files are watched (the watch moved from the ancestor to the directory itself).
        var stamp = try #require(watch.stamp(covering: deep.path, .contents))
        try Self.elsewhere("echo x > '\(deep.path)/search-list'")
        #expect(watch.stamp(covering: deep.path, .contents) != stamp)
        // Removed and made again: the new directory is watched, not the old one's leftover watch.
        try Self.elsewhere("rm -r '\(deep.path)' && mkdir '\(deep.path)'")
        stamp = try #require(watch.stamp(covering: deep.path, .contents))
        try Self.elsewhere("echo y > '\(deep.path)/search-list'")
        #expect(watch.stamp(covering: deep.path, .contents) != stamp)
    }

    @Test("a watched directory renamed away: the one made at its path is watched, not the moved one")
    func renamedAway() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let watch = DirectoryWatch()
        let directory = root.appendingPathComponent("keychain")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var stamp = try #require(watch.stamp(covering: directory.path, .contents))
        try Self.elsewhere("mv '\(directory.path)' '\(directory.path).old' && mkdir '\(directory.path)'")
        #expect(watch.stamp(covering: directory.path, .contents) != stamp)
        stamp = try #require(watch.stamp(covering: directory.path, .contents))
        try Self.elsewhere("echo x > '\(directory.path)/default-keychain'")
        #expect(watch.stamp(covering: directory.path, .contents) != stamp)
    }

    @Test("a directory that is a symbolic link is not watched (the link may be pointed elsewhere): nil")
    func linkedDirectory() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let target = root.appendingPathComponent("target")
        try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
        let link = root.appendingPathComponent("link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        #expect(DirectoryWatch().stamp(covering: link.path, .contents) == nil)
        // Dangling: not taken for a directory yet to be made.
        try FileManager.default.removeItem(at: target)
        #expect(DirectoryWatch().stamp(covering: link.path, .contents) == nil)
        #expect(DirectoryWatch().stamp(covering: link.path + "/below", .contents) == nil)
    }

    @Test("a directory watched for its entries: a file written there leaves the stamp alone, one made or removed moves it")
    func entries() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let file = root.appendingPathComponent("login.keychain-db")
        try Data("x".utf8).write(to: file)
        let watch = DirectoryWatch()
        let stamp = try #require(watch.stamp(covering: root.path, .entries))
        let handle = try FileHandle(forWritingTo: file)
        try handle.write(contentsOf: Data("more".utf8))
        try handle.close()
        #expect(watch.stamp(covering: root.path, .entries) == stamp)
        try Self.elsewhere("rm '\(file.path)'")
        #expect(watch.stamp(covering: root.path, .entries) != stamp)
    }

    @Test("a relative path is not watched (it depends on the working directory): nil, so callers look themselves")
    func relative() {
        #expect(DirectoryWatch().stamp(covering: "keychains", .entries) == nil)
    }

    @Test("an open keychain whose file another process deleted is not handed out again; one made again is opened anew")
    func deletedKeychain() throws {
        let (root, configuration) = try OpenKeychainsTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let url = root.appendingPathComponent("gone.keychain-db")
        let keychains = OpenKeychains()
        let first = try keychains.file(at: url, configuration: configuration, createWithPassword: nil)
        #expect(keychains.openFile(atPath: url.path) === first)
        #expect(keychains.openFile(atPath: url.path) === first)
        try Self.elsewhere("rm '\(url.path)'")
        #expect(keychains.openFile(atPath: url.path) == nil)
        #expect(throws: KeychainError.self) {
            _ = try keychains.file(at: url, configuration: configuration, createWithPassword: nil, create: false)
        }
        let second = try keychains.file(at: url, configuration: configuration, createWithPassword: nil)
        #expect(second !== first)
        #expect(keychains.openFile(atPath: url.path) === second)
        keychains.closeAll()
        first.close()
    }

    @Test("a keychain another process deleted and made again at its path between two calls is another file: its old handle is not handed out")
    func replacedKeychain() throws {
        let (root, configuration) = try OpenKeychainsTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let url = root.appendingPathComponent("replaced.keychain-db")
        let spare = root.appendingPathComponent("spare.keychain-db")
        let keychains = OpenKeychains()
        let first = try keychains.file(at: url, configuration: configuration, createWithPassword: nil)
        let elsewhere = OpenKeychains()  // another keychain, made and closed, to be put in its place
        _ = try elsewhere.file(at: spare, configuration: configuration, createWithPassword: nil)
        elsewhere.closeAll()
        #expect(keychains.openFile(atPath: url.path) === first)
        // As `security delete-keychain` then a copy into place would: the file and its WAL and index gone, another there.
        try Self.elsewhere("rm -f '\(url.path)' '\(url.path)-wal' '\(url.path)-shm' && cp '\(spare.path)' '\(url.path)'")
        #expect(keychains.openFile(atPath: url.path) == nil)
        let second = try keychains.file(at: url, configuration: configuration, createWithPassword: nil, create: false)
        #expect(second !== first)
        #expect(keychains.openFile(atPath: url.path) === second)
        keychains.closeAll()
        first.close()
    }
}
