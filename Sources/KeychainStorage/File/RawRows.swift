import Foundation
import GRDB
import GRDBSQLite
import KeychainCore

/// Item rows read straight from SQLite: the statement stepped here, each column checked for the storage class the
/// writer stores.
///
/// GRDB's row cursor, on every use, maps the statement's column names into a dictionary and decodes each column
/// through generic code that runs unspecialized from this module; with its arguments' conversion that was a third
/// of the database work of an in-process find (docs/PERFORMANCE.md). Values are checked more strictly than GRDB's
/// checked decoding (which converted text to bytes and bytes to text): a column must have exactly the storage class
/// the writer stores, and a missing, NULL or mistyped value (a damaged or edited file) is errSecDecode, never a trap.
enum RawRows {
    /// Steps `statement` (a select of ``ItemRow/columns``) with `arguments` bound, handing each row to `body` until
    /// it returns false. The statement is reset when this returns, so a cached one holds no read of the file.
    static func forEachItemRow(_ statement: Statement, _ arguments: [DatabaseValue], db: Database,
                               _ body: (ItemRow) throws -> Bool) throws {
        try forEachRow(statement, arguments, db: db) { columns in try body(ItemRow(columns)) }
    }

    /// The first row of `statement` (a select of ``ItemRow/columns``), or nil.
    static func firstItemRow(_ statement: Statement, _ arguments: [DatabaseValue], db: Database) throws -> ItemRow? {
        var first: ItemRow?
        try forEachItemRow(statement, arguments, db: db) { row in
            first = row
            return false
        }
        return first
    }

    /// The item of class `kind` with primary key index `primaryIndex` (at most one: the primary key is unique).
    static func item(kind: String, primaryIndex: Data, db: Database) throws -> ItemRow? {
        try firstItemRow(db.cachedStatement(sql: byPrimaryKey), [kind.databaseValue, primaryIndex.databaseValue], db: db)
    }

    /// The item with persistent identifier `uuid`.
    static func item(uuid: UUID, db: Database) throws -> ItemRow? {
        try firstItemRow(db.cachedStatement(sql: byUUID), [uuidData(uuid).databaseValue], db: db)
    }

    // The selects' text made once (every add and update looks its item up by primary key).
    private static let byPrimaryKey = "SELECT \(ItemRow.columns) FROM items WHERE kind = ? AND primary_index = ?"
    private static let byUUID = "SELECT \(ItemRow.columns) FROM items WHERE uuid = ?"

    /// Every row of `statement` (a select of ``ItemRow/columns``).
    static func allItemRows(_ statement: Statement, _ arguments: [DatabaseValue], db: Database) throws -> [ItemRow] {
        var rows: [ItemRow] = []
        try forEachItemRow(statement, arguments, db: db) { row in
            rows.append(row)
            return true
        }
        return rows
    }

    /// The first column of `statement`'s first row, as an integer; nil when there is no row.
    static func integer(_ statement: Statement, db: Database) throws -> Int64? {
        var value: Int64?
        try forEachRow(statement, [], db: db) { columns in
            value = try columns.integer(0)
            return false
        }
        return value
    }

    /// Runs `statement` (one without rows: BEGIN, COMMIT) to its end.
    static func run(_ statement: Statement, db: Database) throws {
        try forEachRow(statement, [], db: db) { _ in true }
    }

    /// Steps `statement` with `arguments` bound, handing each row's columns to `body` until it returns false.
    static func forEachRow(_ statement: Statement, _ arguments: [DatabaseValue], db: Database,
                           _ body: (RawColumns) throws -> Bool) throws {
        let sqlite = statement.sqliteStatement
        // Whatever the statement's last user left (GRDB resets before it runs one; so does this).
        sqlite3_reset(sqlite)
        sqlite3_clear_bindings(sqlite)
        defer { sqlite3_reset(sqlite) }
        guard Int(sqlite3_bind_parameter_count(sqlite)) == arguments.count else {
            throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "wrong number of statement arguments",
                                sql: statement.sql)
        }
        for (offset, value) in arguments.enumerated() {
            let code = bind(value, at: Int32(offset + 1), to: sqlite)
            guard code == SQLITE_OK else { throw error(code, db: db, statement: statement) }
        }
        let columns = RawColumns(statement: sqlite)
        while true {
            let step = sqlite3_step(sqlite)
            if step == SQLITE_DONE { return }
            guard step == SQLITE_ROW else { throw error(step, db: db, statement: statement) }
            guard try body(columns) else { return }
        }
    }

    private static func bind(_ value: DatabaseValue, at index: Int32, to statement: OpaquePointer) -> Int32 {
        switch value.storage {
        case .null:
            return sqlite3_bind_null(statement, index)
        case .int64(let n):
            return sqlite3_bind_int64(statement, index, n)
        case .double(let d):
            return sqlite3_bind_double(statement, index, d)
        case .string(let s):
            var s = s
            return s.withUTF8 { bytes in
                // An empty buffer may have no address: SQLite would bind NULL, not an empty text.
                guard let base = bytes.baseAddress else { return sqlite3_bind_text(statement, index, "", 0, transient) }
                return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_bind_text(statement, index, $0, Int32(bytes.count), transient)
                }
            }
        case .blob(let data):
            return data.withUnsafeBytes { bytes in
                // An empty blob is a blob, not NULL (which a nil address would bind).
                guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_zeroblob(statement, index, 0) }
                return sqlite3_bind_blob(statement, index, base, Int32(bytes.count), transient)
            }
        }
    }

    /// SQLite copies the bound bytes (SQLITE_TRANSIENT): the Swift buffers are gone once `bind` returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    private static func error(_ code: Int32, db: Database, statement: Statement) -> DatabaseError {
        DatabaseError(resultCode: ResultCode(rawValue: code),
                      message: String(cString: sqlite3_errmsg(db.sqliteConnection)), sql: statement.sql)
    }
}

/// The current row of a stepped SQLite statement, each column read only if it has the expected storage class.
struct RawColumns {
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

    /// A blob, or nil when the column is NULL.
    func optionalBlob(_ index: Int32) throws(KeychainError) -> Data? {
        sqlite3_column_type(statement, index) == SQLITE_NULL ? nil : try blob(index)
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
