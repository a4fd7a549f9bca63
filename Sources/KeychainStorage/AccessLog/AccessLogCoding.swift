import Foundation
import KeychainCore

/// A record's bytes inside the log (before sealing): fields in a fixed order, strings length-prefixed.
enum AccessLogCoding {
    static func encode(_ record: AccessLogRecord) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        func u64(_ v: UInt64) { withUnsafeBytes(of: v.bigEndian) { out.append(contentsOf: $0) } }
        func string(_ s: String) {
            var s = s
            s.withUTF8 { utf8 in
                let kept = UnsafeBufferPointer(rebasing: utf8.prefix(4096))
                u64(UInt64(kept.count))
                out.append(contentsOf: kept)
            }
        }
        func optional(_ s: String?) { if let s { out.append(1); string(s) } else { out.append(0) } }
        u64(record.sequence)
        u64(record.time.timeIntervalSince1970.bitPattern)
        string(record.program); string(record.digest)
        u64(UInt64(bitPattern: Int64(record.pid)))
        string(record.frontEnd.rawValue); string(record.keychain)
        string(record.action.rawValue); string(record.outcome.rawValue)
        optional(record.itemClass)
        if let item = record.item { out.append(1); u64(36); appendUUIDString(item, to: &out) } else { out.append(0) }
        optional(record.itemLabel)
        optional(record.status.map { String($0) }); optional(record.question)
        return out
    }

    /// `uuid.uuidString` (upper-case hex, 8-4-4-4-12) written straight into `out`: Foundation formats it through
    /// `printf`, once per record before every answer.
    private static let uuidGroups = [0..<4, 4..<6, 6..<8, 8..<10, 10..<16]

    static func appendUUIDString(_ uuid: UUID, to out: inout [UInt8]) {
        withUnsafeBytes(of: uuid.uuid) { bytes in
            for group in uuidGroups {
                if group.lowerBound > 0 { out.append(UInt8(ascii: "-")) }
                Hex.append(UnsafeRawBufferPointer(rebasing: bytes[group]), uppercase: true, to: &out)
            }
        }
    }

    /// Sets the sequence number of an encoded record (its first field), given only when it is written.
    static func setSequence(_ sequence: UInt64, in bytes: inout [UInt8], at start: Int = 0) {
        precondition(start >= 0 && start + 8 <= bytes.count, "an encoded record starts with its sequence number")
        bytes.withUnsafeMutableBytes { out in
            withUnsafeBytes(of: sequence.bigEndian) { out.baseAddress!.advanced(by: start).copyMemory(from: $0.baseAddress!, byteCount: 8) }
        }
    }

    static func decode(_ bytes: [UInt8]) -> AccessLogRecord? {
        var offset = 0
        func u64() -> UInt64? {
            guard offset + 8 <= bytes.count else { return nil }
            defer { offset += 8 }
            return bytes[offset..<offset + 8].reduce(0) { $0 << 8 | UInt64($1) }
        }
        func string() -> String? {
            guard let n = u64(), n <= 4096, offset + Int(n) <= bytes.count else { return nil }
            defer { offset += Int(n) }
            return String(decoding: bytes[offset..<offset + Int(n)], as: UTF8.self)
        }
        func optional() -> String?? {
            guard offset < bytes.count else { return nil }
            offset += 1
            if bytes[offset - 1] == 0 { return .some(nil) }
            return string().map { .some($0) }
        }
        guard let sequence = u64(), let time = u64(), let program = string(), let digest = string(), let pid = u64(),
              let frontEnd = string().flatMap(AccessLogRecord.FrontEnd.init(rawValue:)), let keychain = string(),
              let action = string().flatMap(AccessLogRecord.Action.init(rawValue:)),
              let outcome = string().flatMap(AccessLogRecord.Outcome.init(rawValue:)),
              let itemClass = optional(), let item = optional(), let label = optional(), let status = optional(),
              let question = optional(), offset == bytes.count, Double(bitPattern: time).isFinite
        else { return nil }
        var record = AccessLogRecord(time: Date(timeIntervalSince1970: Double(bitPattern: time)), keychain: keychain,
                                     action: action, outcome: outcome)
        record.sequence = sequence
        record.program = program
        record.digest = digest
        record.pid = Int32(truncatingIfNeeded: Int64(bitPattern: pid))
        record.frontEnd = frontEnd
        record.itemClass = itemClass
        record.item = item.flatMap(UUID.init(uuidString:))
        record.itemLabel = label
        record.status = status.flatMap { Int32($0) }
        record.question = question
        return record
    }
}
