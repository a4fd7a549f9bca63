import Crypto
import Foundation
import GRDB
import KeychainCore

/// The MACed summary of every row: an epoch, a count, and the XOR of a keyed MAC per row. The XOR of PRF
/// outputs under a secret key is a set MAC that can be updated per write in O(1) (Bellare–Micciancio style).
struct Manifest {
    var epoch: Int64
    var count: Int64
    var digest: Data

    struct Changes {
        var removed: [[UInt8]] = []
        var added: [[UInt8]] = []
    }

    /// A row's share of the digest (format 2): its identity, class, generation, every index column and its rowid,
    /// so that swapped rowids (which reorder results) and edited index values (which hide items) are caught by the
    /// full scan as surely as removed rows.
    static func contribution(_ row: RowIdentity, key: SymmetricKey) -> [UInt8] { rowMAC(row, key: key, format: 2) }

    /// Format 1's share, which covered neither the rowid nor the group, account and service indexes (read only to
    /// check a format-1 file before migrating it).
    static func contributionV1(_ row: RowIdentity, key: SymmetricKey) -> [UInt8] { rowMAC(row, key: key, format: 1) }

    /// ``contribution(_:key:)`` with the key schedule computed once, for the row scan at every open (which reads
    /// every row: the per-call HMAC key setup was a third of its cost).
    static func contributions(key: SymmetricKey) -> (RowIdentity) -> [UInt8] {
        let keyed = HMAC<SHA256>(key: key)
        return { row in
            var mac = keyed
            mac.update(data: rowMACInput(row, format: 2))
            return Array(mac.finalize())
        }
    }

    private static func rowMAC(_ row: RowIdentity, key: SymmetricKey, format: Int) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: rowMACInput(row, format: format), using: key))
    }

    private static func rowMACInput(_ row: RowIdentity, format: Int) -> [UInt8] {
        var aad = AAD(format >= 2 ? "kc2/row" : "kc1/row")
        if format >= 2 { aad.append(row.rowID) }
        aad.append(row.uuid)
        aad.append(row.kind)
        aad.append(row.accessibility)
        aad.append(row.sync)
        aad.append(row.generation)
        aad.append(row.primaryIndex)
        if format >= 2 {
            aad.append(row.groupIndex)
            aad.append(row.accountIndex)
            aad.append(row.serviceIndex)
        }
        return aad.bytes
    }

    mutating func apply(_ changes: Changes) {
        var d = [UInt8](digest)
        for c in changes.removed + changes.added { for i in 0..<32 { d[i] ^= c[i] } }
        digest = Data(d)
        count += Int64(changes.added.count - changes.removed.count)
    }

    /// What the MAC covers. From format 2 the format number too, so a file cannot be passed off as an older one.
    func macInput(_ header: FileHeader, format: Int = FileSchema.formatVersion) -> [UInt8] {
        var aad = AAD("kc1/manifest")
        aad.append(header.dbUUID)
        aad.append(epoch)
        aad.append(count)
        aad.append(digest)
        aad.append(header.keybagGeneration)
        if format >= 2 { aad.append(Int64(format)) }
        return aad.bytes
    }

    func mac(key: SymmetricKey, header: FileHeader) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: macInput(header), using: key))
    }

    /// Whether `stored` is this manifest's MAC (compared in constant time).
    func verify(_ stored: Data, key: SymmetricKey, header: FileHeader, format: Int = FileSchema.formatVersion) -> Bool {
        HMAC<SHA256>.isValidAuthenticationCode(stored, authenticating: macInput(header, format: format), using: key)
    }

    static func load(_ db: Database) throws -> Manifest {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT epoch, item_count, set_digest FROM kc_meta"))
        else {
            throw KeychainError(.invalidKeychain)
        }
        return Manifest(epoch: try row.required("epoch"), count: try row.required("item_count"), digest: try row.required("set_digest"))
    }

    func store(_ db: Database, mac: Data) throws {
        try db.cachedStatement(sql: "UPDATE kc_meta SET epoch = ?, item_count = ?, set_digest = ?, manifest_mac = ?")
            .execute(arguments: [epoch, count, digest, mac])
    }
}

/// The clear columns of an item row that the manifest covers.
struct RowIdentity {
    var rowID: Int64
    var uuid: Data
    var kind: String
    var accessibility: String
    var sync: Int64
    var generation: Int64
    var primaryIndex: Data
    var groupIndex: Data
    var accountIndex: Data
    var serviceIndex: Data
}

extension RowIdentity {
    /// The select list `init(_:)` reads, in order (``ItemRow`` selects these first).
    static let columns = "rowid, uuid, kind, class, sync, gen, primary_index, group_index, account_index, service_index"

    /// The current row of a select that starts with these columns (``RawRows``).
    init(_ columns: RawColumns) throws(KeychainError) {
        self.init(
            rowID: try columns.integer(0), uuid: try columns.blob(1), kind: try columns.text(2),
            accessibility: try columns.text(3), sync: try columns.integer(4), generation: try columns.integer(5),
            primaryIndex: try columns.blob(6), groupIndex: try columns.blob(7), accountIndex: try columns.blob(8),
            serviceIndex: try columns.blob(9))
    }
}
