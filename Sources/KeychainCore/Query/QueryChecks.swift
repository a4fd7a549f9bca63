#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// A typed request is trusted no more than a dictionary: keychaind receives ``ItemQuery`` and ``ItemUpdate`` values
// that any program of the user can write on its socket. These checks hold every value to what ``QueryParser`` can
// produce, so the engine sees only parser-shaped requests whoever built them. Failure is `errSecParam`.

extension ItemQuery {
    /// Throws unless the query is one that ``QueryParser/parse(_:for:)`` could have returned.
    public func checked() throws(KeychainError) -> ItemQuery {
        try QueryChecks.attributes(attributes, of: itemClass)
        try QueryChecks.secretSize(valueData)
        if accessibility != nil && accessControl != nil {
            throw .param("kSecAttrAccessible and kSecAttrAccessControl together")
        }
        if let count = limit.count, count < 0 { throw .param("kSecMatchLimit has an unknown value") }
        // One item is a bare value; every other limit (numbers, All) an array.
        if !limit.returnsArray && limit.count != 1 { throw .param("kSecMatchLimit has an unknown value") }
        if returnTypes.rawValue & ~ReturnTypes.all.rawValue != 0 { throw .param("an unknown kSecReturn key") }
        if authenticationUI == .skip && operation != .search {
            throw .param("kSecUseAuthenticationUISkip is allowed only for SecItemCopyMatching")
        }
        if applicationAccess != nil && operation != .add {
            throw .param("kSecAttrAccess is set only when an item is added")
        }
        if case .applications(let paths) = applicationAccess, paths.contains(where: { !$0.hasPrefix("/") }) {
            throw .param("kSecAttrAccess lists applications by absolute path")
        }
        if itemList != nil && operation != .search { throw .param("kSecMatch keys outside a search") }
        switch operation {
        case .add:
            if persistentReference != nil { throw .param("kSecValuePersistentRef in an add") }
            if limit != .all { throw .param("kSecMatch keys in an add") }
            if sync == .any { throw .param("kSecAttrSynchronizableAny in an add") }
            if accessControl?.hasACL == true && sync == .synchronizable {
                throw .param("access control on a synchronizable item")
            }
        case .update, .delete:
            if limit != .all || !returnTypes.isEmpty { throw .param("a limit or return keys in an update or delete") }
        case .search:
            break
        }
        // A persistent reference stands alone: no attribute, group, protection or sync filter beside it.
        if persistentReference != nil
            && (!attributes.isEmpty || accessGroup != nil || accessibility != nil || accessControl != nil || sync != .any)
        {
            throw .param("kSecValuePersistentRef with other attributes")
        }
        return self
    }
}

extension ItemUpdate {
    /// Throws unless the changes are ones that ``QueryParser/parseUpdate(_:itemClass:)`` could have returned.
    public func checked(for itemClass: ItemClass) throws(KeychainError) -> ItemUpdate {
        try QueryChecks.attributes(attributes, of: itemClass)
        if attributes["ggrp"] != nil { throw .param("the sharing group cannot be updated") }
        if attributes["musr"] != nil { throw .param("musr cannot be updated") }
        try QueryChecks.secretSize(valueData)
        if accessibility != nil && accessControl != nil {
            throw .param("kSecAttrAccessible and kSecAttrAccessControl together")
        }
        if accessControl?.hasACL == true && synchronizable == true {
            throw .param("access control on a synchronizable item")
        }
        return self
    }
}

enum QueryChecks {
    /// Codes that the parser keeps in their own fields, never among the attributes.
    static let ownFields: Set<String> = ["sync", "agrp", "pdmn", "accc", "acls", "nleg", "clip"]

    static func attributes(_ attributes: [String: AttributeValue], of itemClass: ItemClass) throws(KeychainError) {
        let schema = Schema.attributes(of: itemClass)
        for (code, value) in attributes {
            guard let descriptor = schema[code], !ownFields.contains(code) else { throw .noSuchAttr(code) }
            guard accepts(descriptor.kind, value) else {
                throw .param("attribute \(code): this value is not accepted")
            }
        }
    }

    /// Whether `value` is what ``Coercion`` makes of an input for an attribute of `kind`.
    static func accepts(_ kind: AttributeKind, _ value: AttributeValue) -> Bool {
        switch (kind, value) {
        case (.blob, .string), (.blob, .data), (.blob, .number): true
        case (.data, .data), (.string, .string): true
        case (.number, .number): true
        case (.number, .string(let s)): Coercion.canonicalInteger(s) == nil
        case (.date, .date(let t)): t.isFinite
        case (.uuid, .data(let d)): d.isEmpty || d.count == 16
        case (.sha1, .data(let d)): d.count == 20
        default: false
        }
    }

    static func secretSize(_ secret: SecretBytes?) throws(KeychainError) {
        if let secret, secret.count > ItemRules.maximumSecretSize {
            throw KeychainError(.dataTooLarge, "a secret holds at most \(ItemRules.maximumSecretSize >> 20) MiB")
        }
    }
}
