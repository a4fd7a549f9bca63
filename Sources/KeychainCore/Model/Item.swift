#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A stored item without its secret: class, attributes (defaults filled in), access control and identity.
public struct Item: Sendable, Hashable {
    public var itemClass: ItemClass
    /// Every attribute the item has, `agrp`, `pdmn`, `sync`, `cdat` and `mdat` included.
    public var attributes: [String: AttributeValue]
    public var accessControl: AccessControl?
    /// The programs that read the secret without being asked; nil: every program (items stored before these lists
    /// existed, and items stored where the creating program is not known, as in embedded mode).
    public var applicationAccess: ApplicationAccess?
    /// The stable identity behind the item's persistent reference.
    public var uuid: UUID
    /// Which of macOS's two models gates the item: access groups (data protection) or its trusted applications
    /// alone (a file keychain's item), decided when it is added (``AccessEvaluator/accessModel(for:applicationAccess:)``).
    public var accessModel: AccessModel = .groups

    public init(itemClass: ItemClass, attributes: [String: AttributeValue], accessControl: AccessControl? = nil,
                applicationAccess: ApplicationAccess? = nil, uuid: UUID = UUID()) {
        self.itemClass = itemClass
        self.attributes = attributes
        self.accessControl = accessControl
        self.applicationAccess = applicationAccess
        self.uuid = uuid
    }

    public var accessibility: Accessibility {
        if let ac = accessControl { return ac.protection }
        return Accessibility(rawValue: attributes["pdmn"]?.stringValue ?? "") ?? .defaultValue(for: itemClass)
    }
    public var accessGroup: String { attributes["agrp"]?.stringValue ?? "" }
    public var isSynchronizable: Bool { attributes["sync"] == .number(1) }
    public var persistentReference: PersistentReference { PersistentReference(itemClass: itemClass, uuid: uuid) }

    /// The value an attribute counts as for matching and uniqueness: stored value, else the kind's default.
    public func effectiveValue(_ code: String) -> AttributeValue? {
        if let v = attributes[code] { return v }
        guard let d = Schema.attributes(of: itemClass)[code], d.isPrimaryKey else { return nil }
        return d.kind.defaultValue
    }

    /// A canonical byte string of the uniqueness key: two items collide exactly when these are equal.
    public var primaryKeyBytes: [UInt8] {
        var out = Array(itemClass.rawValue.utf8)
        let schema = Schema.attributes(of: itemClass)
        // A file keychain's item is one per primary key whatever its group, as on macOS: two programs storing the
        // same service and account meet as a duplicate, not as two items each sees the other's of.
        for code in Schema.primaryKey(of: itemClass) where !(accessModel == .applications && code == "agrp") {
            let kind = schema[code]!.kind
            let key = (effectiveValue(code) ?? kind.defaultValue).matchKey(for: kind)
            out.append(contentsOf: Array(code.utf8))
            var len = UInt32(key.count).bigEndian
            withUnsafeBytes(of: &len) { out.append(contentsOf: $0) }
            out.append(contentsOf: key)
        }
        return out
    }
}
