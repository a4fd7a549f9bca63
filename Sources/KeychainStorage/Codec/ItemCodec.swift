import Foundation
import KeychainCore

/// The plaintext of an item's encrypted metadata: its attributes and access control, in a compact binary form.
enum ItemCodec {
    /// 5 adds the access model after the trusted applications (one byte; earlier items live by groups);
    /// 4 adds the trusted applications after the attributes (``ApplicationAccess``; items of earlier versions
    /// trust every program); 3 pads the encoding with zeros to a size bucket (``paddedSize(_:)``), so the
    /// ciphertext no longer tells the attributes' total length; 2 added the bound biometric enrolment after the
    /// access-control flags. 1 to 3 are still read (rows are re-encoded when next written).
    static let version: UInt8 = 5

    /// At least 256 bytes, then the next power of two: the length reveals only which bucket the item is in.
    static func paddedSize(_ length: Int) -> Int {
        length <= 256 ? 256 : 1 << (Int.bitWidth - (length - 1).leadingZeroBitCount)
    }

    static func encode(_ item: Item) -> [UInt8] {
        var out: [UInt8] = [version]
        if let ac = item.accessControl {
            out.append(1)
            appendString(ac.protection.rawValue, to: &out)
            appendInt(Int64(bitPattern: ac.flags.rawValue), to: &out)
            appendBytes(Array(ac.boundEnrolment ?? Data()), to: &out)
        } else {
            out.append(0)
        }
        let entries = item.attributes.sorted { $0.key < $1.key }
        appendInt(Int64(entries.count), to: &out)
        for (code, value) in entries {
            appendString(code, to: &out)
            switch value {
            case .string(let s): out.append(0x73); appendString(s, to: &out)
            case .data(let d): out.append(0x62); appendBytes(Array(d), to: &out)
            case .number(let n): out.append(0x6e); appendInt(n, to: &out)
            case .date(let t): out.append(0x64); appendInt(Int64(bitPattern: t.bitPattern), to: &out)
            }
        }
        switch item.applicationAccess {
        case nil: out.append(0)
        case .anyApplication: out.append(1)
        case .trusted(let list):
            out.append(2)
            appendInt(Int64(list.count), to: &out)
            for application in list {
                appendString(application.path, to: &out)
                appendBytes(Array(application.digest), to: &out)
            }
        }
        out.append(item.accessModel.rawValue)
        out.append(contentsOf: repeatElement(0, count: paddedSize(out.count) - out.count))
        return out
    }

    static func decode(_ bytes: Data, itemClass: ItemClass, uuid: UUID) throws(KeychainError) -> Item {
        var reader = Reader(bytes: [UInt8](bytes))
        guard let v = reader.byte(), (1...version).contains(v), let hasAC = reader.byte() else {
            throw .decode("metadata")
        }
        var accessControl: AccessControl?
        if hasAC == 1 {
            guard let prot = reader.string(), let protection = Accessibility(rawValue: prot), let flags = reader.int()
            else { throw .decode("metadata") }
            accessControl = try AccessControl(protection: protection, flags: .init(rawValue: UInt64(bitPattern: flags)))
            if v >= 2 {
                guard let bound = reader.blob() else { throw .decode("metadata") }
                if !bound.isEmpty { accessControl?.boundEnrolment = Data(bound) }
            }
        }
        guard let count = reader.int(), count >= 0, count < 10_000 else { throw .decode("metadata") }
        var attributes: [String: AttributeValue] = Dictionary(minimumCapacity: Int(count))
        for _ in 0..<count {
            guard let code = reader.string(), let tag = reader.byte() else { throw .decode("metadata") }
            switch tag {
            case 0x73: guard let s = reader.string() else { throw .decode("metadata") }; attributes[code] = .string(s)
            case 0x62: guard let d = reader.blob() else { throw .decode("metadata") }; attributes[code] = .data(Data(d))
            case 0x6e: guard let n = reader.int() else { throw .decode("metadata") }; attributes[code] = .number(n)
            case 0x64:
                guard let n = reader.int() else { throw .decode("metadata") }
                attributes[code] = .date(Double(bitPattern: UInt64(bitPattern: n)))
            default: throw .decode("metadata")
            }
        }
        var applicationAccess: ApplicationAccess?
        if v >= 4 {
            switch reader.byte() {
            case 0: applicationAccess = nil
            case 1: applicationAccess = .anyApplication
            case 2:
                guard let n = reader.int(), n >= 0, n < 1_000 else { throw .decode("metadata") }
                var list: [TrustedApplication] = []
                for _ in 0..<n {
                    guard let path = reader.string(), let digest = reader.blob() else { throw .decode("metadata") }
                    list.append(TrustedApplication(path: path, digest: Data(digest)))
                }
                applicationAccess = .trusted(list)
            default: throw .decode("metadata")
            }
        }
        var accessModel = AccessModel.groups
        if v >= 5 {
            guard let byte = reader.byte(), let model = AccessModel(rawValue: byte) else { throw .decode("metadata") }
            accessModel = model
        }
        // Version 3's padding: zeros only, up to exactly the bucket size.
        if v >= 3 {
            guard reader.bytes.count == paddedSize(reader.offset), reader.bytes[reader.offset...].allSatisfy({ $0 == 0 })
            else { throw .decode("metadata") }
        } else {
            guard reader.atEnd else { throw .decode("metadata") }
        }
        var item = Item(itemClass: itemClass, attributes: attributes, accessControl: accessControl,
                        applicationAccess: applicationAccess, uuid: uuid)
        item.accessModel = accessModel
        return item
    }

    private static func appendInt(_ n: Int64, to out: inout [UInt8]) {
        withUnsafeBytes(of: n.bigEndian) { out.append(contentsOf: $0) }
    }
    private static func appendBytes(_ b: [UInt8], to out: inout [UInt8]) {
        appendInt(Int64(b.count), to: &out)
        out.append(contentsOf: b)
    }
    private static func appendString(_ s: String, to out: inout [UInt8]) { appendBytes(Array(s.utf8), to: &out) }

    struct Reader {
        let bytes: [UInt8]
        var offset = 0
        var atEnd: Bool { offset == bytes.count }
        mutating func byte() -> UInt8? {
            guard offset < bytes.count else { return nil }
            defer { offset += 1 }
            return bytes[offset]
        }
        mutating func int() -> Int64? {
            guard bytes.count - offset >= 8 else { return nil }
            var n: UInt64 = 0
            for b in bytes[offset..<offset + 8] { n = n << 8 | UInt64(b) }
            offset += 8
            return Int64(bitPattern: n)
        }
        mutating func blob() -> [UInt8]? {
            guard let n = int(), n >= 0, n <= Int64(bytes.count - offset) else { return nil }
            defer { offset += Int(n) }
            return Array(bytes[offset..<offset + Int(n)])
        }
        /// Validated in place: decoded, then compared with its bytes. Decoding repairs invalid UTF-8, so the two
        /// differ exactly when the bytes are not UTF-8. (A copy into an array first was half of a find's metadata
        /// decoding; `String(validating:as:)` over a slice ran generic code with type checks at every attribute.)
        mutating func string() -> String? {
            guard let n = int(), n >= 0, n <= Int64(bytes.count - offset) else { return nil }
            defer { offset += Int(n) }
            return bytes.withUnsafeBufferPointer { all in
                let utf8 = UnsafeBufferPointer(rebasing: all[offset..<offset + Int(n)])
                let string = String(decoding: utf8, as: UTF8.self)
                return string.utf8.elementsEqual(utf8) ? string : nil
            }
        }
    }
}

/// Secrets are padded to a multiple of 32 bytes so the ciphertext length tells little about the secret.
enum SecretPadding {
    static func pad(_ secret: SecretBytes) -> [UInt8] {
        let total = ((4 + secret.count + 31) / 32) * 32
        var out = [UInt8](repeating: 0, count: total)
        let n = UInt32(secret.count).bigEndian
        withUnsafeBytes(of: n) { for i in 0..<4 { out[i] = $0[i] } }
        secret.withUnsafeBytes { src in for i in 0..<src.count { out[4 + i] = src[i] } }
        return out
    }

    static func unpad(_ padded: inout Data) throws(KeychainError) -> SecretBytes {
        guard padded.count >= 4 else { throw .decode("secret") }
        let n = padded.prefix(4).reduce(0) { Int($0) << 8 | Int($1) }
        guard n <= padded.count - 4 else { throw .decode("secret") }
        defer { padded.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        return padded.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[4..<4 + n])) }
    }
}
