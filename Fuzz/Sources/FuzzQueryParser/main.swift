import Foundation
import KeychainCore

/// Turns fuzzer bytes into Apple-style query dictionaries and feeds them to the parser for every operation.
/// The parser must answer every input with a query or a KeychainError, never trap.
struct ByteReader {
    var bytes: [UInt8]
    var position = 0
    var isAtEnd: Bool { position >= bytes.count }

    mutating func byte() -> UInt8 {
        defer { position += 1 }
        return position < bytes.count ? bytes[position] : 0
    }

    mutating func chunk() -> [UInt8] {
        let count = Int(byte() % 40)
        let end = min(bytes.count, position + count)
        defer { position = end }
        return position < end ? Array(bytes[position..<end]) : []
    }

    mutating func int64() -> Int64 {
        (0..<8).reduce(Int64(0)) { value, _ in value << 8 | Int64(byte()) }
    }
}

/// Every key the parser knows, some it must reject, and a few strings that look like class and accessibility codes.
let keys: [String] = [
    "class", "v_Data", "v_PersistentRef", "v_Ref", "r_Data", "r_Attributes", "r_Ref", "r_PersistentRef",
    "m_Limit", "m_CaseInsensitive", "m_ItemList", "m_SearchList", "m_Issuers", "u_AuthUI", "u_AuthCtx",
    "u_OpPrompt", "u_NoAuthUI", "u_DataProtectionKeychain", "u_Keychain", "sync", "pdmn", "accc", "agrp", "acct",
    "svce", "gena", "labl", "desc", "icmt", "crtr", "type", "invi", "nega", "cdat", "mdat", "srvr", "sdmn", "ptcl",
    "atyp", "port", "path", "ctyp", "cenc", "subj", "issr", "slnr", "skid", "pkhh", "kcls", "klbl", "perm", "atag",
    "bsiz", "esiz", "sens", "extr", "next", "encr", "decr", "drve", "sign", "vrfy", "wrap", "unwp", "tomb", "musr",
    "vwht", "alis", "tkid", "bogus", "", "m_Bogus", "u_Bogus", "r_Bogus",
]
let words: [String] = [
    "genp", "inet", "cert", "keys", "idnt", "ak", "ck", "dk", "aku", "cku", "dku", "akpu", "m_LimitAll",
    "m_LimitOne", "syna", "htps", "http", "form", "dflt", "u_AuthUIAllow", "u_AuthUIFail", "u_AuthUISkip", "1", "-1",
    "0", "true", "security",
]

func value(_ reader: inout ByteReader, depth: Int = 0) -> QueryValue {
    switch reader.byte() % 12 {
    case 0, 1: return .string(words[Int(reader.byte()) % words.count])
    case 2: return .string(String(decoding: reader.chunk(), as: UTF8.self))
    case 3: return .data(Data(reader.chunk()))
    case 4: return .int(reader.int64())
    case 5: return .double(Double(bitPattern: UInt64(bitPattern: reader.int64())))
    case 6: return .bool(reader.byte() & 1 == 1)
    case 7: return .date(Date(timeIntervalSince1970: Double(reader.int64() % 10_000_000_000)))
    case 8: return .null
    case 9:
        let flags = AccessControl.Flags(rawValue: UInt64(bitPattern: reader.int64()))
        let protection = Accessibility.allCases[Int(reader.byte()) % Accessibility.allCases.count]
        if let control = try? AccessControl(protection: protection, flags: flags) { return .accessControl(control) }
        return .unsupported("SecAccessControl")
    case 10 where depth < 2:
        return .array((0..<Int(reader.byte() % 4)).map { _ in value(&reader, depth: depth + 1) })
    default: return .unsupported("CFType")
    }
}

func dictionary(_ reader: inout ByteReader) -> [String: QueryValue] {
    var out: [String: QueryValue] = [:]
    for _ in 0..<Int(reader.byte() % 12) where !reader.isAtEnd {
        out[keys[Int(reader.byte()) % keys.count]] = value(&reader)
    }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzQueryParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var reader = ByteReader(bytes: Array(UnsafeBufferPointer(start: data, count: size)))
    let operations: [KeychainCore.Operation] = [.add, .search, .update, .delete]
    let operation = operations[Int(reader.byte()) % operations.count]
    let query = dictionary(&reader)
    let changes = dictionary(&reader)
    if let parsed = try? QueryParser.parse(query, for: operation) {
        // What the parser returns is what keychaind accepts from the wire: the checks must never refuse it.
        guard (try? parsed.checked()) != nil else { fatalError("a parsed query fails its checks") }
        if let update = try? QueryParser.parseUpdate(changes, itemClass: parsed.itemClass) {
            guard (try? update.checked(for: parsed.itemClass)) != nil else { fatalError("a parsed update fails its checks") }
        }
        _ = String(describing: parsed)
    }
    return 0
}
