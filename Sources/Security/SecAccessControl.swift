import Foundation
@_exported import struct KeychainCore.AccessControl
import KeychainCore

/// `SecAccessControlCreateFlags`, with Apple's bit values.
public struct SecAccessControlCreateFlags: OptionSet, Sendable, Hashable {
    public let rawValue: CFOptionFlags
    public init(rawValue: CFOptionFlags) { self.rawValue = rawValue }
    public static let userPresence = Self(rawValue: 1 << 0)
    public static let biometryAny = Self(rawValue: 1 << 1)
    @available(*, deprecated, renamed: "biometryAny")
    public static let touchIDAny = Self(rawValue: 1 << 1)
    public static let biometryCurrentSet = Self(rawValue: 1 << 3)
    @available(*, deprecated, renamed: "biometryCurrentSet")
    public static let touchIDCurrentSet = Self(rawValue: 1 << 3)
    public static let devicePasscode = Self(rawValue: 1 << 4)
    public static let watch = Self(rawValue: 1 << 5)
    public static let companion = Self(rawValue: 1 << 5)
    public static let or = Self(rawValue: 1 << 14)
    public static let and = Self(rawValue: 1 << 15)
    public static let privateKeyUsage = Self(rawValue: 1 << 30)
    public static let applicationPassword = Self(rawValue: 1 << 31)
}

/// `SecAccessControl`: an item's accessibility plus the constraints that guard it.
public final class SecAccessControl: NSObject, @unchecked Sendable {
    // SAFETY: immutable after init.
    let value: AccessControl
    init(_ value: AccessControl) { self.value = value }

    public override func isEqual(_ object: Any?) -> Bool { (object as? SecAccessControl)?.value == value }
    public override var hash: Int { value.hashValue }
    public override var description: String {
        "<SecAccessControl \(value.protection.rawValue); flags 0x\(String(value.flags.rawValue, radix: 16))>"
    }
}

public typealias SecAccessControlRef = SecAccessControl

/// The flags an access-control object was made with (for LocalAuthentication).
public func accessControlFlags(_ accessControl: SecAccessControl) -> AccessControl.Flags { accessControl.value.flags }

/// Anything that carries an engine authentication context (LocalAuthentication's `LAContext`). Package-only: code
/// outside this package cannot reach the engine side of a context.
package protocol AuthenticationContextProviding: AnyObject {
    var engine: AuthenticationContext { get }
}

public func SecAccessControlGetTypeID() -> CFTypeID { 310 }

/// Creates an access-control object; invalid protections or flag combinations give NULL and an errSecParam error.
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?, _ protection: CFTypeRef, _ flags: SecAccessControlCreateFlags,
    _ errorOut: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? {
    let code = (protection as? String) ?? ""
    do throws(KeychainError) {
        guard let accessibility = Accessibility(rawValue: code) else {
            throw KeychainError.param("unknown protection")
        }
        let value = try AccessControl(
            protection: accessibility, flags: AccessControl.Flags(rawValue: UInt64(flags.rawValue)))
        return SecAccessControl(value)
    } catch {
        errorOut?.pointee = Unmanaged.passRetained(makeCFError(error))
        return nil
    }
}

func makeCFError(_ error: KeychainError) -> CFError {
    NSError(
        domain: "NSOSStatusErrorDomain", code: Int(error.status.rawValue),
        userInfo: [NSLocalizedDescriptionKey: error.message])
}
