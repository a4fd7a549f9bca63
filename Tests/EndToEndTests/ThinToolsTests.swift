import Foundation
import KeychainClient
import KeychainCore
import KeychainTestSupport
import Testing

/// The command-line tools link the client interface only (no GRDB, no SQLite, no swift-crypto, and of Foundation only
/// FoundationEssentials: no ICU), so that through keychaind they start fast; in-process they become
/// `keychain-embedded`, the same programs with the engine.
@Suite("Thin command-line tools and their engine-linked twin")
struct ThinToolsTests {
    static let directory = Tool.binary.deletingLastPathComponent()

    @Test("security and the credential helpers carry no engine and not all of Foundation; keychain-embedded does",
          arguments: ["security", "git-credential-keychain", "docker-credential-keychain"])
    func noEngineLinked(_ name: String) throws {
        let thin = try Data(contentsOf: Self.directory.appendingPathComponent(name))
        // "10Foundation" begins every mangled name of the Foundation module itself (FoundationEssentials' begin
        // "19FoundationEssentials"), statically linked or not; libFoundation.so is its library when linked dynamically.
        let markers = ["sqlite3_prepare_v2", "CCryptoBoringSSL", "4GRDB", "10Foundation", "libFoundation.so"]
        for marker in markers {
            #expect(thin.range(of: Data(marker.utf8)) == nil, "\(name) links \(marker)")
        }
        // The check above can see an engine, and Foundation, where they are.
        let twin = try Data(contentsOf: Self.directory.appendingPathComponent("keychain-embedded"))
        #expect(twin.range(of: Data("4GRDB".utf8)) != nil)
        #expect(twin.range(of: Data("10Foundation".utf8)) != nil)
    }

    @Test("every tool says which release and build it is, without reaching a keychain",
          arguments: [("security", "--version"), ("keychaind", "--version"), ("keychain-embedded", "--version"),
                      ("git-credential-keychain", "--version"), ("docker-credential-keychain", "version")])
    func version(_ name: String, _ flag: String) throws {
        let output = try ChildProcess.run(Self.directory.appendingPathComponent(name).path, arguments: [flag],
                                          environment: ["HOME": "/nonexistent", "PATH": "/usr/bin:/bin"])
        #expect(output.termination == .exited(0))
        // A plain `swift build` is a development build; scripts/install.sh stamps VERSION and the commit.
        #expect(String(decoding: output.stdout, as: UTF8.self) == "\(name) (swift-keychain) development (built with swift build from a checkout)\n")
    }

    @Test("in-process, the tool runs as its twin with its arguments byte for byte")
    func becomesTwin() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        var environment = tool.environment
        environment["KEYCHAIN_BACKEND"] = "embedded"
        // A password that is not UTF-8: Swift's decoded arguments would have lost it on the way to the twin.
        let script = "exec \"$0\" add-generic-password -a a -s s -w \"$(printf 'x\\377y')\""
        let added = try ChildProcess.run("/bin/sh", arguments: ["-c", script, Tool.binary.path],
                                         environment: environment, input: Data())
        #expect(added.termination == .exited(0), "\(String(decoding: added.stderr, as: UTF8.self))")
        let found = try ChildProcess.run(Tool.binary.path, arguments: ["find-generic-password", "-s", "s", "-w"],
                                         environment: environment, input: Data())
        #expect(String(decoding: found.stdout, as: UTF8.self) == "78ff79\n")  // -w prints such bytes as hex
        // (That ps and pgrep still see `security` is checked by the core-dump test, which waits for that name.)
    }

    @Test("without its twin beside it, an in-process tool says what is missing (errSecNotAvailable)")
    func missingTwin() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        let alone = tool.home.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: alone, withIntermediateDirectories: true)
        let copy = alone.appendingPathComponent("security")
        try FileManager.default.copyItem(at: Tool.binary, to: copy)
        var environment = tool.environment
        environment["KEYCHAIN_BACKEND"] = "embedded"
        let output = try ChildProcess.run(copy.path, arguments: ["find-generic-password", "-s", "s"],
                                          environment: environment, input: Data())
        #expect(output.termination == .exited(Int32(truncatingIfNeeded: KeychainStatus.notAvailable.rawValue) & 0xff))
        #expect(String(decoding: output.stderr, as: UTF8.self).contains("keychain-embedded"))
        // Commands that need no keychain still run.
        let help = try ChildProcess.run(copy.path, arguments: ["error", "-25300"], environment: environment, input: Data())
        #expect(String(decoding: help.stdout, as: UTF8.self).contains("-25300"))
    }
}
