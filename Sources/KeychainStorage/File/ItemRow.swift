import Foundation
import GRDB
import KeychainCore

/// One row of `items` as the engine reads it: every column it uses, decoded once and by position.
///
/// Reading by position spares the lookups by column name (a lowercased string and a hash each, fifteen of them per
/// found item before); each value is still checked for its type, so a damaged or edited row is errSecDecode.
struct ItemRow {
    /// The select list; `init(_:)` reads the columns in this order.
    static let columns =
        "rowid, uuid, kind, class, sync, gen, primary_index, meta, wrapped_key, secret, group_index, account_index, service_index, "
        + "secret_binding"

    let rowID: Int64
    let uuid: Data
    let kind: String
    /// The protection class code as stored in the clear column (the sealed metadata must agree).
    let accessibility: String
    let sync: Int64
    let generation: Int64
    let primaryIndex: Data
    let meta: Data
    let wrappedKey: Data
    let secret: Data
    let groupIndex: Data
    let accountIndex: Data
    let serviceIndex: Data
    /// For rows written by format 1: the metadata hash the secret is bound to (see FileSchema).
    let secretBinding: Data?

    /// The columns the manifest covers.
    var identity: RowIdentity {
        RowIdentity(rowID: rowID, uuid: uuid, kind: kind, accessibility: accessibility, sync: sync,
                    generation: generation, primaryIndex: primaryIndex, groupIndex: groupIndex,
                    accountIndex: accountIndex, serviceIndex: serviceIndex)
    }

    init(_ row: Row) throws(KeychainError) {
        rowID = try row.required(at: 0)
        uuid = try row.required(at: 1)
        kind = try row.required(at: 2)
        accessibility = try row.required(at: 3)
        sync = try row.required(at: 4)
        generation = try row.required(at: 5)
        primaryIndex = try row.required(at: 6)
        meta = try row.required(at: 7)
        wrappedKey = try row.required(at: 8)
        secret = try row.required(at: 9)
        groupIndex = try row.required(at: 10)
        accountIndex = try row.required(at: 11)
        serviceIndex = try row.required(at: 12)
        secretBinding = try row.optional(at: 13)
    }
}

extension RowCursor {
    /// The next row of an `ItemRow.columns` select, decoded; nil at the end.
    func nextItemRow() throws -> ItemRow? { try next().map { row throws(KeychainError) in try ItemRow(row) } }
}
