#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Parses Apple-style dictionaries into ``ItemQuery`` values with Apple's status codes (semantics §3.1).
public enum QueryParser {
    /// Keys `kSecMatch*` that the data-protection keychain knows.
    static let knownMatchKeys: Set<String> = [
        "m_Limit", "m_CaseInsensitive", "m_ItemList", "m_Issuers", "m_Policy", "m_EmailAddressIfPresent",
        "m_SubjectContains", "m_SubjectStartsWith", "m_SubjectEndsWith", "m_SubjectWholeString",
        "m_DiacriticInsensitive", "m_WidthInsensitive", "m_TrustedOnly", "m_ValidOnDate",
        "m_HostOrSubdomainOfHost", "m_SearchList",
    ]
    static let knownUseKeys: Set<String> = [
        "u_AuthUI", "u_AuthCtx", "u_CredRef", "u_Tomb", "u_OpPrompt", "u_NoAuthUI", "u_ItemList", "u_Keychain",
        "u_CallerName", "u_SystemKeychainAlways", "u_SystemKeychain", "u_SyncBubbleKeychain", "u_TokenRawItems",
        "u_CertWithIssuers", "u_UserIndependentKeychain",
    ]

    /// Parses a query (search, update, delete) or an add dictionary.
    public static func parse(_ dictionary: [String: QueryValue], for operation: Operation) throws(KeychainError)
        -> ItemQuery
    {
        // The class comes first: every attribute key is judged against it.
        var persistentRef: PersistentReference?
        if let refValue = dictionary["v_PersistentRef"] {
            guard case .data(let d) = refValue else { throw .param("kSecValuePersistentRef must be data") }
            persistentRef = try PersistentReference(data: d)
        }
        let itemClass: ItemClass
        if let classValue = dictionary["class"] {
            guard case .string(let code) = classValue else { throw .param("kSecClass must be a string") }
            itemClass = try ItemClass(code: code)
        } else if let persistentRef {
            itemClass = persistentRef.itemClass
        } else {
            throw .param("kSecClass is missing")
        }
        var query = ItemQuery(operation: operation, itemClass: itemClass)
        let schema = Schema.attributes(of: itemClass)
        var hasAttributeKey = false
        var sawAuthContext = false
        var sawCredentialRef = false

        // Sorted so that the first error reported does not depend on hash order.
        for key in dictionary.keys.sorted() {
            let value = dictionary[key]!
            if value == .null && key != "musr" { throw .param("\(key) has a null value") }
            if key.utf8.count == 4 {
                if key == "nleg" {
                    query.dataProtectionKeychain = value == .bool(true) || value == .int(1)
                    continue
                }
                if key == "acls" {
                    query.applicationAccess = try applicationAccess(value, operation: operation)
                    continue
                }
                if key == "clip" { throw .param("clip is not allowed") }
                guard let descriptor = schema[key] else { throw .noSuchAttr(key) }
                hasAttributeKey = true
                try applyAttribute(descriptor, value, to: &query)
                continue
            }
            switch key.first {
            case "c":
                guard key == "class" else { throw .param("unknown key \(key)") }
            case "m":
                try applyMatchKey(key, value, to: &query)
            case "r":
                try applyReturnKey(key, value, to: &query)
            case "u":
                guard knownUseKeys.contains(key) else { throw .param("unknown key \(key)") }
                switch key {
                case "u_AuthUI":
                    guard case .string(let s) = value, let ui = AuthenticationUI(rawValue: s) else {
                        throw .param("kSecUseAuthenticationUI has an unknown value")
                    }
                    if ui == .skip && operation != .search {
                        throw .param("kSecUseAuthenticationUISkip is allowed only for SecItemCopyMatching")
                    }
                    query.authenticationUI = ui
                case "u_NoAuthUI":
                    if value.integer == 1 { query.authenticationUI = .fail }
                case "u_OpPrompt":
                    guard case .string(let s) = value else { throw .param("kSecUseOperationPrompt must be a string") }
                    query.operationPrompt = s
                case "u_ItemList":
                    throw .param("kSecUseItemList is not supported")
                case "u_AuthCtx":
                    sawAuthContext = true
                    if case .authenticationContext(let context) = value { query.authenticationContext = context }
                case "u_CredRef": sawCredentialRef = true
                default: break
                }
            case "v":
                switch key {
                case "v_Data":
                    switch value {
                    case .data(let d): query.valueData = SecretBytes(d)
                    case .secret(let secret): query.valueData = secret
                    case .string(let s): query.valueData = SecretBytes(utf8: s)
                    default: throw .param("kSecValueData must be data")
                    }
                    try QueryChecks.secretSize(query.valueData)
                case "v_PersistentRef":
                    break  // parsed above
                case "v_Ref":
                    // Only keys, certificates and identities have refs; a password item cannot be added by ref.
                    throw .param("kSecValueRef is not supported for this item")
                default:
                    throw .param("unknown key \(key)")
                }
            case "f":
                continue
            default:
                throw .param("unknown key \(key)")
            }
        }

        if sawAuthContext && sawCredentialRef {
            throw .param("kSecUseAuthenticationContext and kSecUseCredentialReference together")
        }
        if let persistentRef {
            if operation == .add {
                if case .rowID = persistentRef.identifier { throw .param("kSecValuePersistentRef in an add") }
            } else {
                if hasAttributeKey { throw .param("kSecValuePersistentRef with other attributes") }
                query.persistentReference = persistentRef
                query.sync = .any
            }
        }
        switch operation {
        case .add:
            if query.hadMatchKeys { throw .param("kSecMatch keys in an add") }
            if query.sync == .any { query.sync = .nonSynchronizable }
        case .update, .delete:
            // iOS rejects kSecMatch and kSecReturn keys here (-50); macOS's SecItemUpdate and SecItemDelete strip
            // them and act on every match. Code compiled for Linux takes its macOS branches (a wrapper's removeAll()
            // passes kSecMatchLimitAll; many update with the query they read with), so macOS decides: any limit,
            // One and numbers included, updates or deletes every match (docs/COMPATIBILITY.md).
            query.limit = .all
            query.returnTypes = []
        case .search:
            break
        }
        // The rules between fields are kept once, where keychaind also holds a typed request to them.
        return try query.checked()
    }

    /// `kSecAttrAccess` ("acls"): on macOS a SecAccessRef with the trusted applications. Here `true` trusts every
    /// program and an array of executable paths trusts those (empty: none). Only an add sets it.
    static func applicationAccess(_ value: QueryValue, operation: Operation) throws(KeychainError)
        -> ApplicationAccessRequest
    {
        guard operation == .add else { throw .param("kSecAttrAccess is set only when an item is added") }
        switch value {
        case .bool(true): return .anyApplication
        case .array(let entries):
            var paths: [String] = []
            for entry in entries {
                guard case .string(let path) = entry, path.hasPrefix("/") else {
                    throw .param("kSecAttrAccess lists applications by absolute path")
                }
                paths.append(path)
            }
            return .applications(paths)
        default:
            throw .param("kSecAttrAccess must be a list of application paths, or true for any application")
        }
    }

    /// An upsert's two halves: the item to add (`query` and `attributes` merged, with the secret) and the changes
    /// its duplicate gets besides the item's secret (which travels once, in the item).
    public static func parseUpsert(_ query: [String: QueryValue], secret: SecretBytes, attributes: [String: QueryValue])
        throws(KeychainError) -> (item: ItemQuery, changes: ItemUpdate)
    {
        var addDictionary = query.merging(attributes) { _, new in new }
        addDictionary["v_Data"] = .secret(secret)
        let item = try parse(addDictionary, for: .add)
        var changes = try parseUpdate(attributes, itemClass: item.itemClass)
        changes.valueData = nil
        return (item, changes)
    }

    /// Parses `attributesToUpdate` for `SecItemUpdate`: only attributes of the class and `kSecValueData`.
    public static func parseUpdate(_ dictionary: [String: QueryValue], itemClass: ItemClass) throws(KeychainError)
        -> ItemUpdate
    {
        let schema = Schema.attributes(of: itemClass)
        var update = ItemUpdate()
        var scratch = ItemQuery(operation: .update, itemClass: itemClass)
        scratch.sync = .nonSynchronizable
        var sawSync = false
        for key in dictionary.keys.sorted() {
            let value = dictionary[key]!
            if key == "v_Data" {
                switch value {
                case .data(let d): update.valueData = SecretBytes(d)
                case .secret(let secret): update.valueData = secret
                case .string(let s): update.valueData = SecretBytes(utf8: s)
                default: throw .param("kSecValueData must be data")
                }
                try QueryChecks.secretSize(update.valueData)
                continue
            }
            guard key.utf8.count == 4, let descriptor = schema[key] else { throw .noSuchAttr(key) }
            switch key {
            case "musr": continue  // Apple ignores it silently.
            case "ggrp": throw .param("the sharing group cannot be updated")
            case "clip": throw .param("clip is not allowed")
            case "sync":
                if case .string("syna") = value { throw .param("kSecAttrSynchronizableAny in an update") }
                sawSync = true
            default: break
            }
            if value == .null { throw .param("\(key) has a null value") }
            try applyAttribute(descriptor, value, to: &scratch)
        }
        update.attributes = scratch.attributes
        update.accessGroup = scratch.accessGroup
        update.accessibility = scratch.accessibility
        update.accessControl = scratch.accessControl
        if sawSync { update.synchronizable = scratch.sync == .synchronizable }
        return try update.checked(for: itemClass)
    }

    private static func applyAttribute(_ descriptor: AttributeDescriptor, _ value: QueryValue, to query: inout ItemQuery)
        throws(KeychainError)
    {
        switch descriptor.code {
        case "sync":
            if case .string("syna") = value {
                query.sync = .any
                return
            }
            let v = try Coercion.coerce(value, to: .sync, code: "sync")
            query.sync = v == .number(0) ? .nonSynchronizable : .synchronizable
        case "agrp":
            let v = try Coercion.coerce(value, to: .string, code: "agrp")
            query.accessGroup = v.stringValue
        case "pdmn":
            let v = try Coercion.coerce(value, to: .access, code: "pdmn")
            query.accessibility = Accessibility(rawValue: v.stringValue ?? "")
        case "accc":
            guard case .accessControl(let ac) = value else {
                throw .param("kSecAttrAccessControl must be a SecAccessControl")
            }
            query.accessControl = ac
        default:
            query.attributes[descriptor.code] = try Coercion.coerce(value, to: descriptor.kind, code: descriptor.code)
        }
    }

    private static func applyMatchKey(_ key: String, _ value: QueryValue, to query: inout ItemQuery)
        throws(KeychainError)
    {
        query.hadMatchKeys = true
        guard query.operation == .search else { return }  // rejected after the loop, with a clear message
        switch key {
        case "m_Limit":
            query.limit = try parseLimit(value)
        case "m_ItemList":
            guard case .array(let elements) = value else { throw .param("kSecMatchItemList must be an array") }
            var refs: [PersistentReference] = []
            for element in elements {
                guard case .data(let d) = element else { throw .param("kSecMatchItemList holds a non-reference") }
                refs.append(try PersistentReference(data: d))
            }
            query.itemList = refs
        case "m_Issuers", "m_Policy":
            if query.itemClass != .certificate && query.itemClass != .identity {
                throw KeychainError(.unimplemented, "\(key) applies to certificates and identities")
            }
        case "m_HostOrSubdomainOfHost":
            if query.itemClass != .internetPassword {
                throw KeychainError(.unimplemented, "\(key) applies to internet passwords")
            }
        default:
            // Unknown or legacy-only match keys are recorded and ignored by a search, as on Apple's keychain.
            break
        }
    }

    static func parseLimit(_ value: QueryValue) throws(KeychainError) -> MatchLimit {
        switch value {
        case .string("m_LimitOne"): return .one
        case .string("m_LimitAll"): return .all
        case .int, .double:
            let n = value.integer ?? 0
            if n == 1 { return .one }
            if n == -1 { return .all }
            if n < -1 { return MatchLimit(count: 1, returnsArray: true) }  // Apple's quirk: at most one, in an array
            return MatchLimit(count: Int(clamping: n), returnsArray: true)
        default:
            throw .param("kSecMatchLimit has an unknown value")
        }
    }

    private static func applyReturnKey(_ key: String, _ value: QueryValue, to query: inout ItemQuery)
        throws(KeychainError)
    {
        let type: ReturnTypes
        switch key {
        case "r_Data": type = .data
        case "r_Attributes": type = .attributes
        case "r_Ref": type = .ref
        case "r_PersistentRef": type = .persistentRef
        default: throw .param("unknown key \(key)")
        }
        let flag: Bool
        switch value {
        case .bool(let b): flag = b
        case .int(let n) where n == 0 || n == 1: flag = n == 1
        default: throw .param("\(key) must be a boolean")
        }
        if flag { query.returnTypes.insert(type) }
    }
}

/// A parsed `attributesToUpdate` dictionary.
public struct ItemUpdate: Sendable {
    public var attributes: [String: AttributeValue] = [:]
    public var accessGroup: String?
    public var accessibility: Accessibility?
    public var accessControl: AccessControl?
    public var synchronizable: Bool?
    public var valueData: SecretBytes?
    public init() {}
}
