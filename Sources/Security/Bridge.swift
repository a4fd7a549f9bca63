import Foundation
import KeychainCore

/// Converts between Apple's CF-typed dictionaries and the engine's values.
enum Bridge {
    /// The dictionary's entries with string keys; a non-string key makes the whole call errSecParam.
    static func entries(_ dictionary: CFDictionary) throws(KeychainError) -> [String: QueryValue] {
        // Keys and values taken out in one call: Foundation's iterator on Linux looks every key up again, through
        // its AnyHashable, which was half of this conversion's cost.
        var keys: [Any] = []
        var values: [Any] = []
        let count = dictionary.count
        dictionary.getObjects(&values, andKeys: &keys, count: count)
        var out: [String: QueryValue] = Dictionary(minimumCapacity: count)
        for (key, value) in zip(keys, values) {
            guard let name = key as? String else { throw .param("a dictionary key is not a string") }
            out[name] = queryValue(value)
        }
        return out
    }

    static func queryValue(_ value: Any) -> QueryValue {
        if let s = value as? String { return .string(s) }
        if let d = value as? Data { return .data(d) }
        if let n = value as? NSNumber {
            if n.isBoolean { return .bool(n.boolValue) }
            switch String(cString: n.objCType) {
            case "d", "f": return .double(n.doubleValue)
            default: return .int(n.int64Value)
            }
        }
        if let date = value as? Date { return .date(date) }
        if value is NSNull { return .null }
        if let ac = value as? SecAccessControl { return .accessControl(ac.value) }
        if let access = value as? SecAccess { return .array(access.applications.map { .string($0) }) }
        if let context = value as? any AuthenticationContextProviding { return .authenticationContext(context.engine) }
        if let uuid = value as? UUID { return .uuid(uuid) }
        if let array = value as? [Any] { return .array(array.map(queryValue)) }
        return .unsupported("\(type(of: value))")
    }

    static func object(_ value: AttributeValue) -> AnyObject {
        switch value {
        case .string(let s): s as NSString
        case .data(let d): d as NSData
        case .number(let n): n >= Int64(Int32.min) && n <= Int64(Int32.max) ? NSNumber(value: Int32(n)) : NSNumber(value: n)
        case .date(let t): NSDate(timeIntervalSinceReferenceDate: t)
        }
    }

    /// The attribute dictionary `kSecReturnAttributes` gives.
    static func attributes(of item: Item) -> [String: AnyObject] {
        var out: [String: AnyObject] = [:]
        for (code, value) in ItemRules.returnedAttributes(of: item) { out[code] = object(value) }
        if let ac = item.accessControl { out["accc"] = SecAccessControl(ac) }
        return out
    }

    /// A result dictionary with more entries (kSecValueRef for keys, certificates and identities; an identity's class).
    static func dictionary(_ dictionary: NSDictionary, adding extra: [String: AnyObject]) -> NSDictionary {
        var merged: [String: AnyObject] = [:]
        for (name, object) in dictionary { if let name = name as? String { merged[name] = object as AnyObject } }
        merged.merge(extra) { _, new in new }
        return NSDictionary(dictionary: merged)
    }

    /// One item's result in the shape the query asked for (semantics §3.5); nil for a password ref.
    static func result(for found: FoundItem, types: ReturnTypes) -> AnyObject? {
        if types.wantsDictionary {
            var dict: [String: AnyObject] = [:]
            if types.contains(.attributes) || types.contains(.ref) { dict = attributes(of: found.item) }
            if types.contains(.ref) { dict["class"] = found.item.itemClass.rawValue as NSString }
            if types.contains(.data) { dict["v_Data"] = (found.secret?.unprotectedData() ?? Data()) as NSData }
            if types.contains(.persistentRef) { dict["v_PersistentRef"] = found.item.persistentReference.data as NSData }
            return NSDictionary(dictionary: dict)
        }
        if types.contains(.data) { return (found.secret?.unprotectedData() ?? Data()) as NSData }
        if types.contains(.attributes) { return NSDictionary(dictionary: attributes(of: found.item)) }
        if types.contains(.persistentRef) { return found.item.persistentReference.data as NSData }
        return nil  // kSecReturnRef on a password item: success with a NULL result, as on iOS.
    }
}
