#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

/// The attribute dump of macOS `security` (`print_keychain_item_attributes`, semantics §8.4).
enum AttributeDump {
    enum Format: String {
        case blob = "<blob>", uint32 = "<uint32>", sint32 = "<sint32>", timedate = "<timedate>"
    }

    /// The tags a record type lists, in the order macOS prints them (label and alias as tags 7 and 8).
    static func tags(for itemClass: ItemClass) -> [(tag: String, code: String, format: Format)] {
        let head: [(String, String, Format)] = [("0x00000007 ", "labl", .blob), ("0x00000008 ", "alis", .blob)]
        let codes: [(String, Format)]
        switch itemClass {
        case .internetPassword:
            codes = [("acct", .blob), ("atyp", .blob), ("cdat", .timedate), ("crtr", .uint32), ("cusi", .sint32),
                     ("desc", .blob), ("icmt", .blob), ("invi", .sint32), ("mdat", .timedate), ("nega", .sint32),
                     ("path", .blob), ("port", .uint32), ("prot", .blob), ("ptcl", .uint32), ("scrp", .sint32),
                     ("sdmn", .blob), ("srvr", .blob), ("type", .uint32)]
        default:
            codes = [("acct", .blob), ("cdat", .timedate), ("crtr", .uint32), ("cusi", .sint32), ("desc", .blob),
                     ("gena", .blob), ("icmt", .blob), ("invi", .sint32), ("mdat", .timedate), ("nega", .sint32),
                     ("prot", .blob), ("scrp", .sint32), ("svce", .blob), ("type", .uint32)]
        }
        return head + codes.map { ("\"\($0.0)\"", $0.0, $0.1) }
    }

    static func text(for item: Item, keychain: KeychainReference) -> String {
        var out = "keychain: \"\(keychain.path)\"\nversion: 512\nclass: \"\(item.itemClass.rawValue)\"\nattributes:\n"
        for (tag, code, format) in tags(for: item.itemClass) {
            out += "    \(tag)\(format.rawValue)=\(value(item.attributes[code], format: format))\n"
        }
        return out
    }

    /// `dump-keychain -a`. macOS prints the item's legacy ACL entries; an item here is governed by its access group,
    /// its accessibility and its access-control flags, so those are what is printed.
    static func access(of item: Item) -> String {
        var out = "access:\n    access group: \"\(item.accessGroup)\"\n    accessible: \(item.accessibility.rawValue)\n"
        if let ac = item.accessControl {
            let names: [(AccessControl.Flags, String)] = [
                (.userPresence, "userPresence"), (.biometryAny, "biometryAny"), (.biometryCurrentSet, "biometryCurrentSet"),
                (.devicePasscode, "devicePasscode"), (.companion, "companion"), (.or, "or"), (.and, "and"),
                (.privateKeyUsage, "privateKeyUsage"), (.applicationPassword, "applicationPassword"),
            ]
            let set = names.filter { ac.flags.contains($0.0) }.map(\.1)
            out += "    access control: \(set.isEmpty ? "none" : set.joined(separator: ", "))\n"
        }
        return out
    }

    static func value(_ value: AttributeValue?, format: Format) -> String {
        guard let value else { return "<NULL>" }
        // Our items carry Apple's data-protection defaults ("" for an absent primary-key blob); macOS's file
        // keychain never stored those, so they print as absent.
        if format == .blob, value == .string("") || value == .data(Data()) { return "<NULL>" }
        switch (format, value) {
        case (.timedate, .date(let t)):
            return BufferPrinter.format(Array(timeString(Date(timeIntervalSinceReferenceDate: t)).utf8) + [0])
        case (.uint32, .number(let n)), (.sint32, .number(let n)):
            return BufferPrinter.format(uint32: UInt32(truncatingIfNeeded: n))
        case (_, .string(let s)): return BufferPrinter.format(Array(s.utf8))
        case (_, .data(let d)): return BufferPrinter.format(Array(d))
        case (_, .number(let n)): return BufferPrinter.format(Array(String(n).utf8))
        case (_, .date(let t)): return BufferPrinter.format(Array(timeString(Date(timeIntervalSinceReferenceDate: t)).utf8))
        }
    }

    /// CSSM time: `YYYYMMDDhhmmssZ` in UTC.
    static func timeString(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0)!  // by offset: named zones need ICU, which the tools do not link
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let fields = [(c.year!, 4), (c.month!, 2), (c.day!, 2), (c.hour!, 2), (c.minute!, 2), (c.second!, 2)]
        return fields.map { Hex.padded(String($0.0), to: $0.1) }.joined() + "Z"
    }

    /// A four-character code (`-c`, `-C`, `-r`) as the number Apple stores.
    static func fourCharCode(_ s: String) -> Int64? {
        let bytes = Array(s.utf8)
        guard bytes.count == 4 else { return nil }
        return bytes.reduce(0) { $0 << 8 | Int64($1) }
    }
}
