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
        optional(record.itemClass); optional(record.item?.uuidString); optional(record.itemLabel)
        optional(record.status.map { String($0) }); optional(record.question)
        return out
    }

    /// Sets the sequence number of an encoded record (its first field), given only when it is written.
    static func setSequence(_ sequence: UInt64, in bytes: inout [UInt8]) {
        withUnsafeBytes(of: sequence.bigEndian) { bytes.replaceSubrange(0..<8, with: $0) }
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
