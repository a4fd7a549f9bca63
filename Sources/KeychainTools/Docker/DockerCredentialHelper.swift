#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore
import KeychainInterface

#if canImport(Glibc)
import Glibc
#endif

// docker-credential-keychain: docker's credential helper protocol (store / get / erase / list / version), storing
// internet-password items the way docker-credential-osxkeychain does (label "Docker Credentials").
//   ~/.docker/config.json: { "credsStore": "keychain" }

public enum DockerCredentialHelper {
    /// Runs `docker-credential-keychain store|get|erase|list|version` and exits. `client` is made first, before
    /// standard input is read (the tool may yet become its engine-linked twin, see EmbeddedTwin). docker's helper
    /// sees every group of the keychain (as docker-credential-osxkeychain sees the file keychain); what it adds lands
    /// in its own group.
    public static func main(arguments: [String], client makeClient: () throws(KeychainError) -> KeychainClient) -> Never {
        switch arguments.first {
        case "version", "--version":
            StandardStreams.write(Array(BuildInfo.versionLine(for: "docker-credential-keychain").utf8), to: 1)
            exit(0)
        case "--help", "-h":
            StandardStreams.write(Array("Usage: docker-credential-keychain <store|get|erase|list|version>\n".utf8), to: 1)
            exit(0)
        default: break
        }
        CredentialHelperProcess.run(client: makeClient, { client throws(KeychainError) in
            try run(arguments.first ?? "", client: client)
        }, fail: fail)
    }

    static let label = "Docker Credentials"
    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        return e
    }()

    struct Credentials: Codable {
        var ServerURL: String
        var Username: String
        var Secret: String
    }

    /// Errors go to standard output, with exit status 1, as docker's helpers do (docker reads the text).
    static func fail(_ message: String) -> Never {
        StandardStreams.write(Array((message + "\n").utf8), to: 1)
        exit(1)
    }

    static let notFound = "credentials not found in native keychain"

    /// A registry address as docker's helpers read it (their `registryurl.Parse`): no scheme or `//` means https;
    /// only http and https are allowed; the query is dropped; an empty path and a missing port match any.
    struct ServerAddress {
        var isHTTP: Bool
        var host: String
        var port: Int64?
        var path: String

        init(parsing text: String) throws(AddressError) {
            var rest = Substring(text)
            var scheme = ""
            if let range = rest.firstRange(of: "://") {
                scheme = rest[..<range.lowerBound].lowercased()
                rest = rest[range.upperBound...]
            } else if rest.hasPrefix("//") {
                rest = rest.dropFirst(2)
            }
            guard scheme == "" || scheme == "http" || scheme == "https" else {
                throw AddressError("unsupported scheme: \(scheme)")
            }
            isHTTP = scheme == "http"
            if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
            let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
            var authority = rest[..<authorityEnd]
            path = String(rest[authorityEnd...])
            if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
            var portText: Substring = ""
            if authority.hasPrefix("[") {
                guard let close = authority.firstIndex(of: "]") else { throw AddressError("missing ']' in host") }
                host = String(authority[authority.index(after: authority.startIndex)..<close])
                let after = authority[authority.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":") else { throw AddressError("invalid port \"\(after)\" after host") }
                    portText = after.dropFirst()
                }
            } else if let colon = authority.lastIndex(of: ":") {
                host = String(authority[..<colon])
                portText = authority[authority.index(after: colon)...]
            } else {
                host = String(authority)
            }
            if portText.isEmpty {
                port = nil
            } else {
                guard portText.allSatisfy(\.isASCII), portText.allSatisfy(\.isNumber), let value = Int64(portText),
                    value <= 65535
                else { throw AddressError("invalid port \":\(portText)\" after host") }
                port = value
            }
            guard !host.isEmpty else { throw AddressError("no hostname in URL") }
        }

        /// The attributes that select this address's credentials (docker's own label only: git's items for the same
        /// host are internet passwords too, and docker must not read or remove them).
        var attributes: [AttributeName: AttributeValue] {
            var q: [AttributeName: AttributeValue] = [
                .label: .string(label), .protocol: .string(isHTTP ? "http" : "htps"), .server: .string(host),
            ]
            if let port { q[.port] = .number(port) }
            if !path.isEmpty { q[.path] = .string(path) }
            return q
        }
    }

    struct AddressError: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }

    static func address(_ text: String) -> ServerAddress {
        if text.isEmpty { fail("no credentials server URL") }
        do {
            return try ServerAddress(parsing: text)
        } catch {
            fail(error.message)
        }
    }

    static func readInput() -> String {
        // Without the white space and line ends around it (docker's helpers trim likewise).
        let text = String(decoding: StandardStreams.readAll(), as: UTF8.self)
        guard let first = text.firstIndex(where: { !$0.isWhitespace }),
            let last = text.lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(text[first...last])
    }


    static func run(_ operation: String, client: KeychainClient) throws(KeychainError) {
        switch operation {
        case "store":
            guard let creds = try? JSONDecoder().decode(Credentials.self, from: Data(readInput().utf8)) else {
                fail("credentials are malformed")
            }
            if creds.ServerURL.isEmpty { fail("no credentials server URL") }
            if creds.Username.isEmpty { fail("no credentials username") }
            let server = address(creds.ServerURL)
            // As docker's helpers do: whatever this address held goes, in the same transaction as the new item lands.
            var item = server.attributes
            item[.path] = .string(server.path)
            item[.account] = .string(creds.Username)
            item[.authenticationType] = .string("dflt")
            try client.replaceAll(matching: .matching(.internetPassword, server.attributes, for: .delete),
                                  with: .add(.internetPassword, item, secret: SecretBytes(utf8: creds.Secret)))
        case "get":
            let text = readInput()
            let q = ItemQuery.search(.internetPassword, address(text).attributes, returning: [.data, .attributes])
            guard let found = try? client.search(q).first else { fail(notFound) }
            let creds = Credentials(
                ServerURL: text, Username: found.item[.account]?.stringValue ?? "",
                Secret: found.secret.map { $0.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } } ?? "")
            StandardStreams.write(Array((try? encoder.encode(creds)) ?? Data()) + [0x0a], to: 1)
        case "erase":
            let q = ItemQuery.matching(.internetPassword, address(readInput()).attributes, for: .delete)
            do {
                try client.delete(q)
            } catch KeychainStatus.itemNotFound {
                fail(notFound)
            } catch {
                throw error
            }
        case "list":
            var all: [String: String] = [:]
            let items = (try? client.search(.search(.internetPassword, [.label: .string(label)], returning: .attributes,
                                                    limit: .all))) ?? []
            for found in items {
                let a = found.item
                let scheme = a[.protocol] == .string("http") ? "http" : "https"
                var host = a[.server]?.stringValue ?? ""
                if let port = a[.port]?.numberValue, port != 0 {
                    host = (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
                }
                all["\(scheme)://\(host)\(a[.path]?.stringValue ?? "")"] = a[.account]?.stringValue ?? ""
            }
            StandardStreams.write(Array((try? encoder.encode(all)) ?? Data("{}".utf8)) + [0x0a], to: 1)
        case "version":
            StandardStreams.write(Array(BuildInfo.versionLine(for: "docker-credential-keychain").utf8), to: 1)
        default:
            fail("Usage: docker-credential-keychain <store|get|erase|list|version>")
        }
    }
}
