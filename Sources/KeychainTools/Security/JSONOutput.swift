#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

/// `--json`: an item as one JSON object: keychain path, class, attributes by code (dates in ISO 8601 UTC, data in
/// base64, four-character numbers as numbers), and `password` only when it was asked for (`-g`, `dump -d`).
enum JSONOutput {
    static func item(_ item: Item, keychain: KeychainReference, secret: SecretBytes?) -> String {
        var attributes: [String: JSONValue] = [:]
        for (code, value) in ItemRules.returnedAttributes(of: item) {
            switch value {
            case .string(let s): attributes[code] = .string(s)
            case .data(let d): attributes[code] = .string(String(validating: d, as: UTF8.self) ?? d.base64EncodedString())
            case .number(let n): attributes[code] = .number(n)
            case .date(let t): attributes[code] = .string(Date(timeIntervalSinceReferenceDate: t).formatted(.iso8601))
            }
        }
        var object: [String: JSONValue] = [
            "keychain": .string(keychain.path), "class": .string(item.itemClass.rawValue), "attributes": .object(attributes),
        ]
        if let secret {
            object["password"] = .string(secret.unprotectedString() ?? secret.unprotectedData().base64EncodedString())
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(JSONValue.object(object))) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// What an item's JSON holds: strings, integers and objects.
    enum JSONValue: Encodable {
        case string(String)
        case number(Int64)
        case object([String: JSONValue])

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .string(let s): try container.encode(s)
            case .number(let n): try container.encode(n)
            case .object(let o): try container.encode(o)
            }
        }
    }
}
