#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An opaque handle to one item (`kSecValuePersistentRef`): the class code and the item's UUID (20 bytes), as
/// Apple's current format; Apple's older 12-byte form (class + row id) is accepted on input.
public struct PersistentReference: Sendable, Hashable {
    public let itemClass: ItemClass
    public let identifier: Identifier

    public enum Identifier: Sendable, Hashable {
        case uuid(UUID)
        case rowID(Int64)
    }

    public init(itemClass: ItemClass, uuid: UUID) {
        self.itemClass = itemClass
        self.identifier = .uuid(uuid)
    }

    public init(data: Data) throws(KeychainError) {
        let bytes = [UInt8](data)
        guard bytes.count == 20 || bytes.count == 12,
            let code = String(bytes: bytes[0..<4], encoding: .ascii),
            let cls = ItemClass(rawValue: code), cls != .identity
        else { throw .param("malformed persistent reference") }
        itemClass = cls
        if bytes.count == 20 {
            let u = Array(bytes[4..<20])
            identifier = .uuid(
                UUID(uuid: (u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                            u[14], u[15])))
        } else {
            var row: Int64 = 0
            for b in bytes[4..<12] { row = row << 8 | Int64(b) }
            identifier = .rowID(row)
        }
    }

    public var data: Data {
        var out = Data(itemClass.rawValue.utf8)
        switch identifier {
        case .uuid(let u): withUnsafeBytes(of: u.uuid) { out.append(contentsOf: $0) }
        case .rowID(let r): withUnsafeBytes(of: r.bigEndian) { out.append(contentsOf: $0) }
        }
        return out
    }
}
