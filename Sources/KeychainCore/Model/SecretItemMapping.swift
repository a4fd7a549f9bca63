#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How Secret Service items and Apple's items are one and the same: a Secret Service item is a generic password
/// (`genp`). Its attribute set (`a{ss}`) is kept whole in `vwht` (kSecAttrSyncViewHint, part of Apple's primary
/// key and meaningless off Apple's sync), so that items differing in any attribute stay distinct, as the Secret
/// Service requires; its `service` and `account` attributes are also the item's kSecAttrService and
/// kSecAttrAccount, so that `secret-tool lookup service S account A` finds what `security add-generic-password -s S
/// -a A` stored and `security find-generic-password` finds what libsecret stored. Like every attribute, all of this
/// is encrypted at rest. An Apple item without that encoding shows the attributes `service` and `account`.
/// (keychaind's Secret Service and `security import-secrets` both store by it.)
public enum SecretItemMapping {
    public static let prefix = "org.freedesktop.secrets\u{1E}"
    public static let separator: Character = "\u{1F}"

    /// The attribute set an encoded `vwht` holds; nil for a value that is not one.
    public static func attributes(encoded hint: String) -> [String: String]? {
        guard hint.hasPrefix(prefix) else { return nil }
        return attributes(of: Item(itemClass: .genericPassword, attributes: ["vwht": .string(hint)]))
    }

    /// The item's Secret Service attributes.
    public static func attributes(of item: Item) -> [String: String] {
        if let hint = item.attributes["vwht"]?.stringValue, hint.hasPrefix(prefix) {
            var out: [String: String] = [:]
            // What follows a record separator tells apart items with equal attributes (``encode(_:distinct:)``).
            let encoded = hint.dropFirst(prefix.count).prefix { $0 != "\u{1E}" }
            let fields = encoded.split(separator: separator, omittingEmptySubsequences: false)
            var index = 0
            while index + 1 < fields.count {
                out[String(fields[index])] = String(fields[index + 1])
                index += 2
            }
            return out
        }
        var out: [String: String] = [:]
        if let service = item.attributes["svce"]?.stringValue, !service.isEmpty { out["service"] = service }
        if let account = item.attributes["acct"]?.stringValue, !account.isEmpty { out["account"] = account }
        return out
    }

    /// The canonical encoding of an attribute set (sorted by name). Names and values holding the two separator
    /// characters are refused by the caller (they never occur in real schemas).
    ///
    /// `distinct` gives an item whose attributes equal another's a primary key of its own: CreateItem without
    /// Replace adds a second item then, as the specification allows and gnome-keyring does.
    public static func encode(_ attributes: [String: String], distinct: UUID? = nil) -> String {
        prefix + attributes.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] }.joined(separator: String(separator))
            + (distinct.map { "\u{1E}" + $0.uuidString } ?? "")
    }

    public static func isStorable(_ attributes: [String: String]) -> Bool {
        attributes.allSatisfy { !$0.key.isEmpty && !($0.key + $0.value).contains(where: { $0 == separator || $0 == "\u{1E}" }) }
    }

    /// The attributes of a new item (or the changes to an existing one).
    public static func itemAttributes(label: String, attributes: [String: String]) -> [String: QueryValue] {
        [
            "class": "genp",
            "labl": .string(label),
            "svce": .string(attributes["service"] ?? ""),
            "acct": .string(attributes["account"] ?? ""),
            "vwht": .string(encode(attributes)),
        ]
    }

    /// An item moved in from another Secret Service or its keyring file (`security import-secrets`): stored as
    /// keychaind's Secret Service stores one, and readable by every program of the user, as it was there
    /// (gnome-keyring asks no program anything once the keyring is unlocked; which program stored it is not known).
    public static func importedAttributes(label: String, attributes: [String: String]) -> [String: QueryValue] {
        var item = itemAttributes(label: label, attributes: attributes)
        item["acls"] = .bool(true)
        return item
    }

    /// The search that narrows a Secret Service search before the full attribute match (service and account are
    /// indexed), every item's attributes and reference returned.
    public static func query(for attributes: [String: String]) -> [String: QueryValue] {
        var query: [String: QueryValue] = [
            "class": "genp", "r_Attributes": true, "r_PersistentRef": true, "m_Limit": "m_LimitAll", "sync": "syna",
        ]
        if let service = attributes["service"] { query["svce"] = .string(service) }
        if let account = attributes["account"] { query["acct"] = .string(account) }
        return query
    }

    public static func matches(_ item: Item, _ wanted: [String: String]) -> Bool {
        let own = attributes(of: item)
        return wanted.allSatisfy { own[$0.key] == $0.value }
    }
}
