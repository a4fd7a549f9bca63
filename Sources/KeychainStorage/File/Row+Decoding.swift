import GRDB
import KeychainCore

extension Row {
    /// The value of `column`. A missing, NULL or mistyped value (a damaged or edited file) is errSecDecode for the
    /// caller, never a trap in the process (GRDB's subscript stops the process on a failed conversion).
    func required<Value: DatabaseValueConvertible>(_ column: String, as type: Value.Type = Value.self)
        throws(KeychainError) -> Value
    {
        do { return try decode(Value.self, forColumn: column) } catch { throw KeychainError.decode("column \(column)") }
    }

    /// The value at position `index` of the select list, checked the same way.
    func required<Value: DatabaseValueConvertible>(at index: Int, as type: Value.Type = Value.self)
        throws(KeychainError) -> Value
    {
        do { return try decode(Value.self, atIndex: index) } catch { throw KeychainError.decode("column \(index)") }
    }

    /// The value at position `index`, or nil when it is NULL; a mistyped value is errSecDecode.
    func optional<Value: DatabaseValueConvertible>(at index: Int, as type: Value.Type = Value.self)
        throws(KeychainError) -> Value?
    {
        do { return try decode(Value?.self, atIndex: index) } catch { throw KeychainError.decode("column \(index)") }
    }
}
