import Foundation

/// A value in a query or attribute dictionary, as a front end hands it in (Apple's CF types, minus the CF).
public indirect enum QueryValue: Sendable, Hashable {
    case string(String)
    case data(Data)
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
        case .data: "data"
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
