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

    static func contribution(uuid: Data, kind: String, accessibility: String, sync: Int64, generation: Int64,
                             primaryIndex: Data, key: SymmetricKey) -> [UInt8] {
        var aad = AAD("kc1/row")
        aad.append(uuid)
        aad.append(kind)
        aad.append(accessibility)
        aad.append(sync)
        aad.append(generation)
        aad.append(primaryIndex)
        return Array(HMAC<SHA256>.authenticationCode(for: aad.bytes, using: key))
    }

    mutating func apply(_ changes: Changes) {
        var d = [UInt8](digest)
        for c in changes.removed + changes.added { for i in 0..<32 { d[i] ^= c[i] } }
        digest = Data(d)
        count += Int64(changes.added.count - changes.removed.count)
    }

    func macInput(_ header: FileHeader) -> [UInt8] {
        var aad = AAD("kc1/manifest")
        aad.append(header.dbUUID)
        aad.append(epoch)
        aad.append(count)
        aad.append(digest)
        aad.append(header.keybagGeneration)
        return aad.bytes
    }

    func mac(key: SymmetricKey, header: FileHeader) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: macInput(header), using: key))
    }

    /// Whether `stored` is this manifest's MAC (compared in constant time).
    func verify(_ stored: Data, key: SymmetricKey, header: FileHeader) -> Bool {
        HMAC<SHA256>.isValidAuthenticationCode(stored, authenticating: macInput(header), using: key)
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
