#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Apple's item rules that need no file: building a new item, matching, applying an update (semantics §2, §3).
public enum ItemRules {
    /// The largest secret an item may hold (4 MiB): a keychain keeps small secrets, and every copy of a secret is
    /// memory that must be wiped. Larger values are errSecDataTooLarge.
    public static let maximumSecretSize = 4 << 20

    /// Builds the item an add stores: access group, accessibility, dates and primary-key defaults filled in.
    public static func newItem(from query: ItemQuery, caller: Caller, now: Date) throws(KeychainError) -> Item {
        precondition(query.operation == .add)
        guard query.itemClass != .identity else {
            throw .param("identities are added as a certificate and a key")
        }
        if caller.accessGroups.isEmpty { throw KeychainError(.missingEntitlement, "the caller has no access group") }
        let group: String
        if let explicit = query.accessGroup {
            try AccessEvaluator.checkWritable(explicit, caller: caller)
            group = explicit
        } else {
            group = try caller.defaultGroup()
        }
        var attributes = query.attributes
        // A caller-supplied creation or modification date is overwritten on add.
        attributes["cdat"] = .date(now)
        attributes["mdat"] = .date(now)
        attributes["agrp"] = .string(group)
        attributes["sync"] = .number(query.sync == .synchronizable ? 1 : 0)
        try checkProtectable(query.accessControl)
        let accessibility =
            query.accessControl?.protection ?? query.accessibility ?? .defaultValue(for: query.itemClass)
        attributes["pdmn"] = .string(accessibility.rawValue)
        let schema = Schema.attributes(of: query.itemClass)
        for code in Schema.primaryKey(of: query.itemClass) where attributes[code] == nil {
            if code == "musr" { continue }  // internal; single-user view
            attributes[code] = schema[code]!.kind.defaultValue
        }
        attributes.removeValue(forKey: "tomb")
        attributes.removeValue(forKey: "sha1")
        return Item(itemClass: query.itemClass, attributes: attributes, accessControl: query.accessControl)
    }

    /// Refuses constraints (user presence, passcode, biometry, companion) on an Always-class item: its class key
    /// opens with the device key alone, so anyone holding the files could read it and the constraint would be a
    /// promise the file cannot keep. (The application password is a key of its own and stays allowed.)
    static func checkProtectable(_ accessControl: AccessControl?) throws(KeychainError) {
        guard let accessControl, accessControl.protection.protection == .deviceOnly,
            !accessControl.flags.intersection(AccessControl.Flags.constraints).isEmpty
        else { return }
        throw .param("access-control constraints need a class that the keychain password protects, not Always")
    }

    /// True if `item` is one that `query` selects for `caller` (implicit filters of §3.2 included).
    public static func matches(_ item: Item, _ query: ItemQuery, caller: Caller) -> Bool {
        guard item.itemClass == query.itemClass else { return false }
        if let ref = query.persistentReference, !refers(ref, to: item) { return false }
        if let list = query.itemList, !list.contains(where: { refers($0, to: item) }) { return false }
        switch query.sync {
        case .nonSynchronizable: if item.isSynchronizable { return false }
        case .synchronizable: if !item.isSynchronizable { return false }
        case .any: break
        }
        if let group = query.accessGroup, item.accessGroup != group { return false }
        if !AccessEvaluator.isVisible(item, to: caller, for: query.operation) { return false }
        if let accessibility = query.accessibility, item.accessibility != accessibility { return false }
        let schema = Schema.attributes(of: item.itemClass)
        for (code, wanted) in query.attributes {
            guard let kind = schema[code]?.kind else { return false }
            guard let have = item.effectiveValue(code) else { return false }
            if !have.hasSameMatchKey(as: wanted, for: kind) { return false }
        }
        return true
    }

    static func refers(_ ref: PersistentReference, to item: Item) -> Bool {
        guard ref.itemClass == item.itemClass else { return false }
        if case .uuid(let u) = ref.identifier { return u == item.uuid }
        return false
    }

    /// The item after `update`: attributes replaced, `mdat` refreshed, `cdat` kept.
    public static func applying(_ update: ItemUpdate, to item: Item, caller: Caller, now: Date)
        throws(KeychainError) -> Item
    {
        var result = item
        for (code, value) in update.attributes where code != "cdat" && code != "mdat" {
            result.attributes[code] = value
        }
        if let group = update.accessGroup {
            try AccessEvaluator.checkWritable(group, caller: caller)
            result.attributes["agrp"] = .string(group)
            result.accessModel = .groups  // moved into a group explicitly: it lives by it
        }
        if let sync = update.synchronizable {
            result.attributes["sync"] = .number(sync ? 1 : 0)
            if sync { result.accessModel = .groups }
        }
        if let ac = update.accessControl {
            try checkProtectable(ac)
            result.accessControl = ac
            result.attributes["pdmn"] = .string(ac.protection.rawValue)
        } else if let accessibility = update.accessibility {
            result.accessControl = nil
            result.attributes["pdmn"] = .string(accessibility.rawValue)
        }
        try AccessEvaluator.checkKeyProtectionChange(from: item, to: result)
        if result.accessControl != nil && result.isSynchronizable {
            throw .param("access control on a synchronizable item")
        }
        result.attributes["mdat"] = .date(now)
        return result
    }

    /// The attributes `kSecReturnAttributes` gives back: the public ones the item has.
    public static func returnedAttributes(of item: Item) -> [String: AttributeValue] {
        let schema = Schema.attributes(of: item.itemClass)
        return item.attributes.filter { code, _ in schema[code]?.isReturned ?? false }
    }
}
