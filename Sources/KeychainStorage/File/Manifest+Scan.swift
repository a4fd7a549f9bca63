import Foundation
import GRDB
import KeychainCore

extension KeychainFile {
    /// The XOR of every row's manifest contribution, and how many rows there are.
    ///
    /// Every open runs this over the whole table, so it reads the columns straight from SQLite: GRDB's generic
    /// decoding of ten columns cost more per row than the MAC. Each value must have exactly the type the writer
    /// stores; anything else (an edited or damaged row) is errSecDecode, as with ``RowIdentity/init(_:)``.
    static func scanRows(_ db: Database, contribution: (RowIdentity) -> [UInt8]) throws -> (digest: Data, count: Int64) {
        var digest = [UInt8](repeating: 0, count: 32)
        var count: Int64 = 0
        try RawRows.forEachRow(db.makeStatement(sql: "SELECT \(RowIdentity.columns) FROM items"), [], db: db) { columns in
            let c = contribution(try RowIdentity(columns))
            for i in 0..<32 { digest[i] ^= c[i] }
            count += 1
            return true
        }
        return (Data(digest), count)
    }
}
