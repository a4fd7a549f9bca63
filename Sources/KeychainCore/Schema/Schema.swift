#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Apple's attribute tables for each stored class (semantics §1.3–§1.7) and their uniqueness keys (§2.1).
public enum Schema {
    /// The attributes of `itemClass`, by code. Identity queries may use certificate and key attributes.
    public static func attributes(of itemClass: ItemClass) -> [String: AttributeDescriptor] {
        switch itemClass {
        case .genericPassword: genericPassword
        case .internetPassword: internetPassword
        case .certificate: certificate
        case .key: key
        case .identity: identity
        }
    }

    /// The primary-key attribute codes of `itemClass`, in Apple's schema order.
    public static func primaryKey(of itemClass: ItemClass) -> [String] {
        switch itemClass {
        case .genericPassword: ["acct", "svce", "agrp", "sync", "vwht", "tkid", "musr", "ggrp"]
        case .internetPassword:
            ["acct", "sdmn", "srvr", "ptcl", "atyp", "port", "path", "agrp", "sync", "vwht", "tkid", "musr", "ggrp"]
        case .certificate: ["ctyp", "issr", "slnr", "agrp", "sync", "vwht", "tkid", "musr", "ggrp"]
        case .key:
            [
                "kcls", "klbl", "atag", "crtr", "type", "bsiz", "esiz", "sdat", "edat", "agrp", "sync", "vwht", "tkid",
                "musr", "ggrp",
            ]
        case .identity: []
        }
    }

    private static let common: [AttributeDescriptor] = [
        .init("agrp", .string, primaryKey: true),
        .init("sync", .sync, primaryKey: true),
        .init("vwht", .string, primaryKey: true),
        .init("tkid", .string, primaryKey: true),
        .init("musr", .uuid, primaryKey: true, returned: false),
        .init("ggrp", .string, primaryKey: true),
        .init("pdmn", .access),
        .init("accc", .accessControl),
        .init("cdat", .date),
        .init("mdat", .date),
        .init("labl", .blob),
        .init("alis", .blob),
        .init("tomb", .number, returned: false),
        .init("sha1", .sha1),
    ]

    private static let passwordCommon: [AttributeDescriptor] = [
        .init("acct", .blob, primaryKey: true),
        .init("desc", .blob),
        .init("icmt", .blob),
        .init("crtr", .number),
        .init("type", .number),
        .init("invi", .number),
        .init("nega", .number),
        .init("scrp", .number),
        .init("cusi", .number),
        .init("prot", .blob),
    ]

    static let genericPassword = table(
        common + passwordCommon + [
            .init("svce", .blob, primaryKey: true),
            .init("gena", .blob),
        ])

    static let internetPassword = table(
        common + passwordCommon + [
            .init("sdmn", .blob, primaryKey: true),
            .init("srvr", .blob, primaryKey: true),
            .init("ptcl", .number, primaryKey: true),
            .init("atyp", .blob, primaryKey: true),
            .init("port", .number, primaryKey: true),
            .init("path", .blob, primaryKey: true),
            .init("binn", .data), .init("bini", .data),
            .init("bin0", .data), .init("bin1", .data), .init("bin2", .data), .init("bin3", .data),
        ])

    static let certificate = table(
        common + [
            .init("ctyp", .number, primaryKey: true),
            .init("cenc", .number),
            .init("subj", .data),
            .init("issr", .data, primaryKey: true),
            .init("slnr", .data, primaryKey: true),
            .init("skid", .data),
            .init("pkhh", .data),
        ])

    static let key = table(
        common + [
            .init("kcls", .number, primaryKey: true),
            .init("klbl", .data, primaryKey: true),
            .init("atag", .blob, primaryKey: true),
            .init("crtr", .number, primaryKey: true),
            .init("type", .number, primaryKey: true),
            .init("bsiz", .number, primaryKey: true),
            .init("esiz", .number, primaryKey: true),
            .init("sdat", .date, primaryKey: true),
            .init("edat", .date, primaryKey: true),
        ] + ["perm", "priv", "modi", "sens", "asen", "extr", "next", "encr", "decr", "drve", "sign", "vrfy", "snrc",
             "vyrc", "wrap", "unwp"].map { AttributeDescriptor($0, .number) })

    static let identity: [String: AttributeDescriptor] = certificate.merging(key) { cert, _ in cert }

    private static func table(_ list: [AttributeDescriptor]) -> [String: AttributeDescriptor] {
        Dictionary(list.map { ($0.code, $0) }, uniquingKeysWith: { _, later in later })
    }
}
