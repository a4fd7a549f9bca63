import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage

// Apple's four item calls. They run on the process's default keychain (see KeychainClient.shared()) with the
// application's access groups, and return Apple's status codes.

public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    run { () throws(KeychainError) in
        let client = try KeychainClient.shared()
        let query = try QueryParser.parse(Bridge.entries(attributes), for: .add)
        let found = try client.file.add(query, caller: client.caller)
        if let result, !query.returnTypes.isEmpty {
            let value = Bridge.result(for: found, types: query.returnTypes)
            result.pointee = query.limit.returnsArray ? NSArray(array: value.map { [$0] } ?? []) : value
        }
    }
}

public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    run { () throws(KeychainError) in
        let client = try KeychainClient.shared()
        let parsed = try QueryParser.parse(Bridge.entries(query), for: .search)
        let found = try client.file.search(parsed, caller: client.caller)
        guard let result, !parsed.returnTypes.isEmpty else { return }
        if parsed.limit.returnsArray {
            result.pointee = NSArray(array: found.compactMap { Bridge.result(for: $0, types: parsed.returnTypes) })
        } else {
            result.pointee = found.first.flatMap { Bridge.result(for: $0, types: parsed.returnTypes) }
        }
    }
}

public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    run { () throws(KeychainError) in
        let client = try KeychainClient.shared()
        let parsed = try QueryParser.parse(Bridge.entries(query), for: .update)
        let update = try QueryParser.parseUpdate(Bridge.entries(attributesToUpdate), itemClass: parsed.itemClass)
        try client.file.update(parsed, with: update, caller: client.caller)
    }
}

public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    run { () throws(KeychainError) in
        let client = try KeychainClient.shared()
        try client.file.delete(QueryParser.parse(Bridge.entries(query), for: .delete), caller: client.caller)
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
