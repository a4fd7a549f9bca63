import Foundation
import GRDB
import GRDBSQLite
import KeychainCore

extension KeychainFile {
    /// The XOR of every row's manifest contribution, and how many rows there are.
    ///
    /// Every open runs this over the whole table, so it reads the columns straight from SQLite: GRDB's generic
    /// decoding of ten columns cost more per row than the MAC. Each value must have exactly the type the writer
    /// stores; anything else (an edited or damaged row) is errSecDecode, as with ``RowIdentity/init(_:)``.
    static func scanRows(_ db: Database, contribution: (RowIdentity) -> [UInt8]) throws -> (digest: Data, count: Int64) {
        let statement = try db.makeStatement(sql: "SELECT \(RowIdentity.columns) FROM items")
        let columns = RawColumns(statement: statement.sqliteStatement)
        defer { sqlite3_reset(columns.statement) }
        var digest = [UInt8](repeating: 0, count: 32)
        var count: Int64 = 0
        while true {
            let step = sqlite3_step(columns.statement)
            if step == SQLITE_DONE { break }
            guard step == SQLITE_ROW else {
                throw DatabaseError(resultCode: ResultCode(rawValue: step),
                                    message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
            }
            let identity = RowIdentity(
                rowID: try columns.integer(0), uuid: try columns.blob(1), kind: try columns.text(2),
                accessibility: try columns.text(3), sync: try columns.integer(4), generation: try columns.integer(5),
                primaryIndex: try columns.blob(6), groupIndex: try columns.blob(7), accountIndex: try columns.blob(8),
                serviceIndex: try columns.blob(9))
            let c = contribution(identity)
            for i in 0..<32 { digest[i] ^= c[i] }
            count += 1
        }
        return (Data(digest), count)
    }
}

/// The current row of a stepped SQLite statement, each column read only if it has the expected storage class.
private struct RawColumns {
    let statement: OpaquePointer

    func integer(_ index: Int32) throws(KeychainError) -> Int64 {
        try expect(SQLITE_INTEGER, index)
        return sqlite3_column_int64(statement, index)
    }

    func blob(_ index: Int32) throws(KeychainError) -> Data {
        try expect(SQLITE_BLOB, index)
        let count = Int(sqlite3_column_bytes(statement, index))
        guard count > 0, let bytes = sqlite3_column_blob(statement, index) else { return Data() }
        return Data(bytes: bytes, count: count)
    }

    func text(_ index: Int32) throws(KeychainError) -> String {
        try expect(SQLITE_TEXT, index)
        let count = Int(sqlite3_column_bytes(statement, index))
        guard count > 0, let bytes = sqlite3_column_text(statement, index) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    private func expect(_ type: Int32, _ index: Int32) throws(KeychainError) {
        guard sqlite3_column_type(statement, index) == type else { throw KeychainError.decode("column \(index)") }
    }
}
