#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An Apple `OSStatus` code as the keychain reports it.
///
/// The numbers are Apple's (`base/SecBase.h`); the type stays open so a code we do not name keeps its value.
public struct KeychainStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public init(_ rawValue: Int32) { self.rawValue = rawValue }

    public static let success = Self(0)
    public static let unimplemented = Self(-4)
    public static let diskFull = Self(-34)
    public static let io = Self(-36)
    public static let opWr = Self(-49)
    public static let param = Self(-50)
    public static let wrPerm = Self(-61)
    public static let allocate = Self(-108)
    public static let userCanceled = Self(-128)
    public static let badReq = Self(-909)
    public static let internalComponent = Self(-2070)
    public static let coreFoundationUnknown = Self(-4960)
    public static let missingEntitlement = Self(-34018)
    public static let notAvailable = Self(-25291)
    public static let readOnly = Self(-25292)
    public static let authFailed = Self(-25293)
    public static let noSuchKeychain = Self(-25294)
    public static let invalidKeychain = Self(-25295)
    public static let duplicateKeychain = Self(-25296)
    public static let duplicateCallback = Self(-25297)
    public static let invalidCallback = Self(-25298)
    public static let duplicateItem = Self(-25299)
    public static let itemNotFound = Self(-25300)
    public static let bufferTooSmall = Self(-25301)
    public static let dataTooLarge = Self(-25302)
    public static let noSuchAttr = Self(-25303)
    public static let invalidItemRef = Self(-25304)
    public static let invalidSearchRef = Self(-25305)
    public static let noSuchClass = Self(-25306)
    public static let noDefaultKeychain = Self(-25307)
    public static let interactionNotAllowed = Self(-25308)
    public static let readOnlyAttr = Self(-25309)
    public static let wrongSecVersion = Self(-25310)
    public static let keySizeNotAllowed = Self(-25311)
    public static let noStorageModule = Self(-25312)
    public static let noCertificateModule = Self(-25313)
    public static let noPolicyModule = Self(-25314)
    public static let interactionRequired = Self(-25315)
    public static let dataNotAvailable = Self(-25316)
    public static let dataNotModifiable = Self(-25317)
    public static let createChainFailed = Self(-25318)
    public static let invalidPrefsDomain = Self(-25319)
    public static let inDarkWake = Self(-25320)
    public static let aclNotSimple = Self(-25240)
    public static let policyNotFound = Self(-25241)
    public static let invalidTrustSetting = Self(-25242)
    public static let noAccessForItem = Self(-25243)
    public static let invalidOwnerEdit = Self(-25244)
    public static let trustNotAvailable = Self(-25245)
    public static let unsupportedFormat = Self(-25256)
    public static let unknownFormat = Self(-25257)
    public static let keyIsSensitive = Self(-25258)
    public static let multiplePrivKeys = Self(-25259)
    public static let passphraseRequired = Self(-25260)
    public static let invalidPasswordRef = Self(-25261)
    public static let invalidTrustSettings = Self(-25262)
    public static let noTrustSettings = Self(-25263)
    public static let pkcs12VerifyFailure = Self(-25264)
    public static let authNeeded = Self(-25330)
    public static let decode = Self(-26275)
    public static let `internal` = Self(-26276)
    public static let serviceNotAvailable = Self(-67585)
    public static let networkFailure = Self(-67636)
    public static let invalidData = Self(-67673)
    public static let invalidACL = Self(-67702)
    public static let invalidKeyRef = Self(-67712)
    public static let keyUsageIncorrect = Self(-67731)
    public static let verifyFailed = Self(-67808)
    public static let missingValue = Self(-67871)
    public static let invalidAccessRequest = Self(-67876)

    /// Apple's English message for this code, as `SecCopyErrorMessageString` returns it.
    ///
    /// Unknown codes read `OSStatus <n>`, and errno-range codes (100000...100255) `UNIX[<strerror>]` in the front
    /// end that has `strerror`; here they read `UNIX[errno <n>]`.
    public var message: String {
        if let text = Self.messages.first(where: { $0.code == rawValue })?.text { return text }
        if (100_000...100_255).contains(rawValue) { return "UNIX[errno \(rawValue - 100_000)]" }
        return "OSStatus \(rawValue)"
    }

    /// The exit status the `security` tool gives for this code: its low byte.
    public var exitCode: Int32 { rawValue & 0xff }

    public var description: String { "\(message) (\(rawValue))" }

    /// The messages of `base/SecBase.h` (the comments Apple turns into `SecErrorMessages.strings`).
    /// A list, looked through once per message asked for (an error's words): a dictionary here would make the first
    /// error of every command pay for its table and a scan of the program's conformances.
    static let messages: [(code: Int32, text: String)] = [
        (0, "No error."),
        (-4, "Function or operation not implemented."),
        (-34, "The disk is full."),
        (-36, "I/O error."),
        (-49, "File already open with write permission."),
        (-50, "One or more parameters passed to a function were not valid."),
        (-61, "Write permissions error."),
        (-108, "Failed to allocate memory."),
        (-128, "User canceled the operation."),
        (-909, "Bad parameter or invalid state for operation."),
        (-2070, "An internal component failed."),
        (-4960, "An unknown Core Foundation error occurred."),
        (-34018, "A required entitlement isn't present."),
        (-25291, "No keychain is available. You may need to restart your computer."),
        (-25292, "This keychain cannot be modified."),
        (-25293, "The user name or passphrase you entered is not correct."),
        (-25294, "The specified keychain could not be found."),
        (-25295, "The specified keychain is not a valid keychain file."),
        (-25296, "A keychain with the same name already exists."),
        (-25297, "The specified callback function is already installed."),
        (-25298, "The specified callback function is not valid."),
        (-25299, "The specified item already exists in the keychain."),
        (-25300, "The specified item could not be found in the keychain."),
        (-25301, "There is not enough memory available to use the specified item."),
        (-25302, "This item contains information which is too large or in a format that cannot be displayed."),
        (-25303, "The specified attribute does not exist."),
        (-25304, "The specified item is no longer valid. It may have been deleted from the keychain."),
        (-25305, "Unable to search the current keychain."),
        (-25306, "The specified item does not appear to be a valid keychain item."),
        (-25307, "A default keychain could not be found."),
        (-25308, "User interaction is not allowed."),
        (-25309, "The specified attribute could not be modified."),
        (-25310,
            "This keychain was created by a different version of the system software and cannot be opened."),
        (-25311, "This item specifies a key size which is too large or too small."),
        (-25312,
            "A required component (data storage module) could not be loaded. You may need to restart your computer."),
        (-25313,
            "A required component (certificate module) could not be loaded. You may need to restart your computer."),
        (-25314,
            "A required component (policy module) could not be loaded. You may need to restart your computer."),
        (-25315, "User interaction is required, but is currently not allowed."),
        (-25316, "The contents of this item cannot be retrieved."),
        (-25317, "The contents of this item cannot be modified."),
        (-25318, "One or more certificates required to validate this certificate cannot be found."),
        (-25319, "The specified preferences domain is not valid."),
        (-25320, "In dark wake, no UI possible"),
        (-25240, "The specified access control list is not in standard (simple) form."),
        (-25241, "The specified policy cannot be found."),
        (-25242, "The specified trust setting is invalid."),
        (-25243, "The specified item has no access control."),
        (-25244, "Invalid attempt to change the owner of this item."),
        (-25245, "No trust results are available."),
        (-25256, "Import/Export format unsupported."),
        (-25257, "Unknown format in import."),
        (-25258, "Key material must be wrapped for export."),
        (-25259, "An attempt was made to import multiple private keys."),
        (-25260, "Passphrase is required for import/export."),
        (-25261, "The password reference was invalid."),
        (-25262, "The Trust Settings Record was corrupted."),
        (-25263, "No Trust Settings were found."),
        (-25264, "MAC verification failed during PKCS12 import (wrong password?)"),
        (-25330, "Authentication is needed to perform this operation."),
        (-26267, "A certificate was not signed by its proposed parent."),
        (-26275, "Unable to decode the provided data."),
        (-26276, "An internal error occurred in the Security framework."),
        (-34017, "The operation is incomplete until the callback is made."),
        (-34019, "The keychain database is being upgraded; try again later."),
        (-34020, "The client is not permitted to use this API."),
        (-67585, "The required service is not available."),
        (-67636, "A network failure occurred."),
        (-67731, "Key usage is incorrect."),
        (-67671, "An internal error has occurred."),
        (-67672, "A memory error has occurred."),
        (-67712, "An invalid key was encountered."),
        (-67808, "A cryptographic verification failure has occurred."),
        (-67673, "Invalid data was encountered."),
        (-67694, "An invalid value was detected."),
        (-67700, "Invalid access credentials were encountered."),
        (-67701, "An invalid record was encountered."),
        (-67702, "An invalid ACL was encountered."),
        (-67871, "A missing value was detected."),
        (-67876, "An invalid access request was encountered."),
    ]
}
