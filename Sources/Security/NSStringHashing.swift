import Foundation

// On Apple platforms an NSString hashes and compares as the String it holds, so a dictionary read with a `kSec…`
// constant (a CFString, which is an NSString) finds the entry a String key made, and the other way round:
// `attributes[kSecAttrAccount]`, `NSDictionary(dictionary: query).isEqual(to: query)`. On Linux, Foundation's
// NSString keeps its object identity in AnyHashable instead. Importing `Security` gives it Apple's behaviour, for the
// whole process (docs/COMPATIBILITY.md): an NSString (or NSMutableString) in an AnyHashable is its String value.
extension NSString: @retroactive _HasCustomAnyHashableRepresentation {
    public func _toCustomAnyHashable() -> AnyHashable? { AnyHashable(String(self)) }
}
