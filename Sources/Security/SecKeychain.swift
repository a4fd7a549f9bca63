import Foundation
import KeychainClient
import KeychainCore
import Synchronization

// The legacy macOS file-keychain API (semantics §7), over the same keychain files. Items it adds land in the
// application's access group; its searches see every group, as the file keychain has none.

public typealias SecKeychainStatus = UInt32
public typealias SecKeychainAttrType = OSType
public typealias OSType = FourCharCode
public typealias FourCharCode = UInt32
public typealias SecPreferencesDomain = Int32

public let kSecUnlockStateStatus: SecKeychainStatus = 1
public let kSecReadPermStatus: SecKeychainStatus = 2
public let kSecWritePermStatus: SecKeychainStatus = 4
public let SEC_KEYCHAIN_SETTINGS_VERS1: UInt32 = 1

/// C's `Boolean` as Swift imports it on Apple platforms.
public struct DarwinBoolean: ExpressibleByBooleanLiteral, Hashable, Sendable, CustomStringConvertible {
    public var boolValue: Bool
    public init(_ value: Bool) { boolValue = value }
    public init(booleanLiteral value: Bool) { boolValue = value }
    public var description: String { boolValue.description }
}

public struct SecKeychainSettings: Sendable {
    public var version: UInt32
    public var lockOnSleep: DarwinBoolean
    public var useLockInterval: DarwinBoolean
    public var lockInterval: UInt32
    public init() { self.init(version: 0, lockOnSleep: false, useLockInterval: false, lockInterval: 0) }
    public init(version: UInt32, lockOnSleep: DarwinBoolean, useLockInterval: DarwinBoolean, lockInterval: UInt32) {
        self.version = version
        self.lockOnSleep = lockOnSleep
        self.useLockInterval = useLockInterval
        self.lockInterval = lockInterval
    }
}

public struct SecKeychainAttribute {
    public var tag: SecKeychainAttrType
    public var length: UInt32
    public var data: UnsafeMutableRawPointer?
    public init(tag: SecKeychainAttrType, length: UInt32, data: UnsafeMutableRawPointer?) {
        self.tag = tag
        self.length = length
        self.data = data
    }
}

public struct SecKeychainAttributeList {
    public var count: UInt32
    public var attr: UnsafeMutablePointer<SecKeychainAttribute>?
    public init(count: UInt32, attr: UnsafeMutablePointer<SecKeychainAttribute>?) {
        self.count = count
        self.attr = attr
    }
}

/// Legacy attribute tags (`SecItemAttr`), four-character codes.
public struct SecItemAttr: RawRepresentable, Hashable, Sendable {
    public var rawValue: FourCharCode
    public init(rawValue: FourCharCode) { self.rawValue = rawValue }
    static func code(_ s: String) -> Self { Self(rawValue: s.utf8.reduce(0) { $0 << 8 | FourCharCode($1) }) }
    public static let creationDateItemAttr = code("cdat"), modDateItemAttr = code("mdat")
    public static let descriptionItemAttr = code("desc"), commentItemAttr = code("icmt")
    public static let creatorItemAttr = code("crtr"), typeItemAttr = code("type"), scriptCodeItemAttr = code("scrp")
    public static let labelItemAttr = code("labl"), invisibleItemAttr = code("invi"), negativeItemAttr = code("nega")
    public static let customIconItemAttr = code("cusi"), accountItemAttr = code("acct"), serviceItemAttr = code("svce")
    public static let genericItemAttr = code("gena"), securityDomainItemAttr = code("sdmn")
    public static let serverItemAttr = code("srvr"), authenticationTypeItemAttr = code("atyp")
    public static let portItemAttr = code("port"), pathItemAttr = code("path"), protocolItemAttr = code("ptcl")
    public static let volumeItemAttr = code("vlme"), addressItemAttr = code("addr"), signatureItemAttr = code("ssig")
    public static let certificateType = code("ctyp"), certificateEncoding = code("cenc")
    public static let crlType = code("crtp"), crlEncoding = code("crnc"), alias = code("alis")
}

/// `SecProtocolType` (four-character codes).
public struct SecProtocolType: RawRepresentable, Hashable, Sendable {
    public var rawValue: FourCharCode
    public init(rawValue: FourCharCode) { self.rawValue = rawValue }
    init(_ code: String) { rawValue = code.utf8.reduce(0) { $0 << 8 | FourCharCode($1) } }
    public static let FTP = Self("ftp "), FTPAccount = Self("ftpa"), HTTP = Self("http"), IRC = Self("irc ")
    public static let NNTP = Self("nntp"), POP3 = Self("pop3"), SMTP = Self("smtp"), SOCKS = Self("sox ")
    public static let IMAP = Self("imap"), LDAP = Self("ldap"), appleTalk = Self("atlk"), AFP = Self("afp ")
    public static let telnet = Self("teln"), SSH = Self("ssh "), FTPS = Self("ftps"), HTTPS = Self("htps")
    public static let HTTPProxy = Self("htpx"), HTTPSProxy = Self("htsx"), FTPProxy = Self("ftpx")
    public static let CIFS = Self("cifs"), SMB = Self("smb "), RTSP = Self("rtsp"), RTSPProxy = Self("rtsx")
    public static let DAAP = Self("daap"), EPPC = Self("eppc"), IPP = Self("ipp "), NNTPS = Self("ntps")
    public static let LDAPS = Self("ldps"), telnetS = Self("tels"), IMAPS = Self("imps"), IRCS = Self("ircs")
    public static let POP3S = Self("pops"), CVSpserver = Self("cvsp"), SVN = Self("svn "), any = Self(rawValue: 0)
}

/// `SecAuthenticationType` (four-character codes).
public struct SecAuthenticationType: RawRepresentable, Hashable, Sendable {
    public var rawValue: FourCharCode
    public init(rawValue: FourCharCode) { self.rawValue = rawValue }
    init(_ code: String) { rawValue = code.utf8.reduce(0) { $0 << 8 | FourCharCode($1) } }
    public static let NTLM = Self("ntlm"), MSN = Self("msna"), DPA = Self("dpaa"), RPA = Self("rpaa")
    public static let httpBasic = Self("http"), httpDigest = Self("httd"), htmlForm = Self("form")
    public static let `default` = Self("dflt"), any = Self(rawValue: 0)
}

/// A keychain file (`SecKeychainRef`). Opening never checks that the file exists; later calls report it.
public final class SecKeychain: NSObject, @unchecked Sendable {
    // SAFETY: immutable after init.
    let url: URL
    init(url: URL) { self.url = url.standardizedFileURL }
    public override func isEqual(_ object: Any?) -> Bool { (object as? SecKeychain)?.url == url }
    public override var hash: Int { url.hashValue }
    public override var description: String { "<SecKeychain \(url.path)>" }
}

/// One item of a keychain file (`SecKeychainItemRef`).
public final class SecKeychainItem: NSObject, @unchecked Sendable {
    // SAFETY: immutable after init.
    let keychain: SecKeychain
    let reference: PersistentReference
    init(keychain: SecKeychain, reference: PersistentReference) {
        self.keychain = keychain
        self.reference = reference
    }
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? SecKeychainItem else { return false }
        return other.keychain == keychain && other.reference == reference
    }
    public override var hash: Int { reference.hashValue }
}

public typealias SecKeychainRef = SecKeychain
public typealias SecKeychainItemRef = SecKeychainItem

public func SecKeychainGetTypeID() -> CFTypeID { 300 }
public func SecKeychainItemGetTypeID() -> CFTypeID { 301 }

// MARK: - Process state

enum Legacy {
    static let userInteractionAllowed = Atomic<Bool>(true)
    /// A registered callback.
    struct Registration: @unchecked Sendable {
        // SAFETY: the context pointer is the caller's, handed back to its own callback untouched.
        let function: SecKeychainCallback
        let mask: UInt32
        let context: UnsafeMutableRawPointer?
    }
    static let callbacks = Mutex<[Registration]>([])

    /// The legacy calls' keychain service: the application's groups, and every group for finds and changes (the
    /// legacy API sees the whole file keychain); adds land in the application's first group.
    static let service: any KeychainService =
        (try? KeychainBackend.service(caller: caller)) ?? EmbeddedKeychainService(caller: caller)

    /// The application's groups, and every group for finds (the legacy API sees the whole file keychain). Asking
    /// never opens, let alone creates, a keychain.
    static var caller: Caller {
        Caller(accessGroups: ApplicationIdentity.current().accessGroups + [Caller.wildcardGroup])
    }

    /// A keychain path as the service resolves it (relative names live in the keychain directory).
    static func url(_ path: UnsafePointer<CChar>) -> URL { URL(fileURLWithPath: service.resolve(String(cString: path)).path) }

    static func reference(_ keychain: SecKeychain?) -> KeychainReference {
        keychain.map { KeychainReference(path: $0.url.standardizedFileURL.path) } ?? service.defaultKeychain()
    }

    /// An existing keychain (the default one when nil; a missing default `login` keychain is created, without a
    /// password, as the first SecItem call would).
    static func existing(_ keychain: SecKeychain?) throws(KeychainError) -> KeychainReference {
        try service.existingKeychain(keychain.map { KeychainReference(path: $0.url.standardizedFileURL.path) })
    }

    /// The keychains a find visits: the one given, the array given, or the search list.
    static func keychains(_ keychainOrArray: CFTypeRef?) -> [SecKeychain] {
        if let one = keychainOrArray as? SecKeychain { return [one] }
        if let many = keychainOrArray as? [Any] { return many.compactMap { $0 as? SecKeychain } }
        return service.searchList().map { SecKeychain(url: URL(fileURLWithPath: $0.path)) }
    }

    static func string(_ pointer: UnsafePointer<CChar>?, _ length: UInt32) -> String? {
        guard let pointer, length > 0 else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: Int(length)), as: UTF8.self)
    }

    static func post(_ event: SecKeychainEvent, keychain: SecKeychain?, item: SecKeychainItem?, pid: pid_t = getpid()) {
        let listeners = callbacks.withLock { $0 }.filter { $0.mask & (1 << event.rawValue) != 0 }
        guard !listeners.isEmpty else { return }
        var info = SecKeychainCallbackInfo(version: 0, item: item, keychain: keychain, pid: pid)
        for listener in listeners { _ = listener.function(event, &info, listener.context) }
    }

    /// Other processes' events, from keychaind, while any callback is registered (this process's own are posted
    /// where they happen, so they are not delivered twice).
    static let subscription = Mutex<EventSubscription?>(nil)

    static func listenToOtherProcesses(_ listen: Bool) {
        subscription.withLock { current in
            if listen, current == nil || current?.isFinished == true {
                current = try? service.subscribe { event in
                    guard event.pid != getpid() else { return }
                    post(SecKeychainEvent(rawValue: event.kind.rawValue),
                         keychain: event.keychain.map { SecKeychain(url: URL(fileURLWithPath: $0)) }, item: nil,
                         pid: event.pid)
                }
            } else if !listen {
                current?.cancel()
                current = nil
            }
        }
    }

    static func fourCC(_ value: FourCharCode) -> String {
        String(decoding: [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)],
               as: UTF8.self)
    }

    /// Adds a password item; returns its ref.
    static func add(_ keychain: SecKeychain?, _ attributes: [String: QueryValue], password: UnsafeRawPointer?,
                    length: UInt32) throws(KeychainError) -> SecKeychainItem {
        if length != 0 && password == nil { throw .param("password length without data") }
        let target = try existing(keychain)
        var dictionary = attributes
        dictionary["v_Data"] = .secret(password.map { SecretBytes(copying: UnsafeRawBufferPointer(start: $0, count: Int(length))) } ?? SecretBytes(Data()))
        let found = try service.add(dictionary, to: target)
        let ref = SecKeychain(url: URL(fileURLWithPath: target.path))
        let item = SecKeychainItem(keychain: ref, reference: found.item.persistentReference)
        post(.addEvent, keychain: ref, item: item)
        return item
    }

    /// The first match in search-list order.
    static func find(_ keychainOrArray: CFTypeRef?, _ query: [String: QueryValue], wantPassword: Bool)
        throws(KeychainError) -> (SecKeychainItem, SecretBytes?)
    {
        var q = query
        q["r_Attributes"] = true
        q["sync"] = "syna"
        if wantPassword { q["r_Data"] = true }
        _ = try QueryParser.parse(q, for: .search)  // bad input is an error before any keychain is opened
        for keychain in keychains(keychainOrArray) {
            let target = reference(keychain)
            let state = try service.state(of: target)
            guard state.exists else { continue }
            do throws(KeychainError) {
                if wantPassword && state.isLocked && !userInteractionAllowed.load(ordering: .relaxed) {
                    throw KeychainError.interactionNotAllowed()
                }
                if let found = try service.search(q, in: target).first {
                    return (SecKeychainItem(keychain: keychain, reference: found.item.persistentReference), found.secret)
                }
            } catch KeychainStatus.itemNotFound {
                continue
            } catch {
                throw error
            }
        }
        throw .itemNotFound()
    }

    static func copyOut(_ secret: SecretBytes?, _ length: UnsafeMutablePointer<UInt32>?,
                        _ data: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) {
        let count = secret?.count ?? 0
        length?.pointee = UInt32(count)
        guard let data else { return }
        // A 16-byte header records the size, so that SecKeychainItemFreeContent can wipe before freeing.
        let block = malloc(count + 16)!
        block.storeBytes(of: count, as: Int.self)
        let buffer = block + 16
        secret?.withUnsafeBytes { if let base = $0.baseAddress { buffer.copyMemory(from: base, byteCount: count) } }
        data.pointee = buffer
    }
}


// MARK: - Keychains

public func SecKeychainCreate(_ pathName: UnsafePointer<CChar>, _ passwordLength: UInt32, _ password: UnsafeRawPointer?,
                              _ promptUser: Bool, _ initialAccess: SecAccess?,
                              _ keychain: UnsafeMutablePointer<SecKeychain?>) -> OSStatus {
    run { () throws(KeychainError) in
        if !promptUser && password == nil && passwordLength == 0 { throw .param("no password and no prompt") }
        if passwordLength != 0 && password == nil { throw .param("password length without data") }
        let target = Legacy.service.resolve(String(cString: pathName))
        let secret = password.map { SecretBytes(copying: UnsafeRawBufferPointer(start: $0, count: Int(passwordLength))) }
        try Legacy.service.createKeychain(target, password: secret, settings: .appleDefault)
        let list = Legacy.service.searchList()
        if !list.contains(target) { try Legacy.service.setSearchList(list + [target]) }
        keychain.pointee = SecKeychain(url: URL(fileURLWithPath: target.path))
        Legacy.post(.keychainListChangedEvent, keychain: keychain.pointee, item: nil)
    }
}

public func SecKeychainOpen(_ pathName: UnsafePointer<CChar>, _ keychain: UnsafeMutablePointer<SecKeychain?>)
    -> OSStatus
{
    var url = Legacy.url(pathName)
    // Opening foo.keychain uses foo.keychain-db when that exists.
    if url.pathExtension == "keychain", FileManager.default.fileExists(atPath: url.path + "-db") {
        url = URL(fileURLWithPath: url.path + "-db")
    }
    keychain.pointee = SecKeychain(url: url)
    return errSecSuccess
}

public func SecKeychainDelete(_ keychainOrArray: CFTypeRef?) -> OSStatus {
    run { () throws(KeychainError) in
        guard let keychainOrArray else { throw KeychainError(.invalidKeychain) }
        for keychain in Legacy.keychains(keychainOrArray) {
            try Legacy.service.deleteKeychain(Legacy.reference(keychain))
        }
        Legacy.post(.keychainListChangedEvent, keychain: nil, item: nil)
    }
}

public func SecKeychainGetPath(_ keychain: SecKeychain?, _ ioPathLength: UnsafeMutablePointer<UInt32>,
                               _ pathName: UnsafeMutablePointer<CChar>) -> OSStatus {
    let path = Legacy.reference(keychain).path
    let bytes = Array(path.utf8)
    guard bytes.count < Int(ioPathLength.pointee) else { return errSecBufferTooSmall }
    for (i, b) in bytes.enumerated() { pathName[i] = CChar(bitPattern: b) }
    pathName[bytes.count] = 0
    ioPathLength.pointee = UInt32(bytes.count)
    return errSecSuccess
}

public func SecKeychainGetStatus(_ keychain: SecKeychain?, _ keychainStatus: UnsafeMutablePointer<SecKeychainStatus>)
    -> OSStatus
{
    run { () throws(KeychainError) in
        let state = try Legacy.service.state(of: Legacy.existing(keychain))
        keychainStatus.pointee = (state.isLocked ? 0 : kSecUnlockStateStatus) | kSecReadPermStatus | kSecWritePermStatus
    }
}

public func SecKeychainGetVersion(_ returnVers: UnsafeMutablePointer<UInt32>) -> OSStatus {
    returnVers.pointee = 512
    return errSecSuccess
}

public func SecKeychainLock(_ keychain: SecKeychain?) -> OSStatus {
    run { () throws(KeychainError) in
        let target = try Legacy.existing(keychain)
        try Legacy.service.lock(target)
        Legacy.post(.lockEvent, keychain: keychain ?? SecKeychain(url: URL(fileURLWithPath: target.path)), item: nil)
    }
}

public func SecKeychainLockAll() -> OSStatus {
    Legacy.service.lockAll()
    for keychain in Legacy.service.searchList() where (try? Legacy.service.state(of: keychain).exists) == true {
        Legacy.post(.lockEvent, keychain: SecKeychain(url: URL(fileURLWithPath: keychain.path)), item: nil)
    }
    return errSecSuccess
}

public func SecKeychainUnlock(_ keychain: SecKeychain?, _ passwordLength: UInt32, _ password: UnsafeRawPointer?,
                              _ usePassword: Bool) -> OSStatus {
    run { () throws(KeychainError) in
        let target = try Legacy.existing(keychain)
        guard try Legacy.service.state(of: target).isLocked else { return }
        guard usePassword else {
            // The unlock dialog: nobody to show it to in this process.
            throw KeychainError.interactionNotAllowed()
        }
        let secret = password.map { SecretBytes(copying: UnsafeRawBufferPointer(start: $0, count: Int(passwordLength))) }
        try Legacy.service.unlock(target, password: secret)
        Legacy.post(.unlockEvent, keychain: SecKeychain(url: URL(fileURLWithPath: target.path)), item: nil)
    }
}

public func SecKeychainSetUserInteractionAllowed(_ state: Bool) -> OSStatus {
    Legacy.userInteractionAllowed.store(state, ordering: .relaxed)
    return errSecSuccess
}

public func SecKeychainGetUserInteractionAllowed(_ state: UnsafeMutablePointer<DarwinBoolean>) -> OSStatus {
    state.pointee = DarwinBoolean(Legacy.userInteractionAllowed.load(ordering: .relaxed))
    return errSecSuccess
}

public func SecKeychainSetSettings(_ keychain: SecKeychain?, _ newSettings: UnsafePointer<SecKeychainSettings>)
    -> OSStatus
{
    run { () throws(KeychainError) in
        let s = newSettings.pointee
        guard s.version == SEC_KEYCHAIN_SETTINGS_VERS1 else { throw .param("settings version") }
        let interval: Int? = s.lockInterval >= UInt32(Int32.max) ? nil : Int(s.lockInterval)
        try Legacy.service.setSettings(KeychainSettings(lockInterval: interval, lockOnSleep: s.lockOnSleep.boolValue),
                                       of: Legacy.existing(keychain))
    }
}

public func SecKeychainCopySettings(_ keychain: SecKeychain?, _ outSettings: UnsafeMutablePointer<SecKeychainSettings>)
    -> OSStatus
{
    run { () throws(KeychainError) in
        guard outSettings.pointee.version == SEC_KEYCHAIN_SETTINGS_VERS1 else { throw .param("settings version") }
        let s = try Legacy.service.settings(of: Legacy.existing(keychain))
        outSettings.pointee.lockOnSleep = DarwinBoolean(s.lockOnSleep)
        outSettings.pointee.lockInterval = s.lockInterval.map { UInt32($0) } ?? UInt32(Int32.max)
    }
}

public func SecKeychainCopyDefault(_ keychain: UnsafeMutablePointer<SecKeychain?>) -> OSStatus {
    keychain.pointee = SecKeychain(url: URL(fileURLWithPath: Legacy.service.defaultKeychain().path))
    return errSecSuccess
}

public func SecKeychainSetDefault(_ keychain: SecKeychain?) -> OSStatus {
    run { () throws(KeychainError) in
        try Legacy.service.setDefaultKeychain(keychain.map { Legacy.reference($0) })
        Legacy.post(.defaultChangedEvent, keychain: keychain, item: nil)
    }
}

public func SecKeychainCopySearchList(_ searchList: UnsafeMutablePointer<CFArray?>) -> OSStatus {
    searchList.pointee = NSArray(array: Legacy.service.searchList().map { SecKeychain(url: URL(fileURLWithPath: $0.path)) })
    return errSecSuccess
}

public func SecKeychainSetSearchList(_ searchList: CFArray) -> OSStatus {
    run { () throws(KeychainError) in
        let keychains = searchList.compactMap { $0 as? SecKeychain }
        guard keychains.count == searchList.count else { throw .param("the list holds a non-keychain") }
        try Legacy.service.setSearchList(keychains.map { Legacy.reference($0) })
        Legacy.post(.keychainListChangedEvent, keychain: nil, item: nil)
    }
}

// MARK: - Passwords

public func SecKeychainAddGenericPassword(
    _ keychain: SecKeychain?, _ serviceNameLength: UInt32, _ serviceName: UnsafePointer<CChar>?,
    _ accountNameLength: UInt32, _ accountName: UnsafePointer<CChar>?, _ passwordLength: UInt32,
    _ passwordData: UnsafeRawPointer?, _ itemRef: UnsafeMutablePointer<SecKeychainItem?>?
) -> OSStatus {
    run { () throws(KeychainError) in
        let service = Legacy.string(serviceName, serviceNameLength) ?? ""
        let account = Legacy.string(accountName, accountNameLength) ?? ""
        let item = try Legacy.add(keychain, [
            "class": "genp", "svce": .string(service), "acct": .string(account), "labl": .string(service),
            "crtr": .int(Int64(SecItemAttr.code("aapl").rawValue)),
        ], password: passwordData, length: passwordLength)
        itemRef?.pointee = item
    }
}

public func SecKeychainFindGenericPassword(
    _ keychainOrArray: CFTypeRef?, _ serviceNameLength: UInt32, _ serviceName: UnsafePointer<CChar>?,
    _ accountNameLength: UInt32, _ accountName: UnsafePointer<CChar>?, _ passwordLength: UnsafeMutablePointer<UInt32>?,
    _ passwordData: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ itemRef: UnsafeMutablePointer<SecKeychainItem?>?
) -> OSStatus {
    run { () throws(KeychainError) in
        var query: [String: QueryValue] = ["class": "genp"]
        if let s = Legacy.string(serviceName, serviceNameLength) { query["svce"] = .string(s) }
        if let a = Legacy.string(accountName, accountNameLength) { query["acct"] = .string(a) }
        let (item, secret) = try Legacy.find(keychainOrArray, query, wantPassword: passwordData != nil || passwordLength != nil)
        Legacy.copyOut(secret, passwordLength, passwordData)
        itemRef?.pointee = item
    }
}

public func SecKeychainAddInternetPassword(
    _ keychain: SecKeychain?, _ serverNameLength: UInt32, _ serverName: UnsafePointer<CChar>?,
    _ securityDomainLength: UInt32, _ securityDomain: UnsafePointer<CChar>?, _ accountNameLength: UInt32,
    _ accountName: UnsafePointer<CChar>?, _ pathLength: UInt32, _ path: UnsafePointer<CChar>?, _ port: UInt16,
    _ protocol: SecProtocolType, _ authenticationType: SecAuthenticationType, _ passwordLength: UInt32,
    _ passwordData: UnsafeRawPointer?, _ itemRef: UnsafeMutablePointer<SecKeychainItem?>?
) -> OSStatus {
    run { () throws(KeychainError) in
        let server = Legacy.string(serverName, serverNameLength) ?? ""
        var attributes: [String: QueryValue] = [
            "class": "inet", "srvr": .string(server), "labl": .string(server),
            "crtr": .int(Int64(SecItemAttr.code("aapl").rawValue)), "port": .int(Int64(port)),
            "ptcl": .string(Legacy.fourCC(`protocol`.rawValue)), "atyp": .string(Legacy.fourCC(authenticationType.rawValue)),
        ]
        if `protocol`.rawValue == 0 { attributes["ptcl"] = .int(0) }
        if authenticationType.rawValue == 0 { attributes["atyp"] = .int(0) }
        if let a = Legacy.string(accountName, accountNameLength) { attributes["acct"] = .string(a) }
        if let d = Legacy.string(securityDomain, securityDomainLength) { attributes["sdmn"] = .string(d) }
        if let p = Legacy.string(path, pathLength) { attributes["path"] = .string(p) }
        // Evaluated first: `itemRef?.pointee = try …` would skip the add when itemRef is nil.
        let item = try Legacy.add(keychain, attributes, password: passwordData, length: passwordLength)
        itemRef?.pointee = item
    }
}

public func SecKeychainFindInternetPassword(
    _ keychainOrArray: CFTypeRef?, _ serverNameLength: UInt32, _ serverName: UnsafePointer<CChar>?,
    _ securityDomainLength: UInt32, _ securityDomain: UnsafePointer<CChar>?, _ accountNameLength: UInt32,
    _ accountName: UnsafePointer<CChar>?, _ pathLength: UInt32, _ path: UnsafePointer<CChar>?, _ port: UInt16,
    _ protocol: SecProtocolType, _ authenticationType: SecAuthenticationType,
    _ passwordLength: UnsafeMutablePointer<UInt32>?, _ passwordData: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    _ itemRef: UnsafeMutablePointer<SecKeychainItem?>?
) -> OSStatus {
    run { () throws(KeychainError) in
        // Empty strings and zero port, protocol and authentication type are wildcards.
        var query: [String: QueryValue] = ["class": "inet"]
        if let s = Legacy.string(serverName, serverNameLength) { query["srvr"] = .string(s) }
        if let d = Legacy.string(securityDomain, securityDomainLength) { query["sdmn"] = .string(d) }
        if let a = Legacy.string(accountName, accountNameLength) { query["acct"] = .string(a) }
        if let p = Legacy.string(path, pathLength) { query["path"] = .string(p) }
        if port != 0 { query["port"] = .int(Int64(port)) }
        if `protocol`.rawValue != 0 { query["ptcl"] = .string(Legacy.fourCC(`protocol`.rawValue)) }
        if authenticationType.rawValue != 0 { query["atyp"] = .string(Legacy.fourCC(authenticationType.rawValue)) }
        let (item, secret) = try Legacy.find(keychainOrArray, query, wantPassword: passwordData != nil || passwordLength != nil)
        Legacy.copyOut(secret, passwordLength, passwordData)
        itemRef?.pointee = item
    }
}

// MARK: - Items

public func SecKeychainItemModifyAttributesAndData(
    _ itemRef: SecKeychainItem, _ attrList: UnsafePointer<SecKeychainAttributeList>?, _ length: UInt32,
    _ data: UnsafeRawPointer?
) -> OSStatus {
    run { () throws(KeychainError) in
        var changes: [String: QueryValue] = [:]
        if let list = attrList?.pointee, let attrs = list.attr {
            for i in 0..<Int(list.count) {
                let a = attrs[i]
                let code = Legacy.fourCC(a.tag)
                if code == "mdat" || code == "cdat" { throw KeychainError(.readOnlyAttr) }
                let bytes = a.data.map { Data(bytes: $0, count: Int(a.length)) } ?? Data()
                switch code {
                case "crtr", "type", "port", "invi", "nega", "scrp", "cusi":
                    var n: UInt32 = 0
                    if bytes.count == 4 { n = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) } }
                    changes[code] = .int(Int64(n))
                default:
                    changes[code] = .string(String(decoding: bytes, as: UTF8.self))
                }
            }
        }
        if let data { changes["v_Data"] = .secret(SecretBytes(copying: UnsafeRawBufferPointer(start: data, count: Int(length)))) }
        guard !changes.isEmpty else { return }
        try Legacy.service.update(["v_PersistentRef": .data(itemRef.reference.data)], with: changes,
                                  in: Legacy.existing(itemRef.keychain))
        Legacy.post(.updateEvent, keychain: itemRef.keychain, item: itemRef)
    }
}

public func SecKeychainItemDelete(_ itemRef: SecKeychainItem) -> OSStatus {
    run { () throws(KeychainError) in
        let target = try Legacy.existing(itemRef.keychain)
        do throws(KeychainError) {
            try Legacy.service.delete(["v_PersistentRef": .data(itemRef.reference.data)], in: target)
        } catch KeychainStatus.itemNotFound {
            throw KeychainError(.invalidItemRef)
        } catch {
            throw error
        }
        Legacy.post(.deleteEvent, keychain: itemRef.keychain, item: itemRef)
    }
}

public func SecKeychainItemCopyKeychain(_ itemRef: SecKeychainItem, _ keychainRef: UnsafeMutablePointer<SecKeychain?>)
    -> OSStatus
{
    keychainRef.pointee = itemRef.keychain
    return errSecSuccess
}

/// Frees what a find returned; the password buffer is wiped first.
public func SecKeychainItemFreeContent(_ attrList: UnsafeMutablePointer<SecKeychainAttributeList>?,
                                       _ data: UnsafeMutableRawPointer?) -> OSStatus {
    if let data {
        let block = data - 16
        wipe(block, 16 + block.load(as: Int.self))
        free(block)
    }
    if let list = attrList?.pointee, let attrs = list.attr {
        for i in 0..<Int(list.count) { free(attrs[i].data) }
        free(attrs)
    }
    return errSecSuccess
}

// MARK: - Callbacks

public struct SecKeychainEvent: RawRepresentable, Hashable, Sendable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let lockEvent = Self(rawValue: 1), unlockEvent = Self(rawValue: 2), addEvent = Self(rawValue: 3)
    public static let deleteEvent = Self(rawValue: 4), updateEvent = Self(rawValue: 5)
    public static let passwordChangedEvent = Self(rawValue: 6), defaultChangedEvent = Self(rawValue: 9)
    public static let dataAccessEvent = Self(rawValue: 10), keychainListChangedEvent = Self(rawValue: 11)
    public static let trustSettingsChangedEvent = Self(rawValue: 12)
}

public struct SecKeychainEventMask: OptionSet, Sendable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let lockEventMask = Self(rawValue: 1 << 1), unlockEventMask = Self(rawValue: 1 << 2)
    public static let addEventMask = Self(rawValue: 1 << 3), deleteEventMask = Self(rawValue: 1 << 4)
    public static let updateEventMask = Self(rawValue: 1 << 5), passwordChangedEventMask = Self(rawValue: 1 << 6)
    public static let defaultChangedEventMask = Self(rawValue: 1 << 9), dataAccessEventMask = Self(rawValue: 1 << 10)
    public static let keychainListChangedMask = Self(rawValue: 1 << 11)
    public static let trustSettingsChangedEventMask = Self(rawValue: 1 << 12)
    public static let everyEventMask = Self(rawValue: 0xFFFF_FFFF)
}

public struct SecKeychainCallbackInfo {
    public var version: UInt32
    public var item: SecKeychainItem?
    public var keychain: SecKeychain?
    public var pid: pid_t
}

public typealias SecKeychainCallback = @Sendable (
    SecKeychainEvent, UnsafeMutablePointer<SecKeychainCallbackInfo>, UnsafeMutableRawPointer?
) -> OSStatus

/// A callback's identity: its function pointer and context, as registered.
func identity(_ callback: @escaping SecKeychainCallback) -> [UInt8] { withUnsafeBytes(of: callback) { Array($0) } }

/// Registers a callback for keychain events. This process's own events run it on the thread that caused them,
/// right after (there is no run loop to deliver on); other processes' events, when keychaind serves this process,
/// run it on a thread that listens to the daemon (`info.pid` names the process that caused them). In embedded mode
/// only this process's events are seen.
public func SecKeychainAddCallback(_ callbackFunction: @escaping SecKeychainCallback, _ eventMask: SecKeychainEventMask,
                                   _ userContext: UnsafeMutableRawPointer?) -> OSStatus {
    let status = Legacy.callbacks.withLock { list in
        if list.contains(where: { identity($0.function) == identity(callbackFunction) }) {
            return errSecDuplicateCallback
        }
        list.append(Legacy.Registration(function: callbackFunction, mask: eventMask.rawValue, context: userContext))
        return errSecSuccess
    }
    if status == errSecSuccess { Legacy.listenToOtherProcesses(true) }
    return status
}

public func SecKeychainRemoveCallback(_ callbackFunction: @escaping SecKeychainCallback) -> OSStatus {
    let (status, remaining) = Legacy.callbacks.withLock { list in
        let before = list.count
        list.removeAll { identity($0.function) == identity(callbackFunction) }
        return (list.count == before ? errSecInvalidCallback : errSecSuccess, list.count)
    }
    if remaining == 0 { Legacy.listenToOtherProcesses(false) }
    return status
}
