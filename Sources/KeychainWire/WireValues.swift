#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

// The domain values as they travel between a client and keychaind.

extension WireWriter {
    public mutating func reference(_ r: KeychainReference) { string(r.path) }

    public mutating func optionalReference(_ r: KeychainReference?) {
        bool(r != nil)
        if let r { reference(r) }
    }

    public mutating func references(_ list: [KeychainReference]) {
        int(Int64(list.count))
        for r in list { reference(r) }
    }

    public mutating func state(_ s: KeychainState) {
        bool(s.exists); bool(s.isLocked); bool(s.hasPassword)
    }

    public mutating func settings(_ s: KeychainSettings) {
        int(Int64(s.lockInterval ?? -1))
        bool(s.lockOnSleep)
    }

    public mutating func attribute(_ value: AttributeValue) {
        switch value {
        case .string(let s): byte(1); string(s)
        case .data(let d): byte(2); blob(d)
        case .number(let n): byte(3); int(n)
        case .date(let t): byte(4); int(Int64(bitPattern: t.bitPattern))
        }
    }

    public mutating func accessControl(_ ac: AccessControl) {
        string(ac.protection.rawValue)
        int(Int64(bitPattern: ac.flags.rawValue))
        blob(Array(ac.boundEnrolment ?? Data()))
    }

    /// A query or attribute dictionary. An authentication context (an object of this process) cannot travel.
    public mutating func dictionary(_ d: [String: QueryValue]) throws(WireError) {
        int(Int64(d.count))
        for (key, value) in d.sorted(by: { $0.key < $1.key }) {
            string(key)
            try queryValue(value)
        }
    }

    public mutating func queryValue(_ value: QueryValue) throws(WireError) {
        switch value {
        case .string(let s): byte(1); string(s)
        case .data(let d): byte(2); blob(d)
        case .secret(let s): byte(3); secret(s)
        case .int(let n): byte(4); int(n)
        case .double(let x): byte(5); int(Int64(bitPattern: x.bitPattern))
        case .bool(let b): byte(6); bool(b)
        case .date(let t): byte(7); int(Int64(bitPattern: t.timeIntervalSinceReferenceDate.bitPattern))
        case .uuid(let u): byte(8); string(u.uuidString)
        case .null: byte(9)
        case .accessControl(let ac): byte(10); accessControl(ac)
        case .array(let values):
            byte(11)
            int(Int64(values.count))
            for v in values { try queryValue(v) }
        case .unsupported(let name): byte(12); string(name)
        case .authenticationContext(let context): byte(13); contextSnapshot(context.snapshot)
        }
    }

    /// A context travels as its id and settings; whether it is authenticated is the daemon's to know.
    public mutating func contextSnapshot(_ c: AuthenticationContext.Snapshot) {
        string(c.id.uuidString)
        optionalSecret(c.applicationPassword)
        bool(c.interactionNotAllowed)
        int(Int64(bitPattern: c.reuseDuration.bitPattern))
        string(c.localizedReason)
        bool(c.invalidated)
    }

    public mutating func item(_ item: Item) {
        string(item.itemClass.rawValue)
        string(item.uuid.uuidString)
        bool(item.accessControl != nil)
        if let ac = item.accessControl { accessControl(ac) }
        attributes(item.attributes)
    }

    public mutating func found(_ f: FoundItem) {
        item(f.item)
        optionalSecret(f.secret)
    }

    public mutating func error(_ e: KeychainError) {
        int(Int64(e.status.rawValue))
        string(e.message)
    }
}

extension WireReader {
    public mutating func reference() throws(WireError) -> KeychainReference {
        let path = try string()
        guard path.hasPrefix("/"), !path.utf8.contains(0) else { throw .malformed("keychain path") }
        return KeychainReference(path: path)
    }

    public mutating func optionalReference() throws(WireError) -> KeychainReference? {
        try bool() ? try reference() : nil
    }

    public mutating func references() throws(WireError) -> [KeychainReference] {
        let n = try elementCount()
        var list: [KeychainReference] = []
        for _ in 0..<n { list.append(try reference()) }
        return list
    }

    public mutating func state() throws(WireError) -> KeychainState {
        KeychainState(exists: try bool(), isLocked: try bool(), hasPassword: try bool())
    }

    public mutating func settings() throws(WireError) -> KeychainSettings {
        let interval = try int()
        guard interval >= -1, interval <= Int64(Int32.max) else { throw .malformed("lock interval") }
        return KeychainSettings(lockInterval: interval < 0 ? nil : Int(interval), lockOnSleep: try bool())
    }

    public mutating func attribute() throws(WireError) -> AttributeValue {
        switch try byte() {
        case 1: return .string(try string())
        case 2: return .data(Data(try blob()))
        case 3: return .number(try int())
        case 4: return .date(Double(bitPattern: UInt64(bitPattern: try int())))
        default: throw .malformed("attribute value")
        }
    }

    public mutating func accessControl() throws(WireError) -> AccessControl {
        guard let protection = Accessibility(rawValue: try string()) else { throw .malformed("accessibility") }
        let flags = AccessControl.Flags(rawValue: UInt64(bitPattern: try int()))
        let bound = try blob()
        do {
            var ac = try AccessControl(protection: protection, flags: flags)
            if !bound.isEmpty { ac.boundEnrolment = Data(bound) }
            return ac
        } catch {
            throw .malformed("access control")
        }
    }

    public mutating func dictionary() throws(WireError) -> [String: QueryValue] {
        let n = try elementCount()
        var out: [String: QueryValue] = [:]
        for _ in 0..<n {
            let key = try string()
            out[key] = try queryValue(depth: 0)
        }
        return out
    }

    public mutating func queryValue(depth: Int) throws(WireError) -> QueryValue {
        guard depth < 8 else { throw .malformed("nesting") }
        switch try byte() {
        case 1: return .string(try string())
        case 2: return .data(Data(try blob()))
        case 3: return .secret(try secret())
        case 4: return .int(try int())
        case 5: return .double(Double(bitPattern: UInt64(bitPattern: try int())))
        case 6: return .bool(try bool())
        case 7: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: UInt64(bitPattern: try int()))))
        case 8:
            guard let u = UUID(uuidString: try string()) else { throw .malformed("UUID") }
            return .uuid(u)
        case 9: return .null
        case 10: return .accessControl(try accessControl())
        case 11:
            let n = try elementCount()
            var values: [QueryValue] = []
            for _ in 0..<n { values.append(try queryValue(depth: depth + 1)) }
            return .array(values)
        case 12: return .unsupported(try string())
        case 13:
            // A stand-in carrying the client's id and settings; keychaind swaps in its own context of that id.
            let snapshot = try contextSnapshot()
            let context = AuthenticationContext(id: snapshot.id)
            context.adopt(snapshot)
            return .authenticationContext(context)
        default: throw .malformed("query value")
        }
    }

    public mutating func contextSnapshot() throws(WireError) -> AuthenticationContext.Snapshot {
        guard let id = UUID(uuidString: try string()) else { throw .malformed("context id") }
        let password = try optionalSecret()
        let interaction = try bool()
        let reuse = Double(bitPattern: UInt64(bitPattern: try int()))
        guard reuse.isFinite else { throw .malformed("reuse duration") }
        return AuthenticationContext.Snapshot(
            id: id, applicationPassword: password, interactionNotAllowed: interaction, reuseDuration: reuse,
            localizedReason: try string(), invalidated: try bool())
    }

    public mutating func item() throws(WireError) -> Item {
        guard let itemClass = ItemClass(rawValue: try string()) else { throw .malformed("item class") }
        guard let uuid = UUID(uuidString: try string()) else { throw .malformed("UUID") }
        let accessControl = try bool() ? try self.accessControl() : nil
        return Item(itemClass: itemClass, attributes: try attributes(), accessControl: accessControl, uuid: uuid)
    }

    public mutating func found() throws(WireError) -> FoundItem {
        FoundItem(item: try item(), secret: try optionalSecret())
    }

    public mutating func error() throws(WireError) -> KeychainError {
        let raw = try int()
        guard let status = Int32(exactly: raw) else { throw .malformed("status") }
        return KeychainError(status: KeychainStatus(status), message: try string(), location: "keychaind")
    }
}

extension WireWriter {
    public mutating func keyUse(_ use: KeyUse) {
        byte(use.operation.rawValue)
        string(use.algorithm)
        secret(use.input)
        bool(use.peerPublicKey != nil)
        if let peer = use.peerPublicKey { blob(peer) }
        bool(use.requestedSize != nil)
        if let size = use.requestedSize { int(Int64(size)) }
        bool(use.sharedInfo != nil)
        if let info = use.sharedInfo { blob(info) }
    }
}

extension WireReader {
    public mutating func keyUse() throws(WireError) -> KeyUse {
        guard let operation = KeyUse.Operation(rawValue: try byte()) else { throw .malformed("key operation") }
        let algorithm = try string()
        let input = try secret()
        let peer: Data? = try bool() ? Data(try blob()) : nil
        var size: Int?
        if try bool() {
            guard let n = Int(exactly: try int()), n >= 0 else { throw .malformed("requested size") }
            size = n
        }
        let info: Data? = try bool() ? Data(try blob()) : nil
        return KeyUse(operation, algorithm: algorithm, input: input, peerPublicKey: peer, requestedSize: size, sharedInfo: info)
    }
}

extension WireWriter {
    public mutating func optionalBlob(_ data: Data?) {
        bool(data != nil)
        if let data { blob(data) }
    }
}

extension WireReader {
    public mutating func optionalBlob() throws(WireError) -> Data? { try bool() ? Data(try blob()) : nil }
}

// MARK: - Typed item requests (parsed in the client; held to the parser's shape by the service, `checked()`)

extension WireWriter {
    public mutating func itemQuery(_ q: ItemQuery) {
        string(q.operation.rawValue)
        string(q.itemClass.rawValue)
        attributes(q.attributes)
        optionalString(q.accessGroup)
        optionalString(q.accessibility?.rawValue)
        bool(q.accessControl != nil)
        if let ac = q.accessControl { accessControl(ac) }
        let sync: UInt8 = switch q.sync { case .nonSynchronizable: 0; case .synchronizable: 1; case .any: 2 }
        byte(sync)
        optionalSecret(q.valueData)
        bool(q.persistentReference != nil)
        if let reference = q.persistentReference { blob(reference.data) }
        bool(q.itemList != nil)
        if let list = q.itemList {
            int(Int64(list.count))
            for reference in list { blob(reference.data) }
        }
        int(Int64(q.limit.count ?? -1))
        bool(q.limit.returnsArray)
        byte(q.returnTypes.rawValue)
        string(q.authenticationUI.rawValue)
        optionalString(q.operationPrompt)
        switch q.applicationAccess {
        case nil: byte(0)
        case .anyApplication: byte(1)
        case .applications(let paths):
            byte(2)
            int(Int64(paths.count))
            for path in paths { string(path) }
        }
        bool(q.authenticationContext != nil)
        if let context = q.authenticationContext { contextSnapshot(context.snapshot) }
        bool(q.dataProtectionKeychain)
    }

    public mutating func itemUpdate(_ u: ItemUpdate) {
        attributes(u.attributes)
        optionalString(u.accessGroup)
        optionalString(u.accessibility?.rawValue)
        bool(u.accessControl != nil)
        if let ac = u.accessControl { accessControl(ac) }
        let synchronizable: UInt8 = switch u.synchronizable { case nil: 0; case false?: 1; case true?: 2 }
        byte(synchronizable)
        optionalSecret(u.valueData)
    }

    mutating func attributes(_ attributes: [String: AttributeValue]) {
        int(Int64(attributes.count))
        for (code, value) in attributes.sorted(by: { $0.key < $1.key }) {
            string(code)
            attribute(value)
        }
    }
}

extension WireReader {
    public mutating func itemQuery() throws(WireError) -> ItemQuery {
        guard let operation = KeychainCore.Operation(rawValue: try string()) else { throw .malformed("operation") }
        guard let itemClass = ItemClass(rawValue: try string()) else { throw .malformed("item class") }
        var q = ItemQuery(operation: operation, itemClass: itemClass)
        q.attributes = try attributes()
        q.accessGroup = try optionalString()
        q.accessibility = try optionalAccessibility()
        q.accessControl = try bool() ? try accessControl() : nil
        switch try byte() {
        case 0: q.sync = .nonSynchronizable
        case 1: q.sync = .synchronizable
        case 2: q.sync = .any
        default: throw .malformed("synchronizable")
        }
        q.valueData = try optionalSecret()
        q.persistentReference = try bool() ? try persistentReference() : nil
        if try bool() {
            let n = try elementCount()
            var list: [PersistentReference] = []
            for _ in 0..<n { list.append(try persistentReference()) }
            q.itemList = list
        }
        let count = try int()
        guard count >= -1, let limit = Int(exactly: count) else { throw .malformed("match limit") }
        q.limit = MatchLimit(count: limit < 0 ? nil : limit, returnsArray: try bool())
        q.returnTypes = ReturnTypes(rawValue: try byte())
        guard let ui = AuthenticationUI(rawValue: try string()) else { throw .malformed("authentication UI") }
        q.authenticationUI = ui
        q.operationPrompt = try optionalString()
        switch try byte() {
        case 0: q.applicationAccess = nil
        case 1: q.applicationAccess = .anyApplication
        case 2:
            let n = try elementCount()
            var paths: [String] = []
            for _ in 0..<n { paths.append(try string()) }
            q.applicationAccess = .applications(paths)
        default: throw .malformed("application access")
        }
        if try bool() {
            // A stand-in carrying the client's id and settings; keychaind swaps in its own context of that id.
            let snapshot = try contextSnapshot()
            let context = AuthenticationContext(id: snapshot.id)
            context.adopt(snapshot)
            q.authenticationContext = context
        }
        q.dataProtectionKeychain = try bool()
        return q
    }

    public mutating func itemUpdate() throws(WireError) -> ItemUpdate {
        var u = ItemUpdate()
        u.attributes = try attributes()
        u.accessGroup = try optionalString()
        u.accessibility = try optionalAccessibility()
        u.accessControl = try bool() ? try accessControl() : nil
        switch try byte() {
        case 0: u.synchronizable = nil
        case 1: u.synchronizable = false
        case 2: u.synchronizable = true
        default: throw .malformed("synchronizable")
        }
        u.valueData = try optionalSecret()
        return u
    }

    mutating func attributes() throws(WireError) -> [String: AttributeValue] {
        let n = try elementCount()
        var attributes: [String: AttributeValue] = [:]
        for _ in 0..<n {
            let code = try string()
            attributes[code] = try attribute()
        }
        return attributes
    }

    mutating func optionalAccessibility() throws(WireError) -> Accessibility? {
        guard let raw = try optionalString() else { return nil }
        guard let accessibility = Accessibility(rawValue: raw) else { throw .malformed("accessibility") }
        return accessibility
    }

    mutating func persistentReference() throws(WireError) -> PersistentReference {
        let bytes = try blob()
        do {
            return try PersistentReference(data: Data(bytes))
        } catch {
            throw .malformed("persistent reference")
        }
    }
}
