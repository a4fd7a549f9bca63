#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Which of the four calls a dictionary is parsed for; the rules differ (semantics §3.3–§3.7).
public enum Operation: String, Sendable {
    case add, search, update, delete
}

/// How many matches a call returns or touches, and in which container (semantics §3.4 `kSecMatchLimit`).
public struct MatchLimit: Sendable, Hashable {
    /// Most matches to take; nil means all.
    public var count: Int?
    /// Whether the result is an array (`kSecMatchLimitAll`, numbers other than 1) or a single object.
    public var returnsArray: Bool

    public static let one = MatchLimit(count: 1, returnsArray: false)
    public static let all = MatchLimit(count: nil, returnsArray: true)
    public init(count: Int?, returnsArray: Bool) {
        self.count = count
        self.returnsArray = returnsArray
    }
}

/// Which synchronizable items a query sees (semantics §3.2, §3.8).
public enum SyncFilter: Sendable, Hashable {
    case nonSynchronizable, synchronizable, any
}

/// `kSecUseAuthenticationUI`.
public enum AuthenticationUI: String, Sendable, Hashable {
    case allow = "u_AuthUIA"
    case fail = "u_AuthUIF"
    case skip = "u_AuthUIS"
}

/// What to hand back per item (`kSecReturn*`).
public struct ReturnTypes: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let data = ReturnTypes(rawValue: 1)
    public static let attributes = ReturnTypes(rawValue: 2)
    public static let ref = ReturnTypes(rawValue: 4)
    public static let persistentRef = ReturnTypes(rawValue: 8)
    public static let all: ReturnTypes = [.data, .attributes, .ref, .persistentRef]

    /// One kind gives a bare value; two or more give a dictionary (semantics §3.5).
    public var wantsDictionary: Bool { rawValue.nonzeroBitCount >= 2 }
}

/// A parsed and validated query, attribute or update dictionary.
public struct ItemQuery: Sendable {
    public var operation: Operation
    public var itemClass: ItemClass
    /// Attribute filters (search, update, delete) or values (add), coerced; excludes `sync`, `agrp`, `pdmn`, `accc`.
    public var attributes: [String: AttributeValue] = [:]
    public var accessGroup: String?
    public var accessibility: Accessibility?
    public var accessControl: AccessControl?
    public var sync: SyncFilter = .nonSynchronizable
    public var valueData: SecretBytes?
    public var persistentReference: PersistentReference?
    public var itemList: [PersistentReference]?
    public var limit: MatchLimit
    public var returnTypes: ReturnTypes = []
    public var authenticationUI: AuthenticationUI = .allow
    public var operationPrompt: String?
    /// `kSecAttrAccess` on an add: the trusted applications asked for (nil: the creating program alone).
    public var applicationAccess: ApplicationAccessRequest?
    /// `kSecUseAuthenticationContext`.
    public var authenticationContext: AuthenticationContext?
    /// `kSecUseDataProtectionKeychain` (`kSecAttrNoLegacy`): the item lives by access groups, as on iOS.
    public var dataProtectionKeychain = false
    /// True when the dictionary named any `kSecMatch*` key (the rules for update and delete care).
    var hadMatchKeys = false

    /// An empty query of `operation` on `itemClass`, with the operation's default limit (search one, else all).
    public init(operation: Operation, itemClass: ItemClass) {
        self.operation = operation
        self.itemClass = itemClass
        self.limit = operation == .search ? .one : .all
    }
}
