import Foundation
import GRDB
import KeychainCore

/// Maps lower-layer errors to Apple's codes, as Apple's client does for SQLite (semantics §6).
enum StorageErrors {
    static func map(_ error: any Error) -> KeychainError {
        if let error = error as? KeychainError { return error }
        if let error = error as? DatabaseError {
            switch error.resultCode {
            case .SQLITE_CONSTRAINT:
                // Only a uniqueness constraint is Apple's duplicate item; any other one failing is our fault.
                switch error.extendedResultCode {
                case .SQLITE_CONSTRAINT_UNIQUE, .SQLITE_CONSTRAINT_PRIMARYKEY: return .duplicateItem()
                default: return KeychainError(.internalComponent, "a storage constraint failed (\(error.extendedResultCode.rawValue))")
                }
            case .SQLITE_READONLY: return KeychainError(.readOnly)
            case .SQLITE_MISMATCH: return KeychainError(.noSuchAttr)
            case .SQLITE_NOMEM: return KeychainError(.allocate)
            case .SQLITE_IOERR: return KeychainError(.io)
            case .SQLITE_FULL: return KeychainError(.diskFull)
            case .SQLITE_INTERNAL: return KeychainError(.internalComponent)
            case .SQLITE_CORRUPT, .SQLITE_NOTADB: return KeychainError(.decode, "the keychain file is damaged")
            default: return KeychainError(.notAvailable, "SQLite error \(error.resultCode.rawValue)")
            }
        }
        return KeychainError(.internalComponent, String(describing: type(of: error)))
    }
}
