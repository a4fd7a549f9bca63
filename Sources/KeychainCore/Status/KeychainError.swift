#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The one error type of the keychain: an Apple status code, a message for people, and where it was raised.
///
/// Two errors are equal when their codes are equal, so tests can write `#expect(throws: KeychainError(.itemNotFound))`.
/// The message never contains secret bytes or attribute values.
public struct KeychainError: Error, Hashable, Sendable, CustomStringConvertible {
    public let status: KeychainStatus
    public let message: String
    let location: String
    /// Set when the call stopped for something only the user can give (see ``PendingAccess``); never crosses a process.
    public internal(set) var pending: PendingAccess?

    public init(
        _ status: KeychainStatus, _ detail: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.status = status
        if let detail, !detail.isEmpty {
            self.message = "\(status.message) (\(detail))"
        } else {
            self.message = status.message
        }
        self.location = "\(fileID):\(line)"
    }

    /// An error with its full message as another process reported it (the daemon's answer).
    public init(status: KeychainStatus, message: String, location: String) {
        self.status = status
        self.message = message
        self.location = location
    }

    public static func == (a: Self, b: Self) -> Bool { a.status == b.status }
    public func hash(into hasher: inout Hasher) { hasher.combine(status) }
    public var description: String { "KeychainError(\(status.rawValue)): \(message)" }

    @inline(never)
    public static func param(_ detail: String? = nil, fileID: StaticString = #fileID, line: UInt = #line) -> Self {
        Self(.param, detail, fileID: fileID, line: line)
    }
    @inline(never)
    public static func itemNotFound(fileID: StaticString = #fileID, line: UInt = #line) -> Self {
        Self(.itemNotFound, nil, fileID: fileID, line: line)
    }
    @inline(never)
    public static func duplicateItem(fileID: StaticString = #fileID, line: UInt = #line) -> Self {
        Self(.duplicateItem, nil, fileID: fileID, line: line)
    }
    @inline(never)
    public static func noSuchAttr(_ code: String, fileID: StaticString = #fileID, line: UInt = #line) -> Self {
        Self(.noSuchAttr, "attribute \(code)", fileID: fileID, line: line)
    }
    @inline(never)
    public static func interactionNotAllowed(
        _ detail: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) -> Self {
        Self(.interactionNotAllowed, detail, fileID: fileID, line: line)
    }
    @inline(never)
    public static func decode(_ detail: String? = nil, fileID: StaticString = #fileID, line: UInt = #line) -> Self {
        Self(.decode, detail, fileID: fileID, line: line)
    }
}

extension KeychainStatus {
    /// Lets callers write `catch KeychainStatus.itemNotFound { … }`.
    public static func ~= (code: Self, error: any Error) -> Bool { (error as? KeychainError)?.status == code }
}
