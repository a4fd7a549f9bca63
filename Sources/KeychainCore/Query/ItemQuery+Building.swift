#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Typed requests for front ends that know what they want (the tools, the helpers, the native API, the Secret
// Service), with no dictionary to parse in between. Values are given as the parser would leave them: a string or
// data for text attributes, `.number` for numeric ones (a four-character code such as a protocol stays a string).

/// An item attribute by what it means; its raw value is Apple's four-letter code (semantics §1.3–§1.7).
public struct AttributeName: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let account = AttributeName(rawValue: "acct")
    public static let service = AttributeName(rawValue: "svce")
    public static let server = AttributeName(rawValue: "srvr")
    public static let `protocol` = AttributeName(rawValue: "ptcl")
    public static let port = AttributeName(rawValue: "port")
    public static let path = AttributeName(rawValue: "path")
    public static let securityDomain = AttributeName(rawValue: "sdmn")
    public static let authenticationType = AttributeName(rawValue: "atyp")
    public static let label = AttributeName(rawValue: "labl")
    public static let description = AttributeName(rawValue: "desc")
    public static let comment = AttributeName(rawValue: "icmt")
    public static let generic = AttributeName(rawValue: "gena")
    public static let creator = AttributeName(rawValue: "crtr")
    public static let type = AttributeName(rawValue: "type")
    public static let keyClass = AttributeName(rawValue: "kcls")
    public static let applicationLabel = AttributeName(rawValue: "klbl")
    public static let applicationTag = AttributeName(rawValue: "atag")
    public static let creationDate = AttributeName(rawValue: "cdat")
    public static let modificationDate = AttributeName(rawValue: "mdat")
}

extension ItemQuery {
    /// A search of `itemClass` for the items whose attributes equal `attributes`.
    public static func search(_ itemClass: ItemClass, _ attributes: [AttributeName: AttributeValue] = [:],
                              returning: ReturnTypes = [], limit: MatchLimit = .one) -> ItemQuery
    {
        var query = ItemQuery(operation: .search, itemClass: itemClass)
        query.set(attributes)
        query.returnTypes = returning
        query.limit = limit
        return query
    }

    /// The items of `itemClass` whose attributes equal `attributes`, for an update or a delete (every match).
    public static func matching(_ itemClass: ItemClass, _ attributes: [AttributeName: AttributeValue] = [:],
                                for operation: Operation) -> ItemQuery
    {
        var query = ItemQuery(operation: operation, itemClass: itemClass)
        query.set(attributes)
        return query
    }

    /// A new item of `itemClass` with `attributes` and `secret`.
    public static func add(_ itemClass: ItemClass, _ attributes: [AttributeName: AttributeValue],
                           secret: SecretBytes? = nil, returning: ReturnTypes = []) -> ItemQuery
    {
        var query = ItemQuery(operation: .add, itemClass: itemClass)
        query.set(attributes)
        query.valueData = secret
        query.returnTypes = returning
        return query
    }

    /// The one item `reference` names. A persistent reference stands alone (Apple's rule) and finds the item
    /// whether or not it is synchronizable.
    public static func item(_ reference: PersistentReference, for operation: Operation, returning: ReturnTypes = [])
        -> ItemQuery
    {
        var query = ItemQuery(operation: operation, itemClass: reference.itemClass)
        query.persistentReference = reference
        query.sync = .any
        if operation == .search { query.returnTypes = returning }
        return query
    }

    /// Which synchronizable items the query is about: only those (true) or only the others (false).
    public mutating func setSynchronizable(_ synchronizable: Bool) {
        sync = synchronizable ? .synchronizable : .nonSynchronizable
    }

    public subscript(_ name: AttributeName) -> AttributeValue? {
        get { attributes[name.rawValue] }
        set { attributes[name.rawValue] = newValue }
    }

    /// Sets attributes given as a front end holds them (text, numbers, data), coerced by the class's schema exactly
    /// as Apple's dictionaries are (a decimal string for a numeric attribute becomes a number; semantics §1.2).
    /// errSecNoSuchAttr for a name the class lacks, errSecParam for a value its kind refuses.
    public mutating func set(coercing values: [AttributeName: QueryValue]) throws(KeychainError) {
        let schema = Schema.attributes(of: itemClass)
        for (name, value) in values.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            guard let descriptor = schema[name.rawValue], !QueryChecks.ownFields.contains(name.rawValue) else {
                throw .noSuchAttr(name.rawValue)
            }
            attributes[name.rawValue] = try Coercion.coerce(value, to: descriptor.kind, code: name.rawValue)
        }
    }

    private mutating func set(_ values: [AttributeName: AttributeValue]) {
        for (name, value) in values { attributes[name.rawValue] = value }
    }
}

extension ItemUpdate {
    /// Changes to the label, the secret, or both.
    public init(label: String? = nil, secret: SecretBytes? = nil) {
        self.init()
        if let label { attributes[AttributeName.label.rawValue] = .string(label) }
        valueData = secret
    }
}

extension Item {
    public subscript(_ name: AttributeName) -> AttributeValue? { attributes[name.rawValue] }
}
