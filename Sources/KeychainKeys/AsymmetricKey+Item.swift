import Foundation
import KeychainCore

extension AsymmetricKey {
    /// The `keys` item for this key: `attributes` (the caller's), then what Apple derives from the key itself
    /// (class, type, sizes, application label = SHA-1 of the public key, usage flags, permanence), which the caller
    /// cannot contradict; extractable unless the caller says otherwise; the key's bytes as its data.
    public func itemAttributes(_ attributes: [String: QueryValue]) -> [String: QueryValue] {
        var entries = attributes.filter { !$0.key.hasPrefix("r_") && !$0.key.hasPrefix("m_") }
        let isPrivate = keyClass == .private
        let bits = Int64(keySizeInBits)
        entries["class"] = .string("keys")
        entries["kcls"] = .int(isPrivate ? 1 : 0)
        entries["type"] = .int(type == .rsa ? 42 : 73)
        entries["bsiz"] = .int(bits)
        entries["esiz"] = .int(bits)
        entries["klbl"] = .data(applicationLabel)
        entries["perm"] = .bool(true)
        let usage: [(String, Bool)] = [("encr", !isPrivate), ("decr", isPrivate), ("drve", true), ("sign", isPrivate),
                                       ("vrfy", !isPrivate), ("wrap", !isPrivate), ("unwp", isPrivate)]
        for (code, value) in usage where entries[code] == nil { entries[code] = .bool(value) }
        if entries["extr"] == nil { entries["extr"] = .bool(true) }
        if entries["sens"] == nil { entries["sens"] = .bool(false) }
        entries["v_Data"] = .secret(SecretBytes(externalRepresentation))
        return entries
    }
}
