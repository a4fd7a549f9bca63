#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// When an item's secret can be read (`kSecAttrAccessible`, stored as `pdmn`).
public enum Accessibility: String, CaseIterable, Hashable, Sendable, Codable {
    case whenUnlocked = "ak"
    case afterFirstUnlock = "ck"
    case always = "dk"
    case whenUnlockedThisDeviceOnly = "aku"
    case afterFirstUnlockThisDeviceOnly = "cku"
    case alwaysThisDeviceOnly = "dku"
    case whenPasscodeSetThisDeviceOnly = "akpu"

    /// The value Apple applies when an add names none.
    public static func defaultValue(for itemClass: ItemClass) -> Accessibility {
        itemClass == .certificate ? .always : .whenUnlocked
    }

    /// True for the classes that may never leave this device (backups restore them only here; never synced).
    public var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly,
            .whenPasscodeSetThisDeviceOnly:
            true
        default: false
        }
    }

    /// What unlocks the class key.
    public var protection: Protection {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: .untilLocked
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: .afterFirstUnlock
        case .always, .alwaysThisDeviceOnly: .deviceOnly
        }
    }

    /// How long a class key stays available.
    public enum Protection: Sendable {
        /// Needs the password; forgotten when the keychain locks.
        case untilLocked
        /// Needs the password once; kept until the process that unlocked ends.
        case afterFirstUnlock
        /// Needs only the device key.
        case deviceOnly
    }
}
