import Foundation
import Synchronization

// The Core Foundation calls keychain code makes next to SecItem: reading a CFError, walking a result, building a
// CFString or CFData. Over Foundation's types (CFError is NSError here, CFDictionary NSDictionary, ...).

public typealias CFErrorDomain = CFString
public typealias CFStringEncoding = UInt32
public typealias CFHashCode = UInt

public let kCFStringEncodingUTF8: CFStringEncoding = 0x0800_0100
public let kCFStringEncodingASCII: CFStringEncoding = 0x0600

public enum CFStringBuiltInEncodings: CFStringEncoding, Sendable {
    case macRoman = 0
    case windowsLatin1 = 0x0500
    case isoLatin1 = 0x0201
    case nextStepLatin = 0x0B01
    case ASCII = 0x0600
    case unicode = 0x0100
    case UTF8 = 0x0800_0100
    case nonLossyASCII = 0x0BFF
    case UTF16BE = 0x1000_0100
    case UTF16LE = 0x1400_0100
    case UTF32 = 0x0C00_0100
    case UTF32BE = 0x1800_0100
    case UTF32LE = 0x1C00_0100
}

// Apple's string constants (CFError.h, CFBundle.h).
public nonisolated(unsafe) let kCFErrorDomainOSStatus: CFErrorDomain! = "NSOSStatusErrorDomain" as NSString
public nonisolated(unsafe) let kCFErrorDomainPOSIX: CFErrorDomain! = "NSPOSIXErrorDomain" as NSString
public nonisolated(unsafe) let kCFErrorDomainCocoa: CFErrorDomain! = "NSCocoaErrorDomain" as NSString
public nonisolated(unsafe) let kCFErrorLocalizedDescriptionKey: CFString! = "NSLocalizedDescription" as NSString
public nonisolated(unsafe) let kCFErrorLocalizedFailureReasonKey: CFString! = "NSLocalizedFailureReason" as NSString
public nonisolated(unsafe) let kCFErrorLocalizedRecoverySuggestionKey: CFString! =
    "NSLocalizedRecoverySuggestion" as NSString
public nonisolated(unsafe) let kCFErrorDescriptionKey: CFString! = "NSDescription" as NSString
public nonisolated(unsafe) let kCFErrorUnderlyingErrorKey: CFString! = "NSUnderlyingError" as NSString
public nonisolated(unsafe) let kCFBundleIdentifierKey: CFString! = "CFBundleIdentifier" as NSString
public nonisolated(unsafe) let kCFBundleNameKey: CFString! = "CFBundleName" as NSString
public nonisolated(unsafe) let kCFBundleVersionKey: CFString! = "CFBundleVersion" as NSString
public nonisolated(unsafe) let kCFBundleExecutableKey: CFString! = "CFBundleExecutable" as NSString
public nonisolated(unsafe) let kCFBundleInfoDictionaryVersionKey: CFString! = "CFBundleInfoDictionaryVersion" as NSString
public let kCFNotFound: CFIndex = -1

// MARK: - CFError

public func CFErrorCreate(_ allocator: CFAllocator?, _ domain: CFErrorDomain!, _ code: CFIndex,
                          _ userInfo: CFDictionary?) -> CFError! {
    var info: [String: Any] = [:]
    for (key, value) in userInfo ?? [:] { if let key = key as? String { info[key] = value } }
    return NSError(domain: domain as String, code: code, userInfo: info)
}

public func CFErrorGetDomain(_ error: CFError!) -> CFErrorDomain! { error.domain as NSString }
public func CFErrorGetCode(_ error: CFError!) -> CFIndex { error.code }
public func CFErrorCopyUserInfo(_ error: CFError!) -> CFDictionary! { NSDictionary(dictionary: error.userInfo) }

/// The localized description, as Apple builds it when the user info has none: "The operation couldn't be
/// completed. (DOMAIN error CODE.)".
public func CFErrorCopyDescription(_ error: CFError!) -> CFString! {
    if let text = error.userInfo[NSLocalizedDescriptionKey] as? String { return text as NSString }
    return "The operation couldn’t be completed. (\(error.domain) error \(error.code).)" as NSString
}

public func CFErrorCopyFailureReason(_ error: CFError!) -> CFString? {
    (error.userInfo[NSLocalizedFailureReasonErrorKey] as? String).map { $0 as NSString }
}

public func CFErrorCopyRecoverySuggestion(_ error: CFError!) -> CFString? {
    (error.userInfo[NSLocalizedRecoverySuggestionErrorKey] as? String).map { $0 as NSString }
}

public func CFErrorGetTypeID() -> CFTypeID { 45 }

// MARK: - Memory: no-ops (Swift manages these objects)

@discardableResult
public func CFRetain(_ object: CFTypeRef!) -> CFTypeRef! { object }
public func CFRelease(_ object: CFTypeRef!) {}
public func CFAutorelease(_ object: CFTypeRef!) -> CFTypeRef! { object }

public func CFHash(_ object: CFTypeRef!) -> CFHashCode { UInt(bitPattern: (object as? NSObject)?.hash ?? 0) }
public func CFCopyDescription(_ object: CFTypeRef!) -> CFString! { String(describing: object!) as NSString }

// MARK: - Booleans, strings, data

public func CFBooleanGetValue(_ boolean: CFBoolean!) -> Bool { boolean.boolValue }

public func CFStringCreateWithCString(_ allocator: CFAllocator?, _ cString: UnsafePointer<CChar>!,
                                      _ encoding: CFStringEncoding) -> CFString! {
    guard let cString else { return nil }
    switch encoding {
    case kCFStringEncodingUTF8, kCFStringEncodingASCII:
        return String(validatingCString: cString).map { $0 as NSString }
    default:
        return NSString(cString: cString, encoding: String.Encoding.isoLatin1.rawValue)
    }
}

public func CFStringGetLength(_ string: CFString!) -> CFIndex { string.length }

public func CFStringCreateWithBytes(_ allocator: CFAllocator?, _ bytes: UnsafePointer<UInt8>!, _ count: CFIndex,
                                    _ encoding: CFStringEncoding, _ isExternalRepresentation: Bool) -> CFString! {
    guard let bytes else { return nil }
    let buffer = UnsafeBufferPointer(start: bytes, count: count)
    return String(validating: buffer, as: UTF8.self).map { $0 as NSString }
}

public func CFDataCreate(_ allocator: CFAllocator?, _ bytes: UnsafePointer<UInt8>!, _ length: CFIndex) -> CFData! {
    guard let bytes else { return NSData() }
    return NSData(bytes: bytes, length: length)
}

public func CFDataGetLength(_ data: CFData!) -> CFIndex { data.length }

public func CFDataGetBytePtr(_ data: CFData!) -> UnsafePointer<UInt8>! {
    data.length == 0 ? nil : data.bytes.assumingMemoryBound(to: UInt8.self)
}

// MARK: - Dictionaries and arrays (keys and values as opaque pointers, as in C)

/// Keeps the objects handed out by the "Get" calls alive while their container lives. Foundation on Linux turns a
/// container's NSString/NSData/NSDictionary values back into Swift values on every read, so the object a pointer
/// would point to is a fresh copy that dies at once; here each one is kept per container and key instead, and
/// dropped once its container is gone (checked at each call).
private enum BorrowedValues {
    struct Entry: @unchecked Sendable {  // SAFETY: only touched under `entries`' lock
        weak var container: AnyObject?
        let key: AnyHashable
        let value: AnyObject
    }
    static let entries = Mutex<[Entry]>([])

    static func pointer(in container: AnyObject, key: AnyHashable, _ read: () -> Any?) -> UnsafeRawPointer? {
        let address = entries.withLock { entries -> UInt? in
            entries.removeAll { $0.container == nil }
            if let kept = entries.first(where: { $0.container === container && $0.key == key }) {
                return UInt(bitPattern: Unmanaged.passUnretained(kept.value).toOpaque())
            }
            guard let value = read() else { return nil }
            let object = value as AnyObject
            entries.append(Entry(container: container, key: key, value: object))
            return UInt(bitPattern: Unmanaged.passUnretained(object).toOpaque())
        }
        return address.flatMap { UnsafeRawPointer(bitPattern: $0) }
    }
}

public func CFDictionaryGetCount(_ dictionary: CFDictionary!) -> CFIndex { dictionary.count }

public func CFDictionaryGetValue(_ dictionary: CFDictionary!, _ key: UnsafeRawPointer!) -> UnsafeRawPointer! {
    guard let key else { return nil }
    let keyObject = Unmanaged<AnyObject>.fromOpaque(key).takeUnretainedValue()
    guard let hashable = keyObject as? AnyHashable else { return nil }
    return BorrowedValues.pointer(in: dictionary, key: hashable) { dictionary.object(forKey: keyObject) }
}

public func CFDictionaryContainsKey(_ dictionary: CFDictionary!, _ key: UnsafeRawPointer!) -> Bool {
    guard let key else { return false }
    return dictionary.object(forKey: Unmanaged<AnyObject>.fromOpaque(key).takeUnretainedValue()) != nil
}

public func CFArrayGetCount(_ array: CFArray!) -> CFIndex { array.count }

public func CFArrayGetValueAtIndex(_ array: CFArray!, _ index: CFIndex) -> UnsafeRawPointer! {
    BorrowedValues.pointer(in: array, key: AnyHashable(index)) { array.object(at: index) }
}
