import Foundation

// Core Foundation stand-ins: on Linux, Foundation has no CF types, so Apple-style code such as
// `query as CFDictionary`, `var result: CFTypeRef?` or `kCFBooleanTrue` needs these names.

public typealias OSStatus = Int32
public let noErr: OSStatus = 0

public typealias CFTypeRef = AnyObject
public typealias CFString = NSString
public typealias CFDictionary = NSDictionary
public typealias CFMutableDictionary = NSMutableDictionary
public typealias CFArray = NSArray
public typealias CFData = NSData
public typealias CFNumber = NSNumber
public typealias CFBoolean = NSNumber
public typealias CFDate = NSDate
public typealias CFError = NSError
public typealias CFIndex = Int
public typealias CFOptionFlags = UInt
public typealias CFTypeID = UInt
public typealias CFAllocator = NSObject

public nonisolated(unsafe) let kCFAllocatorDefault: CFAllocator? = nil
public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)
public let kCFNull: NSNull = NSNull()

/// Type identifiers for `CFGetTypeID` (stable within a process, as Apple's are).
public func CFStringGetTypeID() -> CFTypeID { 7 }
public func CFDictionaryGetTypeID() -> CFTypeID { 18 }
public func CFArrayGetTypeID() -> CFTypeID { 19 }
public func CFDataGetTypeID() -> CFTypeID { 20 }
public func CFBooleanGetTypeID() -> CFTypeID { 21 }
public func CFNumberGetTypeID() -> CFTypeID { 22 }
public func CFDateGetTypeID() -> CFTypeID { 42 }
public func CFNullGetTypeID() -> CFTypeID { 16 }

public func CFGetTypeID(_ object: CFTypeRef?) -> CFTypeID {
    switch object {
    case is SecAccessControl: SecAccessControlGetTypeID()
    case is SecKey: SecKeyGetTypeID()
    case is SecCertificate: SecCertificateGetTypeID()
    case is SecIdentity: SecIdentityGetTypeID()
    case is NSError: CFErrorGetTypeID()
    case let n as NSNumber: n.isBoolean ? CFBooleanGetTypeID() : CFNumberGetTypeID()
    case is NSString, is String: CFStringGetTypeID()
    case is NSData, is Data: CFDataGetTypeID()
    case is NSDictionary: CFDictionaryGetTypeID()
    case is NSArray: CFArrayGetTypeID()
    case is NSDate, is Date: CFDateGetTypeID()
    case is NSNull: CFNullGetTypeID()
    default: 0
    }
}

public func CFEqual(_ a: CFTypeRef?, _ b: CFTypeRef?) -> Bool {
    switch (a, b) {
    case (nil, nil): true
    case (let x as NSObject, let y as NSObject): x.isEqual(y)
    default: false
    }
}

extension NSNumber {
    /// True for numbers made from a Bool (`kCFBooleanTrue`, Swift `true`): their type code is `c`.
    var isBoolean: Bool { String(cString: objCType) == "c" }
}
