#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A program an item trusts to read its secret without asking: macOS's trusted-application ACL.
///
/// The program is named by its canonical path and the SHA-256 of its executable when it was trusted, so a rebuilt
/// or replaced binary at the same path is asked about again (as macOS asks again after an application changes).
/// An empty digest names the path alone: keychaind gives it to the keychain's own tools in its own installation
/// directory (so that upgrading them does not make every item ask again, as Apple's signed tools keep their
/// identity across updates), and to an executable it cannot read.
public struct TrustedApplication: Sendable, Hashable {
    public var path: String
    public var digest: Data

    /// The same program: the same path, and the same digest unless either names the path alone.
    public func isSameProgram(as other: TrustedApplication) -> Bool {
        path == other.path && (digest == other.digest || digest.isEmpty || other.digest.isEmpty)
    }

    public init(path: String, digest: Data) {
        self.path = path
        self.digest = digest
    }
}

/// Which programs may read an item's secret without the user's yes.
public enum ApplicationAccess: Sendable, Hashable {
    /// Every program (`security add-… -A`).
    case anyApplication
    /// These programs; any other is asked about (Deny / Allow / Always Allow). By default the creating program
    /// alone; `-T app` lists them instead; `-T ""` trusts none, so even the creator is asked.
    case trusted([TrustedApplication])

    /// Whether `application` reads without being asked: the same path with the same executable digest.
    public func trusts(_ application: TrustedApplication) -> Bool {
        switch self {
        case .anyApplication: true
        case .trusted(let list): list.contains { $0.isSameProgram(as: application) }
        }
    }

    /// Whether `application` was trusted in an earlier build (same path, another digest): it has changed since.
    public func trustedEarlierBuild(of application: TrustedApplication) -> Bool {
        guard case .trusted(let list) = self else { return false }
        return list.contains { $0.path == application.path && !$0.isSameProgram(as: application) }
    }

    /// The list with `application` trusted ("Always Allow"), replacing an earlier build at the same path.
    public func trusting(_ application: TrustedApplication) -> ApplicationAccess {
        guard case .trusted(let list) = self else { return self }
        return .trusted(list.filter { $0.path != application.path } + [application])
    }
}

/// What an add asks for as its item's trusted applications, before the paths are resolved to executables.
public enum ApplicationAccessRequest: Sendable, Hashable {
    case anyApplication
    /// Executable paths (empty: none trusted).
    case applications([String])
}
