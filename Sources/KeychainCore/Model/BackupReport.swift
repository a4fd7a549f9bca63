/// What `security backup-keychain` wrote or `restore-keychain` did, counted by outcome (issue: backup and restore
/// with Apple's rules).
public struct BackupReport: Sendable, Hashable {
    /// Items in the backup file (a backup), or items written into the keychain (a restore).
    public var items: Int
    /// Of a backup's items: the `…ThisDeviceOnly` ones, sealed so that they restore only on this device.
    public var thisDeviceOnly: Int
    /// A restore: items whose copy in the keychain is as new or newer (the keychain's copy stays).
    public var kept: Int
    /// A restore: `…ThisDeviceOnly` items of a backup made on another device (they cannot be opened here).
    public var skippedOtherDevice: Int
    /// `WhenPasscodeSetThisDeviceOnly` items: never in a backup, as on Apple's devices.
    public var leftOutPasscode: Int
    /// Items behind an application password: their secret cannot be opened without it, so they stay out.
    public var leftOutApplicationPassword: Int

    public init(items: Int = 0, thisDeviceOnly: Int = 0, kept: Int = 0, skippedOtherDevice: Int = 0,
                leftOutPasscode: Int = 0, leftOutApplicationPassword: Int = 0) {
        self.items = items
        self.thisDeviceOnly = thisDeviceOnly
        self.kept = kept
        self.skippedOtherDevice = skippedOtherDevice
        self.leftOutPasscode = leftOutPasscode
        self.leftOutApplicationPassword = leftOutApplicationPassword
    }
}
