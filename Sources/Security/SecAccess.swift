import Foundation
import KeychainCore

#if canImport(Glibc)
import Glibc
#endif

// macOS's legacy access objects: which applications may read an item's secret without asking. On macOS a SecAccess
// is given to SecItemAdd as kSecAttrAccess; here it becomes the item's trusted-application list, which keychaind
// enforces (docs/DAEMON.md, "Who is asking").

/// `kSecAttrAccess` (macOS only): a ``SecAccess`` for the item being added.
public nonisolated(unsafe) let kSecAttrAccess: CFString = "acls" as NSString

/// An application named by the path of its executable (`SecTrustedApplicationCreateFromPath`).
public final class SecTrustedApplication: NSObject, @unchecked Sendable {
    // SAFETY: immutable after init.
    let path: String
    init(path: String) { self.path = path }
    public override var description: String { "<SecTrustedApplication \(path)>" }
}

/// The applications an item trusts (`SecAccessCreate`).
public final class SecAccess: NSObject, @unchecked Sendable {
    // SAFETY: immutable after init.
    let applications: [String]
    init(applications: [String]) { self.applications = applications }
    public override var description: String { "<SecAccess \(applications.count) trusted applications>" }
}

/// The application at `path`, or the calling application when `path` is nil. The file must exist.
public func SecTrustedApplicationCreateFromPath(_ path: UnsafePointer<CChar>?,
                                                _ app: UnsafeMutablePointer<SecTrustedApplication?>) -> OSStatus {
    let given = path.map { String(cString: $0) } ?? "/proc/self/exe"
    guard let canonical = realpath(given, nil) else { return errSecParam }
    defer { free(canonical) }
    app.pointee = SecTrustedApplication(path: String(cString: canonical))
    return errSecSuccess
}

/// An access object trusting `trustedlist` (``SecTrustedApplication`` values); nil trusts the calling application
/// only, an empty array no application at all (every reader is asked). `descriptor` names the item in prompts on
/// macOS; here prompts name the item by its label.
public func SecAccessCreate(_ descriptor: CFString, _ trustedlist: CFArray?,
                            _ accessRef: UnsafeMutablePointer<SecAccess?>) -> OSStatus {
    var paths: [String] = []
    if let trustedlist {
        for entry in trustedlist {
            guard let application = entry as? SecTrustedApplication else { return errSecParam }
            paths.append(application.path)
        }
    } else {
        var own: SecTrustedApplication?
        guard SecTrustedApplicationCreateFromPath(nil, &own) == errSecSuccess, let own else { return errSecParam }
        paths = [own.path]
    }
    accessRef.pointee = SecAccess(applications: paths)
    return errSecSuccess
}
