import Foundation
import KeychainCore
import Testing

@Suite("Query parsing follows Apple's rules (semantics §3.1)")
struct QueryParserTests {
    func status(_ body: () throws -> Void) -> Int32 {
        do { try body(); return 0 } catch { return (error as? KeychainError)?.status.rawValue ?? 1 }
    }

    @Test("a query without a class is errSecParam; an unknown class is errSecNoSuchClass")
    func classRules() {
        #expect(status { _ = try QueryParser.parse(["acct": "a"], for: .search) } == -50)
        #expect(status { _ = try QueryParser.parse(["class": "bogus"], for: .search) } == -25306)
        #expect(status { _ = try QueryParser.parse(["class": "apls"], for: .add) } == -25306)
        #expect(status { _ = try QueryParser.parse(["class": 5], for: .search) } == -50)
    }

    @Test("a four-letter key that is not an attribute of the class is errSecNoSuchAttr")
    func noSuchAttr() {
        #expect(status { _ = try QueryParser.parse(["class": "genp", "srvr": "x"], for: .search) } == -25303)
        #expect(status { _ = try QueryParser.parse(["class": "inet", "svce": "x"], for: .add) } == -25303)
        #expect(status { _ = try QueryParser.parse(["class": "genp", "nleg": true], for: .search) } == 0)
    }

    @Test("unknown keys, clip and null values are errSecParam")
    func unknownKeys() {
        for key in ["clip", "bogus_key", "r_Bogus", "u_Bogus", "v_Bogus", "cls"] {
            #expect(status { _ = try QueryParser.parse(["class": "genp", key: true], for: .search) } == -50, "\(key)")
        }
        #expect(status { _ = try QueryParser.parse(["class": "genp", "acct": .null], for: .search) } == -50)
        #expect(status { _ = try QueryParser.parse(["class": "genp", "r_Data": "yes"], for: .search) } == -50)
    }

    @Test("kSecMatch keys: ignored by search when unknown, rejected by add, stripped by update and delete (macOS)")
    func matchKeys() {
        #expect(status { _ = try QueryParser.parse(["class": "genp", "m_CaseInsensitive": true], for: .search) } == 0)
        for operation in [Operation.update, .delete] {
            for limit: QueryValue in ["m_LimitAll", "m_LimitOne", .int(3)] {
                let parsed = try? QueryParser.parse(["class": "genp", "m_Limit": limit], for: operation)
                #expect(parsed?.limit == .all)
            }
        }
        #expect(status { _ = try QueryParser.parse(["class": "genp", "m_Limit": "m_LimitOne"], for: .add) } == -50)
        #expect(status { _ = try QueryParser.parse(["class": "genp", "m_Policy": "x"], for: .search) } == -4)
        #expect(status { _ = try QueryParser.parse(["class": "genp", "m_HostOrSubdomainOfHost": "x"], for: .search) } == -4)
        #expect(status { _ = try QueryParser.parse(["class": "inet", "m_HostOrSubdomainOfHost": "x"], for: .search) } == 0)
    }

    @Test("return keys: ignored by update and delete (macOS strips them; iOS answers -50)")
    func returnKeys() throws {
        let update = try QueryParser.parse(["class": "genp", "r_Data": true, "r_Attributes": true], for: .update)
        #expect(update.returnTypes.isEmpty)
        let delete = try QueryParser.parse(["class": "genp", "r_Ref": true], for: .delete)
        #expect(delete.returnTypes.isEmpty)
    }

    @Test("kSecUseAuthenticationUISkip is only for search")
    func authUISkip() {
        for op in [Operation.add, .update, .delete] {
            #expect(status { _ = try QueryParser.parse(["class": "genp", "u_AuthUI": "u_AuthUIS"], for: op) } == -50)
        }
        #expect(status { _ = try QueryParser.parse(["class": "genp", "u_AuthUI": "u_AuthUIS"], for: .search) } == 0)
        #expect(status { _ = try QueryParser.parse(["class": "genp", "u_ItemList": .array([])], for: .search) } == -50)
    }

    @Test("match limits map to Apple's containers", arguments: [
        (QueryValue.string("m_LimitOne"), 1 as Int?, false),
        (.string("m_LimitAll"), nil, true),
        (.int(1), 1, false),
        (.int(2), 2, true),
        (.int(0), 0, true),
        (.int(-1), nil, true),
        (.int(-5), 1, true),
    ])
    func matchLimits(value: QueryValue, count: Int?, array: Bool) throws {
        let q = try QueryParser.parse(["class": "genp", "m_Limit": value], for: .search)
        #expect(q.limit.count == count)
        #expect(q.limit.returnsArray == array)
    }

    @Test("default limits: search one, update and delete all")
    func defaultLimits() throws {
        #expect(try QueryParser.parse(["class": "genp"], for: .search).limit == .one)
        #expect(try QueryParser.parse(["class": "genp"], for: .update).limit == .all)
        #expect(try QueryParser.parse(["class": "genp"], for: .delete).limit == .all)
        #expect(status { _ = try QueryParser.parse(["class": "genp", "m_Limit": "lots"], for: .search) } == -50)
    }

    @Test("accessible with access control is errSecParam; access control with sync on add too")
    func accessControlConflicts() throws {
        let ac = try AccessControl(protection: .whenUnlocked, flags: [])
        #expect(status { _ = try QueryParser.parse(["class": "genp", "pdmn": "ak", "accc": .accessControl(ac)], for: .add) } == -50)
        #expect(status { _ = try QueryParser.parse(["class": "genp", "accc": .accessControl(ac), "sync": true], for: .add) } == -50)
        #expect(status { _ = try QueryParser.parse(["class": "genp", "accc": "ak"], for: .add) } == -50)
        #expect(status { _ = try QueryParser.parse(["class": "genp", "pdmn": "zz"], for: .add) } == -50)
    }

    @Test("persistent reference with other attributes is errSecParam")
    func persistentRef() throws {
        let ref = PersistentReference(itemClass: .genericPassword, uuid: UUID())
        #expect(status { _ = try QueryParser.parse(["v_PersistentRef": .data(ref.data), "acct": "a"], for: .search) } == -50)
        let q = try QueryParser.parse(["v_PersistentRef": .data(ref.data)], for: .search)
        #expect(q.itemClass == .genericPassword)
        #expect(q.sync == .any)
        #expect(try PersistentReference(data: ref.data) == ref)
        #expect(status { _ = try PersistentReference(data: Data([1, 2, 3])) } == -50)
    }

    @Test("attributesToUpdate takes only attributes and kSecValueData")
    func updateAttributes() throws {
        #expect(status { _ = try QueryParser.parseUpdate(["class": "genp"], itemClass: .genericPassword) } == -25303)
        #expect(status { _ = try QueryParser.parseUpdate(["r_Data": true], itemClass: .genericPassword) } == -25303)
        #expect(status { _ = try QueryParser.parseUpdate(["m_Limit": "m_LimitAll"], itemClass: .genericPassword) } == -25303)
        #expect(status { _ = try QueryParser.parseUpdate(["ggrp": "x"], itemClass: .genericPassword) } == -50)
        let u = try QueryParser.parseUpdate(["musr": .null, "acct": "b", "v_Data": .data(Data("q".utf8))], itemClass: .genericPassword)
        #expect(u.attributes["musr"] == nil)
        #expect(u.attributes["acct"] == .string("b"))
        #expect(u.valueData == SecretBytes(utf8: "q"))
    }
}

@Suite("Input coercion (semantics §1.2)")
struct CoercionTests {
    @Test("numeric strings become numbers, other strings stay strings")
    func numbers() throws {
        let q = try QueryParser.parse(["class": "keys", "type": "42", "kcls": "1"], for: .add)
        #expect(q.attributes["type"] == .number(42))
        #expect(q.attributes["kcls"] == .number(1))
        let inet = try QueryParser.parse(["class": "inet", "ptcl": "htps", "port": 443], for: .add)
        #expect(inet.attributes["ptcl"] == .string("htps"))
        #expect(inet.attributes["port"] == .number(443))
        let b = try QueryParser.parse(["class": "genp", "invi": true], for: .add)
        #expect(b.attributes["invi"] == .number(1))
    }

    @Test("blobs keep the caller's type but compare by bytes")
    func blobs() throws {
        let q = try QueryParser.parse(["class": "genp", "svce": .data(Data("s".utf8))], for: .add)
        #expect(q.attributes["svce"] == .data(Data("s".utf8)))
        #expect(AttributeValue.string("s").matchKey(for: .blob) == AttributeValue.data(Data("s".utf8)).matchKey(for: .blob))
        #expect(AttributeValue.string("s").matchKey(for: .blob) != AttributeValue.string("S").matchKey(for: .blob))
    }

    @Test("dates accept only dates")
    func dates() {
        #expect(throws: KeychainError(.param)) {
            _ = try QueryParser.parse(["class": "genp", "cdat": "yesterday"], for: .add)
        }
    }
}

@Suite("SecAccessControlCreateWithFlags rules (semantics §5.1)")
struct AccessControlTests {
    typealias F = AccessControl.Flags
    @Test("rejected combinations", arguments: [
        [F.or, .and], [.biometryAny, .biometryCurrentSet], [.userPresence, .or], [.userPresence, .devicePasscode],
        [.userPresence, .biometryAny, .and],
    ] as [F])
    func rejected(flags: F) {
        #expect(throws: KeychainError(.param)) { _ = try AccessControl(protection: .whenUnlocked, flags: flags) }
    }

    @Test("accepted combinations", arguments: [
        [], [.biometryAny, .devicePasscode, .or], [.biometryAny, .devicePasscode, .and],
        [.biometryAny, .devicePasscode, .and, .applicationPassword], [.applicationPassword],
        [.userPresence, .applicationPassword, .privateKeyUsage], [.privateKeyUsage], [.biometryCurrentSet],
        [.userPresence],
    ] as [F])
    func accepted(flags: F) throws {
        _ = try AccessControl(protection: .afterFirstUnlock, flags: flags)
    }
}

@Suite("Status codes")
struct StatusTests {
    @Test("messages and exit codes are Apple's")
    func messages() {
        #expect(KeychainStatus.itemNotFound.message == "The specified item could not be found in the keychain.")
        #expect(KeychainStatus.duplicateItem.message == "The specified item already exists in the keychain.")
        #expect(KeychainStatus.param.message == "One or more parameters passed to a function were not valid.")
        #expect(KeychainStatus.itemNotFound.exitCode == 44)
        #expect(KeychainStatus.duplicateItem.exitCode == 45)
        #expect(KeychainStatus.authFailed.exitCode == 51)
        #expect(KeychainStatus.missingEntitlement.exitCode == 30)
        #expect(KeychainStatus(-99999).message == "OSStatus -99999")
        #expect(KeychainError(.itemNotFound) == KeychainError.itemNotFound())
    }

    @Test("descriptions redact secrets and attribute values")
    func redaction() {
        let secret = SecretBytes(utf8: "hunter2")
        #expect(!"\(secret)".contains("hunter2"))
        #expect(!"\(AttributeValue.string("alice"))".contains("alice"))
        #expect(SecretBytes(utf8: "a") != SecretBytes(utf8: "b"))
    }
}

@Suite("The ACL map built from flags (semantics §5.2)")
struct ACLMapTests {
    @Test("constraints guard decrypt and ACL changes; encrypt and delete are allowed; PrivateKeyUsage moves them to sign")
    func map() throws {
        let up = try AccessControl(protection: .whenUnlocked, flags: [.userPresence])
        #expect(up.constraint(for: .decrypt) == .requires([.userPresence], anyOf: false))
        #expect(up.constraint(for: .changeACL) == .requires([.userPresence], anyOf: false))
        #expect(up.constraint(for: .encrypt) == .allowed)
        #expect(up.constraint(for: .delete) == .allowed)
        let or = try AccessControl(protection: .whenUnlocked, flags: [.biometryAny, .devicePasscode, .or])
        #expect(or.constraint(for: .decrypt) == .requires([.biometryAny, .devicePasscode], anyOf: true))
        let key = try AccessControl(protection: .whenUnlocked, flags: [.userPresence, .privateKeyUsage])
        #expect(key.constraint(for: .decrypt) == .allowed)
        #expect(key.constraint(for: .sign) == .requires([.userPresence], anyOf: false))
        let none = try AccessControl(protection: .whenUnlocked, flags: [.applicationPassword])
        for operation in AccessControl.Operation.allCases { #expect(none.constraint(for: operation) == .allowed) }
    }
}
