#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Typed requests for front ends that know what they want (the Secret Service, the tools), with no dictionary to
// parse in between.

extension ItemQuery {
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
}

extension ItemUpdate {
    /// Changes to the label (`labl`), the secret, or both.
    public init(label: String? = nil, secret: SecretBytes? = nil) {
        self.init()
        if let label { attributes["labl"] = .string(label) }
        valueData = secret
    }
}
