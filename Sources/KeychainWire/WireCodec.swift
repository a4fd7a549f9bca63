#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

/// The daemon protocol's value encoding: type-tagged, big-endian, length-prefixed. Every length is checked against
/// what is left of the frame, so a hostile frame gives ``WireError`` and never a crash or an allocation past the
/// frame's own size.
public struct WireWriter: ~Copyable {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public mutating func byte(_ b: UInt8) { bytes.append(b) }
    public mutating func bool(_ b: Bool) { bytes.append(b ? 1 : 0) }

    public mutating func int(_ n: Int64) {
        withUnsafeBytes(of: n.bigEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func blob(_ b: some Collection<UInt8>) {
        int(Int64(b.count))
        bytes.append(contentsOf: b)
    }

    public mutating func string(_ s: String) { blob(Array(s.utf8)) }

    /// A time as whole milliseconds since 1970, within ±``WireTime/limit`` (so it survives Double exactly: a decoded
    /// time encodes to the same bytes again). Out of range or not a number is clamped, never a trap.
    public mutating func milliseconds(_ secondsSince1970: Double) {
        int(Int64(WireTime.clamped(secondsSince1970 * 1000).rounded()))
    }

    /// A time as whole seconds since 1970 (certificate validity), within ±``WireTime/limit``.
    public mutating func seconds(_ secondsSince1970: Double) {
        int(Int64(WireTime.clamped(secondsSince1970).rounded(.towardZero)))
    }

    public mutating func optionalString(_ s: String?) {
        bool(s != nil)
        if let s { string(s) }
    }

    /// A secret: copied into the frame (which the connection wipes after sending).
    public mutating func secret(_ s: SecretBytes) {
        int(Int64(s.count))
        s.withUnsafeBytes { bytes.append(contentsOf: $0) }
    }

    public mutating func optionalSecret(_ s: SecretBytes?) {
        bool(s != nil)
        if let s { secret(s) }
    }

    /// Wipes the encoded bytes (they may hold secrets).
    public mutating func wipe() {
        bytes.withUnsafeMutableBytes { if let b = $0.baseAddress { KeychainCore.wipe(b, $0.count) } }
        bytes.removeAll()
    }

    public consuming func finish() -> [UInt8] { bytes }
}

public struct WireReader {
    private let bytes: [UInt8]
    private var offset = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var atEnd: Bool { offset == bytes.count }

    public mutating func byte() throws(WireError) -> UInt8 {
        guard offset < bytes.count else { throw .truncated }
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func bool() throws(WireError) -> Bool {
        switch try byte() {
        case 0: return false
        case 1: return true
        default: throw .malformed("boolean")
        }
    }

    public mutating func int() throws(WireError) -> Int64 {
        guard bytes.count - offset >= 8 else { throw .truncated }
        var n: UInt64 = 0
        for b in bytes[offset..<offset + 8] { n = n << 8 | UInt64(b) }
        offset += 8
        return Int64(bitPattern: n)
    }

    public mutating func count() throws(WireError) -> Int {
        let n = try int()
        guard n >= 0, n <= Int64(bytes.count - offset) else { throw .malformed("length") }
        return Int(n)
    }

    public mutating func blob() throws(WireError) -> [UInt8] {
        let n = try count()
        defer { offset += n }
        return Array(bytes[offset..<offset + n])
    }

    public mutating func string() throws(WireError) -> String {
        guard let s = String(validating: try blob(), as: UTF8.self) else { throw .malformed("string") }
        return s
    }

    public mutating func optionalString() throws(WireError) -> String? { try bool() ? try string() : nil }

    /// A time written by ``WireWriter/milliseconds(_:)``, in seconds since 1970.
    public mutating func milliseconds() throws(WireError) -> Double { Double(try WireTime.checked(try int())) / 1000 }

    /// A time written by ``WireWriter/seconds(_:)``, in seconds since 1970.
    public mutating func seconds() throws(WireError) -> Double { Double(try WireTime.checked(try int())) }

    public mutating func secret() throws(WireError) -> SecretBytes {
        let n = try count()
        defer { offset += n }
        return bytes.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[offset..<offset + n])) }
    }

    public mutating func optionalSecret() throws(WireError) -> SecretBytes? { try bool() ? try secret() : nil }

    /// An element count for a list, bounded by the bytes left (each element takes at least one byte).
    public mutating func elementCount() throws(WireError) -> Int { try count() }
}

/// The range of times on the wire: ±10¹⁵ units (milliseconds: ±31,000 years), well inside the 2⁵³ that a Double
/// holds exactly, so a time read from a frame writes back to the same integer.
enum WireTime {
    static let limit: Int64 = 1_000_000_000_000_000

    static func clamped(_ value: Double) -> Double {
        value.isNaN ? 0 : min(max(value, -Double(limit)), Double(limit))
    }

    static func checked(_ n: Int64) throws(WireError) -> Int64 {
        guard n >= -limit, n <= limit else { throw .malformed("time") }
        return n
    }
}

/// A frame or value the protocol cannot accept.
public enum WireError: Error, Equatable, Sendable {
    case truncated
    case malformed(String)
    case tooLarge(Int)
    case unsupported(String)
    case versionMismatch(client: Int, daemon: Int)

    public var message: String {
        switch self {
        case .truncated: "the message ended early"
        case .malformed(let what): "a malformed \(what) in the message"
        case .tooLarge(let size): "a message of \(size) bytes is larger than the protocol allows"
        case .unsupported(let what): "\(what) cannot cross to the keychain daemon"
        case .versionMismatch(let client, let daemon) where client < daemon:
            // keychaind was upgraded and restarted; the client still runs the code from before.
            "this program speaks keychain protocol \(client), the running keychaind speaks \(daemon); this program is "
                + "older than keychaind: start it again (or rebuild it) from the installed version"
        case .versionMismatch(let client, let daemon):
            "this program speaks keychain protocol \(client), the running keychaind speaks \(daemon); restart keychaind"
        }
    }
}
