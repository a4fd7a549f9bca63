import Foundation
import GRDB
import KeychainCore

/// One row of `items` as the engine reads it: every column it uses, decoded once and by position.
///
/// Reading by position spares the lookups by column name (a lowercased string and a hash each, fifteen of them per
/// found item before); each value is still checked for its type, so a damaged or edited row is errSecDecode.
struct ItemRow {
    /// The select list; `init(_:)` reads the columns in this order: the manifest's columns, then the ciphertexts.
    static let columns = RowIdentity.columns + ", meta, wrapped_key, secret, secret_binding"

    /// The clear columns the manifest covers.
    let identity: RowIdentity
    let meta: Data
    let wrappedKey: Data
    let secret: Data
    /// For rows written by format 1: the metadata hash the secret is bound to (see FileSchema).
    let secretBinding: Data?

    var rowID: Int64 { identity.rowID }
    var uuid: Data { identity.uuid }
    var kind: String { identity.kind }
    /// The protection class code as stored in the clear column (the sealed metadata must agree).
    var accessibility: String { identity.accessibility }
    var sync: Int64 { identity.sync }
    var generation: Int64 { identity.generation }
    var primaryIndex: Data { identity.primaryIndex }

    /// The current row of an `ItemRow.columns` select (``RawRows``).
    init(_ columns: RawColumns) throws(KeychainError) {
        identity = try RowIdentity(columns)
        meta = try columns.blob(10)
        wrappedKey = try columns.blob(11)
        secret = try columns.blob(12)
        secretBinding = try columns.optionalBlob(13)
    }
}
