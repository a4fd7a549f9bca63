import Crypto
import Foundation

/// A request signed by a device (docs/SYNC-PROTOCOL.md "Signed requests"): the `Authorization` header
/// `KeychainSync device=<hex>, time=<unix seconds>, nonce=<hex>, signature=<base64>`, where the signature is the
/// device's P-256 ECDSA (SHA-256) over ``canonical(method:target:time:nonce:body:)``. The server takes a request
/// once (nonce), within ``SyncLimits/signatureWindow`` of its clock, from a device of the account that is not revoked.
public struct RequestSignature: Sendable, Equatable {
    public static let scheme = "KeychainSync"

    public var device: Data
    public var time: Int64
    public var nonce: Data
    public var signature: Data

    public init(device: Data, time: Int64, nonce: Data, signature: Data) {
        self.device = device
        self.time = time
        self.nonce = nonce
        self.signature = signature
    }

    /// The bytes signed: method, path with query, time, nonce and the body's SHA-256, each on its own line.
    public static func canonical(method: String, target: String, time: Int64, nonce: Data, body: some DataProtocol)
        -> Data
    {
        let digest = SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
        return Data("keychain-sync-request-v1\n\(method)\n\(target)\n\(time)\n\(nonce.hexString)\n\(digest)".utf8)
    }

    /// Signs a request with the device's key.
    public static func sign(method: String, target: String, body: some DataProtocol, device: Data,
                            key: P256.Signing.PrivateKey, now: Date = Date()) throws -> RequestSignature
    {
        let time = Int64(now.timeIntervalSince1970)
        let nonce = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        let message = canonical(method: method, target: target, time: time, nonce: nonce, body: body)
        let signature = try key.signature(for: message).rawRepresentation
        return RequestSignature(device: device, time: time, nonce: nonce, signature: signature)
    }

    /// Checks the signature against the device's public key (x9.63).
    public func isValid(method: String, target: String, body: some DataProtocol, publicKey: Data) -> Bool {
        guard let key = try? P256.Signing.PublicKey(x963Representation: publicKey),
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        else { return false }
        return key.isValidSignature(signature,
                                    for: Self.canonical(method: method, target: target, time: time, nonce: nonce, body: body))
    }

    public var headerValue: String {
        "\(Self.scheme) device=\(device.hexString), time=\(time), nonce=\(nonce.hexString), signature=\(signature.base64EncodedString())"
    }

    /// Parses the header; nil for anything malformed.
    public init?(header: String) {
        guard header.hasPrefix(Self.scheme + " ") else { return nil }
        var fields: [Substring: Substring] = [:]
        for part in header.dropFirst(Self.scheme.count + 1).split(separator: ",") {
            let trimmed = part.drop { $0 == " " }
            guard let eq = trimmed.firstIndex(of: "=") else { return nil }
            fields[trimmed[..<eq]] = trimmed[trimmed.index(after: eq)...]
        }
        guard fields.count == 4,
              let device = fields["device"].flatMap({ Data(hex: $0) }), device.count == SyncLimits.idLength,
              let time = fields["time"].flatMap({ Int64($0) }),
              let nonce = fields["nonce"].flatMap({ Data(hex: $0) }), nonce.count == 16,
              let signature = fields["signature"].flatMap({ Data(base64Encoded: String($0)) }), signature.count == 64
        else { return nil }
        self.init(device: device, time: time, nonce: nonce, signature: signature)
    }
}
