import Foundation
import KeychainClient
import KeychainCore

// Apple's four item calls. They run on the process's default keychain through its keychain service (see
// KeychainClient.shared()), with the application's access groups, and return Apple's status codes.

public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    run { () throws(KeychainError) in
        let entries = try Bridge.entries(attributes)
        let query = try QueryParser.parse(entries, for: .add)  // for the result's shape
        let found = try KeychainClient.shared().add(entries)
        if let result, !query.returnTypes.isEmpty {
            let value = Bridge.result(for: found, types: query.returnTypes)
            result.pointee = query.limit.returnsArray ? NSArray(array: value.map { [$0] } ?? []) : value
        }
    }
}

public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    run { () throws(KeychainError) in
        let entries = try Bridge.entries(query)
        let parsed = try QueryParser.parse(entries, for: .search)  // for the result's shape
        let found = try KeychainClient.shared().search(entries)
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
        try KeychainClient.shared().update(Bridge.entries(query), with: Bridge.entries(attributesToUpdate))
    }
}

public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    run { () throws(KeychainError) in
        try KeychainClient.shared().delete(Bridge.entries(query))
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
