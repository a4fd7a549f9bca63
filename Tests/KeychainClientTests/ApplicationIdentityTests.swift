import Foundation
import KeychainClient
import Testing

@Suite("Application identity")
struct ApplicationIdentityTests {
    @Test("bundle identifier and entitlements beside the executable, in Apple's group order")
    func fromPlists() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("app-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let executable = dir.appendingPathComponent("MyApp")
        try Data().write(to: executable)
        let info = try PropertyListSerialization.data(fromPropertyList: ["CFBundleIdentifier": "com.example.myapp"], format: .xml, options: 0)
        try info.write(to: dir.appendingPathComponent("Info.plist"))
        let entitlements = try PropertyListSerialization.data(fromPropertyList: [
            "keychain-access-groups": ["TEAM.shared", "TEAM.other"],
            "com.apple.security.application-groups": ["group.example"],
        ], format: .xml, options: 0)
        try entitlements.write(to: dir.appendingPathComponent("MyApp.entitlements"))
        let identity = ApplicationIdentity.current(executable: executable, environment: ["KEYCHAIN_APPLICATION_IDENTIFIER": "ignored"])
        #expect(identity.identifier == "com.example.myapp")
        #expect(identity.accessGroups == ["TEAM.shared", "TEAM.other", "com.example.myapp", "group.example"])
    }

    @Test("without plists: the environment, else the executable's name")
    func fallbacks() {
        let executable = URL(fileURLWithPath: "/nonexistent/bin/tool")
        #expect(ApplicationIdentity.current(executable: executable, environment: ["KEYCHAIN_APPLICATION_IDENTIFIER": "com.x"]).accessGroups == ["com.x"])
        #expect(ApplicationIdentity.current(executable: executable, environment: [:]).identifier == "tool")
    }
}
