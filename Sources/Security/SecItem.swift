import Foundation
import KeychainCertificates
import KeychainClient
import KeychainCore
import KeychainKeys

// Apple's four item calls. They run on the process's default keychain through its keychain service (see
// KeychainClient.shared()), with the application's access groups, and return Apple's status codes.

public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    run { () throws(KeychainError) in
        // kSecValueRef with an identity: its certificate and private key, stored as two items (Apple's kSecClassIdentity
        // add); errSecDuplicateItem when the certificate is already there.
        if let identity = (attributes as NSDictionary)[kSecValueRef as String] as? SecIdentity {
            return try Identities.add(identity, attributes: attributes)
        }
        var entries = try Bridge.entries(attributes)
        // kSecValueRef with a key: the key's item, with the attributes Apple derives from it.
        if let key = (attributes as NSDictionary)[kSecValueRef as String] as? SecKey {
            guard let material = key.key else { throw .duplicateItem() }  // a stored key is in the keychain already
            entries.removeValue(forKey: kSecValueRef as String)
            entries = material.itemAttributes(entries)
        }
        // kSecValueRef with a certificate: its item, with the attributes Apple derives from the DER.
        if let certificate = (attributes as NSDictionary)[kSecValueRef as String] as? SecCertificate {
            entries.removeValue(forKey: kSecValueRef as String)
            entries = certificate.certificate.itemAttributes(entries)
        }
        let query = try QueryParser.parse(entries, for: .add)  // once: the request, and the result's shape
        let found = try KeychainClient.shared().add(query)
        if let result, !query.returnTypes.isEmpty {
            let value = Bridge.result(for: found, types: query.returnTypes)
            result.pointee = query.limit.returnsArray ? NSArray(array: value.map { [$0] } ?? []) : value
        }
    }
}

public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    run { () throws(KeychainError) in
        let entries = try Bridge.entries(query)
        var parsed = try QueryParser.parse(entries, for: .search)  // once: the request, and the result's shape
        if entries["class"] == .string("idnt") {
            let value = try Identities.copyMatching(entries, parsed)
            if let result, !parsed.returnTypes.isEmpty { result.pointee = value }
            return
        }
        let shape = parsed.returnTypes
        // kSecReturnRef on keys: SecKey objects, made from each item's persistent reference.
        let keyReferences = shape.contains(.ref) && parsed.itemClass == .key
        if keyReferences { parsed.returnTypes.insert(.persistentRef) }
        // kSecReturnRef on certificates: SecCertificate objects, made from each item's DER.
        let certificateReferences = shape.contains(.ref) && parsed.itemClass == .certificate
        if certificateReferences { parsed.returnTypes.insert(.data) }
        let found = try KeychainClient.shared().search(parsed)
        guard let result, !shape.isEmpty else { return }
        func reference(for item: FoundItem) throws(KeychainError) -> AnyObject? {
            if keyReferences { return try StoredKeys.reference(for: item) }
            if certificateReferences, let der = item.secret?.unprotectedData() {
                return SecCertificateCreateWithData(nil, der as NSData)
            }
            return nil
        }
        func value(_ item: FoundItem) throws(KeychainError) -> AnyObject? {
            let shaped = Bridge.result(for: item, types: shape)
            guard let key = try reference(for: item) else { return shaped }
            guard shape.wantsDictionary, let dictionary = shaped as? NSDictionary else { return key }
            return Bridge.dictionary(dictionary, adding: [kSecValueRef as String: key])
        }
        if parsed.limit.returnsArray {
            var values: [AnyObject] = []
            for item in found { if let shaped = try value(item) { values.append(shaped) } }
            result.pointee = NSArray(array: values)
        } else {
            result.pointee = try found.first.flatMap { item throws(KeychainError) in try value(item) }
        }
    }
}

public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    run { () throws(KeychainError) in
        let parsed = try QueryParser.parse(Bridge.entries(query), for: .update)
        let changes = try QueryParser.parseUpdate(Bridge.entries(attributesToUpdate), itemClass: parsed.itemClass)
        try KeychainClient.shared().update(parsed, with: changes)
    }
}

public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    run { () throws(KeychainError) in
        let entries = try Bridge.entries(query)
        if entries["class"] == .string("idnt") { return try Identities.delete(entries) }
        try KeychainClient.shared().delete(QueryParser.parse(entries, for: .delete))
    }
}

/// Runs one call and turns its outcome into an OSStatus.
func run(_ body: () throws(KeychainError) -> Void) -> OSStatus {
    do {
        try body()
        return errSecSuccess
    } catch {
        return error.status.rawValue
    }
}
