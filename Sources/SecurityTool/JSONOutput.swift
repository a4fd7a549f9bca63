import Foundation
import KeychainCore

/// `--json`: an item as one JSON object: keychain path, class, attributes by code (dates in ISO 8601 UTC, data in
/// base64, four-character numbers as numbers), and `password` only when it was asked for (`-g`, `dump -d`).
enum JSONOutput {
    static func item(_ item: Item, keychain: KeychainReference, secret: SecretBytes?) -> String {
        var attributes: [String: Any] = [:]
        let formatter = ISO8601DateFormatter()
        for (code, value) in ItemRules.returnedAttributes(of: item) {
            switch value {
            case .string(let s): attributes[code] = s
            case .data(let d): attributes[code] = String(validating: d, as: UTF8.self) ?? d.base64EncodedString()
            case .number(let n): attributes[code] = n
            case .date(let t): attributes[code] = formatter.string(from: Date(timeIntervalSinceReferenceDate: t))
            }
        }
        var object: [String: Any] = ["keychain": keychain.path, "class": item.itemClass.rawValue, "attributes": attributes]
        if let secret {
            object["password"] = secret.unprotectedString() ?? secret.unprotectedData().base64EncodedString()
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
