import Foundation
import KeychainCore

/// Who this process is to the keychain: an application identifier and its access groups, found the way an app
/// bundle declares them on Apple platforms.
///
/// - Identifier: `CFBundleIdentifier` of an `Info.plist` beside the executable; else `KEYCHAIN_APPLICATION_IDENTIFIER`;
///   else the executable's name.
/// - Access groups, in Apple's order: the `keychain-access-groups` of an entitlements plist beside the executable
///   (`<executable>.entitlements` or `Entitlements.plist`), then the identifier, then
///   `com.apple.security.application-groups`. The first is where items go when a call names no group.
public struct ApplicationIdentity: Sendable, Hashable {
    public var identifier: String
    public var accessGroups: [String]

    public init(identifier: String, accessGroups: [String]) {
        self.identifier = identifier
        self.accessGroups = accessGroups
    }

    public static func current(
        executable: URL = URL(fileURLWithPath: CommandLine.arguments.first ?? "app").resolvingSymlinksInPath(),
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> ApplicationIdentity {
        let dir = executable.deletingLastPathComponent()
        let info = plist(dir.appendingPathComponent("Info.plist"))
        let identifier = (info?["CFBundleIdentifier"] as? String)
            ?? environment["KEYCHAIN_APPLICATION_IDENTIFIER"] ?? executable.lastPathComponent
        let entitlements = plist(dir.appendingPathComponent(executable.lastPathComponent + ".entitlements"))
            ?? plist(dir.appendingPathComponent("Entitlements.plist"))
        var groups = (entitlements?["keychain-access-groups"] as? [String]) ?? []
        if !groups.contains(identifier) { groups.append(identifier) }
        for group in (entitlements?["com.apple.security.application-groups"] as? [String]) ?? [] where !groups.contains(group) {
            groups.append(group)
        }
        return ApplicationIdentity(identifier: identifier, accessGroups: groups)
    }

    static func plist(_ url: URL) -> [String: Any]? {
        guard let data = try? Data(contentsOf: url) else { return nil }
        return (try? PropertyListSerialization.propertyList(from: data, format: nil)) as? [String: Any]
    }
}
