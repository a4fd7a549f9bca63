#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A value in a query or attribute dictionary, as a front end hands it in (Apple's CF types, minus the CF).
public indirect enum QueryValue: Sendable, Hashable {
    case string(String)
    case data(Data)
    /// `kSecValueData` from a front end that holds the secret as ``SecretBytes``: no `Data` copy that nobody wipes.
    case secret(SecretBytes)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case date(Date)
    case uuid(UUID)
    case null
    case accessControl(AccessControl)
    /// `kSecUseAuthenticationContext`: an `LAContext`'s engine side.
    case authenticationContext(AuthenticationContext)
    case array([QueryValue])
    /// A value of a type the keychain has no use for (its type name, for the error message).
    case unsupported(String)
}

extension QueryValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension QueryValue {
    var typeName: String {
        switch self {
        case .string: "string"
        case .data, .secret: "data"
        case .int: "number"
        case .double: "number"
        case .bool: "boolean"
        case .date: "date"
        case .uuid: "UUID"
        case .null: "null"
        case .accessControl: "SecAccessControl"
        case .authenticationContext: "LAContext"
        case .array: "array"
        case .unsupported(let name): name
        }
    }

    /// Integer value of a number or boolean.
    var integer: Int64? {
        switch self {
        case .int(let n): n
        case .bool(let b): b ? 1 : 0
        case .double(let d) where d.isFinite && d >= -9.2e18 && d <= 9.2e18: Int64(d)
        default: nil
        }
    }
}

// MARK: - Hashable (a secret is compared in constant time and hashed by its length only)

extension QueryValue {
    public static func == (a: QueryValue, b: QueryValue) -> Bool {
        switch (a, b) {
        case (.string(let x), .string(let y)): x == y
        case (.data(let x), .data(let y)): x == y
        case (.secret(let x), .secret(let y)): x == y
        case (.int(let x), .int(let y)): x == y
        case (.double(let x), .double(let y)): x == y
        case (.bool(let x), .bool(let y)): x == y
        case (.date(let x), .date(let y)): x == y
        case (.uuid(let x), .uuid(let y)): x == y
        case (.null, .null): true
        case (.accessControl(let x), .accessControl(let y)): x == y
        case (.authenticationContext(let x), .authenticationContext(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.unsupported(let x), .unsupported(let y)): x == y
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(typeName)
        switch self {
        case .string(let v): hasher.combine(v)
        case .data(let v): hasher.combine(v)
        case .secret(let v): hasher.combine(v.count)
        case .int(let v): hasher.combine(v)
        case .double(let v): hasher.combine(v)
        case .bool(let v): hasher.combine(v)
        case .date(let v): hasher.combine(v)
        case .uuid(let v): hasher.combine(v)
        case .null: break
        case .accessControl(let v): hasher.combine(v)
        case .authenticationContext(let v): hasher.combine(v)
        case .array(let v): hasher.combine(v)
        case .unsupported(let v): hasher.combine(v)
        }
    }
}
