import Foundation
import KeychainCore
import Synchronization
import Testing

@testable import KeychainDaemon

#if canImport(Glibc)
import Glibc
#endif

/// Access groups bound to the programs that use them (docs/DAEMON.md, "Who is asking").
@Suite("Application registry")
struct ApplicationRegistryTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString)")
    var registry: ApplicationRegistry { ApplicationRegistry(stateDirectory: directory) }

    static let first = TrustedApplication(path: "/opt/first/app", digest: Data(repeating: 1, count: 32))
    static let second = TrustedApplication(path: "/opt/second/app", digest: Data(repeating: 2, count: 32))
    static let rebuiltFirst = TrustedApplication(path: "/opt/first/app", digest: Data(repeating: 3, count: 32))

    final class Questions: Sendable {
        let groups = Mutex<[String]>([])
    }

    func admit(_ application: TrustedApplication, _ groups: [String], answer: ConfirmationResponse,
               asked: Questions = Questions(), in registry: ApplicationRegistry? = nil) -> [String] {
        (registry ?? self.registry).admit(Caller(accessGroups: groups, application: application)) { group, _ in
            asked.groups.withLock { $0.append(group) }
            return answer
        }.accessGroups
    }

    @Test("the first program of a group is bound to it; another one claiming it is asked, and Deny leaves it out")
    func firstComeBound() {
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(admit(Self.first, ["com.first", "shared"], answer: .deny) == ["com.first", "shared"])
        let asked = Questions()
        #expect(admit(Self.second, ["com.second", "shared"], answer: .deny, asked: asked) == ["com.second"])
        #expect(asked.groups.withLock { $0 } == ["shared"])
        #expect(admit(Self.second, ["shared"], answer: .unavailable) == [])
    }

    @Test("Allow admits once; Always Allow binds the program, so it is not asked again")
    func allowAndAlways() {
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = admit(Self.first, ["shared"], answer: .deny)
        #expect(admit(Self.second, ["shared"], answer: .allow) == ["shared"])
        #expect(admit(Self.second, ["shared"], answer: .unavailable) == [])
        #expect(admit(Self.second, ["shared"], answer: .alwaysAllow) == ["shared"])
        let asked = Questions()
        #expect(admit(Self.second, ["shared"], answer: .deny, asked: asked) == ["shared"])
        #expect(asked.groups.withLock { $0 }.isEmpty)
        #expect(admit(Self.first, ["shared"], answer: .deny) == ["shared"])
    }

    @Test("a rebuilt binary is a new program: asked before it may use its old group")
    func rebuilt() {
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = admit(Self.first, ["com.first"], answer: .deny)
        #expect(admit(Self.rebuiltFirst, ["com.first"], answer: .unavailable) == [])
        #expect(admit(Self.rebuiltFirst, ["com.first"], answer: .alwaysAllow) == ["com.first"])
    }

    @Test("the keychain's tools (every group) and callers without a known program are left as they are")
    func toolsUntouched() {
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = admit(Self.first, ["security"], answer: .deny)
        let tool = Caller(accessGroups: ["security", Caller.wildcardGroup], application: Self.second)
        #expect(registry.admit(tool) { _, _ in .deny }.accessGroups == ["security", Caller.wildcardGroup])
    }

    @Test("what another process writes into the file counts at the next session (the parsed file is kept only while it is unchanged)")
    func rereadWhenChanged() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        // Kept at once (not only two seconds after a change), so that a kept version is what these reads see.
        let kept = ApplicationRegistry(stateDirectory: directory, unsettledSeconds: 0)
        func admit(_ application: TrustedApplication, _ groups: [String], answer: ConfirmationResponse,
                   asked: Questions = Questions()) -> [String] {
            self.admit(application, groups, answer: answer, asked: asked, in: kept)
        }
        #expect(admit(Self.first, ["shared"], answer: .deny) == ["shared"])
        #expect(admit(Self.first, ["shared"], answer: .deny) == ["shared"])  // the same file: as parsed before
        #expect(admit(Self.second, ["shared"], answer: .deny) == [])

        // Rewritten elsewhere (another keychaind of the user, or the user): the group is the second program's now.
        let file = directory.appendingPathComponent("applications")
        try Data("shared\t\(Self.second.path)\t\(Hex.string(Self.second.digest))\n".utf8).write(to: file, options: .atomic)
        let asked = Questions()
        #expect(admit(Self.second, ["shared"], answer: .deny, asked: asked) == ["shared"])
        #expect(asked.groups.withLock { $0 }.isEmpty)
        #expect(admit(Self.first, ["shared"], answer: .deny) == [])

        // Removed: nothing is bound, and the next program binds afresh.
        try FileManager.default.removeItem(at: file)
        #expect(admit(Self.first, ["shared"], answer: .deny) == ["shared"])
        #expect(admit(Self.second, ["shared"], answer: .unavailable) == [])
    }

    @Test("a rewrite in place of the same size is seen too (a version is kept only once it is two seconds old: a coarse clock could hide the change)")
    func rewriteInPlace() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(admit(Self.first, ["shared"], answer: .deny) == ["shared"])
        // Read once more, then rewritten at once: most often within the same tick of the file's clock.
        #expect(admit(Self.first, ["shared"], answer: .deny) == ["shared"])
        let file = directory.appendingPathComponent("applications")
        let before = try Data(contentsOf: file)
        // The same length, the other program's digest (same path length: /opt/first/app and /opt/second/app differ).
        let line = "shared\t\(Self.rebuiltFirst.path)\t\(Hex.string(Self.rebuiltFirst.digest))\n"
        #expect(line.utf8.count == before.count)
        let fd = open(file.path, O_WRONLY)
        try #require(fd >= 0)
        _ = Array(line.utf8).withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        close(fd)
        #expect(admit(Self.first, ["shared"], answer: .deny) == [])
        #expect(admit(Self.rebuiltFirst, ["shared"], answer: .deny) == ["shared"])
    }
}
