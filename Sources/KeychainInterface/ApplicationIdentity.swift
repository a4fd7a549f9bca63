#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
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
        environment: [String: String] = ProcessEnvironment.current()
    ) -> ApplicationIdentity {
        let dir = executable.deletingLastPathComponent()
        let info = read(BundleInfo.self, dir.appendingPathComponent("Info.plist"))
        let identifier = info?.identifier ?? environment["KEYCHAIN_APPLICATION_IDENTIFIER"] ?? executable.lastPathComponent
        let entitlements = read(Entitlements.self, dir.appendingPathComponent(executable.lastPathComponent + ".entitlements"))
            ?? read(Entitlements.self, dir.appendingPathComponent("Entitlements.plist"))
        var groups = entitlements?.keychainAccessGroups ?? []
        if !groups.contains(identifier) { groups.append(identifier) }
        for group in entitlements?.applicationGroups ?? [] where !groups.contains(group) {
            groups.append(group)
        }
        return ApplicationIdentity(identifier: identifier, accessGroups: groups)
    }

    /// A property list (XML or binary) as `T`; nil when the file is missing or is not a property list.
    static func read<T: Decodable>(_ type: T.Type, _ url: URL) -> T? {
        guard let data = try? Data(contentsOf: url) else { return nil }
        return try? PropertyListDecoder().decode(T.self, from: data)
    }

    /// The keys of an `Info.plist` that matter here; a key of the wrong type counts as absent.
    struct BundleInfo: Decodable {
        var identifier: String?
        enum CodingKeys: String, CodingKey { case identifier = "CFBundleIdentifier" }
        init(from decoder: any Decoder) throws {
            let keys = try decoder.container(keyedBy: CodingKeys.self)
            identifier = (try? keys.decodeIfPresent(String.self, forKey: .identifier)) ?? nil
        }
    }

    /// The keys of an entitlements file that matter here; a key of the wrong type counts as absent.
    struct Entitlements: Decodable {
        var keychainAccessGroups: [String]?
        var applicationGroups: [String]?
        enum CodingKeys: String, CodingKey {
            case keychainAccessGroups = "keychain-access-groups"
            case applicationGroups = "com.apple.security.application-groups"
        }
        init(from decoder: any Decoder) throws {
            let keys = try decoder.container(keyedBy: CodingKeys.self)
            keychainAccessGroups = (try? keys.decodeIfPresent([String].self, forKey: .keychainAccessGroups)) ?? nil
            applicationGroups = (try? keys.decodeIfPresent([String].self, forKey: .applicationGroups)) ?? nil
        }
    }
}
