#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Apple's input coercion for attribute values (semantics §1.2). Failure is `errSecParam`.
enum Coercion {
    static func coerce(_ value: QueryValue, to kind: AttributeKind, code: String) throws(KeychainError)
        -> AttributeValue
    {
        func bad() -> KeychainError { .param("attribute \(code): \(value.typeName) is not accepted") }
        switch kind {
        case .blob:
            switch value {
            case .string(let s): return .string(s)
            case .data(let d): return .data(d)
            case .int, .bool, .double: return .number(value.integer ?? 0)
            case .uuid(let u): return .string(u.uuidString)
            default: throw bad()
            }
        case .data:
            switch value {
            case .data(let d): return .data(d)
            case .string(let s): return .data(Data(s.utf8))
            case .int, .bool, .double:
                let v = Int32(truncatingIfNeeded: value.integer ?? 0).littleEndian
                return .data(withUnsafeBytes(of: v) { Data($0) })
            default: throw bad()
            }
        case .string:
            switch value {
            case .string(let s): return .string(s)
            case .data(let d):
                guard let s = String(validating: d, as: UTF8.self) else { throw bad() }
                return .string(s)
            case .uuid(let u): return .string(u.uuidString)
            default: throw bad()
            }
        case .number:
            switch value {
            case .int, .bool, .double: return .number(value.integer ?? 0)
            case .string(let s):
                if let n = canonicalInteger(s) { return .number(n) }
                return .string(s)
            default: throw bad()
            }
        case .date:
            guard case .date(let d) = value else { throw bad() }
            return .date(d)
        case .access:
            guard case .string(let s) = value, Accessibility(rawValue: s) != nil else { throw bad() }
            return .string(s)
        case .sync:
            switch value {
            case .int, .bool, .double: return .number(value.integer == 0 ? 0 : 1)
            case .string(let s):
                guard let n = canonicalInteger(s) else { throw bad() }
                return .number(n == 0 ? 0 : 1)
            default: throw bad()
            }
        case .uuid:
            switch value {
            case .null: return .data(Data())
            case .uuid(let u): return .data(withUnsafeBytes(of: u.uuid) { Data($0) })
            case .data(let d) where d.isEmpty || d.count == 16: return .data(d)
            default: throw bad()
            }
        case .sha1:
            guard case .data(let d) = value, d.count == 20 else { throw bad() }
            return .data(d)
        case .accessControl:
            throw bad()
        }
    }

    /// A decimal integer written the way CFNumber would print it ("42", "-7"), else nil.
    static func canonicalInteger(_ s: String) -> Int64? {
        guard let n = Int64(s), String(n) == s else { return nil }
        return n
    }
}
