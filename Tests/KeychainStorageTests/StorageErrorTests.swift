import GRDB
import KeychainCore
@testable import KeychainStorage
import Testing

/// SQLite's errors as Apple's codes (semantics §6): only a uniqueness constraint is a duplicate item.
@Suite("Storage errors")
struct StorageErrorTests {
    @Test("a unique or primary-key constraint is errSecDuplicateItem; another constraint is an internal failure")
    func constraints() {
        #expect(StorageErrors.map(DatabaseError(resultCode: .SQLITE_CONSTRAINT_UNIQUE)).status == .duplicateItem)
        #expect(StorageErrors.map(DatabaseError(resultCode: .SQLITE_CONSTRAINT_PRIMARYKEY)).status == .duplicateItem)
        #expect(StorageErrors.map(DatabaseError(resultCode: .SQLITE_CONSTRAINT_NOTNULL)).status == .internalComponent)
        #expect(StorageErrors.map(DatabaseError(resultCode: .SQLITE_CONSTRAINT_CHECK)).status == .internalComponent)
    }
}
