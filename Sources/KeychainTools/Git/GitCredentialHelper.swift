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

// git-credential-keychain: git's credential helper protocol over internet-password items, stored the way
// git-credential-osxkeychain stores them (protocol, host and port, path, username as account).
//   git config --global credential.helper keychain

public enum GitCredentialHelper {
    /// Runs `git-credential-keychain get|store|erase` and exits. `client` is made first, before standard input is
    /// read (the tool may yet become its engine-linked twin, see EmbeddedTwin). git's helper sees every group of the
    /// keychain (as git-credential-osxkeychain sees the file keychain); what it adds lands in its own group.
    public static func main(arguments: [String], client makeClient: () throws(KeychainError) -> KeychainClient) -> Never {
        switch arguments.first {
        case "--version":
            StandardStreams.write(Array(BuildInfo.versionLine(for: "git-credential-keychain").utf8), to: 1)
            exit(0)
        case "--help", "-h":
            StandardStreams.write(Array(usage.utf8), to: 1)
            exit(0)
        default: break
        }
        CredentialHelperProcess.run(client: makeClient, { client throws(KeychainError) in
            try run(arguments.first ?? "", client: client)
        }, fail: die)
    }

    static let usage = """
        Usage: git-credential-keychain get|store|erase
          git's credential helper protocol over the keychain (git config --global credential.helper keychain);
          --version prints the release and build.

        """

    static func die(_ message: String) -> Never {
        StandardStreams.write(Array("git-credential-keychain: \(message)\n".utf8), to: 2)
        exit(1)
    }

    /// A request as git sends it: `key=value` lines up to a blank line or the end of input. Values are kept as bytes
    /// (a password need not be UTF-8, and must reach the keychain unaltered); a NUL anywhere is refused, as git does.
    struct Request {
        var fields: [String: [UInt8]] = [:]

        static func read(_ input: [UInt8]) -> Request {
            var request = Request()
            for line in input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
                if line.isEmpty { break }
                if line.contains(0) { die("refusing a credential field that contains NUL") }
                guard let eq = line.firstIndex(of: UInt8(ascii: "=")) else { continue }
                request.fields[String(decoding: line[..<eq], as: UTF8.self)] = Array(line[(eq + 1)...])
            }
            return request
        }

        /// A text field (host, username, ...): UTF-8 required, since it becomes an attribute.
        func text(_ key: String) -> String? {
            guard let bytes = fields[key] else { return nil }
            guard let value = String(validating: bytes, as: UTF8.self) else { die("\(key) is not UTF-8") }
            return value
        }
    }

    /// git protocol names as Apple's four-character protocol codes.
    static let protocols: [String: String] = [
        "https": "htps", "http": "http", "ftp": "ftp ", "ftps": "ftps", "smtp": "smtp", "imap": "imap",
        "imaps": "imps", "ssh": "ssh ", "ldap": "ldap", "ldaps": "ldps", "pop3": "pop3", "pop3s": "pops",
    ]

    /// The attributes that identify the credential. Protocol and host are required (git always sends them; without
    /// them a query would match every host's credentials); path and username narrow it when given.
    static func query(_ request: Request) -> [AttributeName: AttributeValue]? {
        guard let proto = request.text("protocol"), let code = protocols[proto],
            var host = request.text("host"), !host.isEmpty
        else { return nil }
        var q: [AttributeName: AttributeValue] = [.protocol: .string(code)]
        if let colon = host.lastIndex(of: ":"), let port = Int64(host[host.index(after: colon)...]) {
            q[.port] = .number(port)
            host = String(host[..<colon])
        }
        guard !host.isEmpty else { return nil }
        q[.server] = .string(host)
        if let path = request.text("path"), !path.isEmpty { q[.path] = .string(path) }
        if let user = request.text("username"), !user.isEmpty { q[.account] = .string(user) }
        return q
    }

    /// The secret holds the password, then the extra fields git keeps with it, one `key=value` per line.
    static let extraFields = ["password_expiry_utc", "oauth_refresh_token"]

    static func pack(_ request: Request) -> SecretBytes {
        var bytes = request.fields["password"] ?? []
        for key in extraFields {
            if let value = request.fields[key] { bytes += Array("\n\(key)=".utf8) + value }
        }
        return SecretBytes(consuming: &bytes)
    }

    static func unpack(_ secret: SecretBytes) -> [String: [UInt8]] {
        let bytes = secret.withUnsafeBytes { Array($0) }
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        var out = ["password": Array(lines.first ?? [])]
        for line in lines.dropFirst() {
            guard let eq = line.firstIndex(of: UInt8(ascii: "=")) else { continue }
            out[String(decoding: line[..<eq], as: UTF8.self)] = Array(line[(eq + 1)...])
        }
        return out
    }

    /// One `key=value` line for git. A value with a newline or NUL would let a stored value inject fields (say a
    /// `url=` that redirects git), so it is refused, as git itself refuses such values.
    static func line(_ key: String, _ value: [UInt8]) -> [UInt8] {
        if value.contains(UInt8(ascii: "\n")) || value.contains(0) {
            die("refusing to return a \(key) that contains a newline or NUL")
        }
        return Array("\(key)=".utf8) + value + [UInt8(ascii: "\n")]
    }


    static func run(_ operation: String, client: KeychainClient) throws(KeychainError) {
        let request = Request.read(StandardStreams.readAll())
        guard let base = query(request) else { return }  // no protocol or host, or a protocol we do not store
        switch operation {
        case "get":
            let q = ItemQuery.search(.internetPassword, base, returning: [.data, .attributes])
            guard let found = try? client.search(q).first, let secret = found.secret else { return }
            var out: [UInt8] = []
            if let account = found.item[.account]?.stringValue, request.fields["username"] == nil {
                out += line("username", Array(account.utf8))
            }
            let fields = unpack(secret)
            out += line("password", fields["password"] ?? [])
            for key in extraFields {
                guard let value = fields[key] else { continue }
                // An expired password is not handed out, as git's own helpers do.
                if key == "password_expiry_utc", let t = TimeInterval(String(decoding: value, as: UTF8.self)),
                    t < Date().timeIntervalSince1970
                {
                    return
                }
                out += line(key, value)
            }
            StandardStreams.write(out, to: 1)
        case "store":
            // An empty username is a username (git stores and returns it, as for single sign-on hosts).
            guard let user = request.text("username"), request.fields["password"] != nil else { return }
            var item = base
            item[.account] = .string(user)
            let host = base[.server]?.stringValue ?? ""
            item[.label] = .string(host)
            try client.upsert(.add(.internetPassword, item, secret: pack(request)), changes: ItemUpdate(label: host))
        case "erase":
            let q = ItemQuery.search(.internetPassword, base, returning: [.data, .attributes], limit: .all)
            guard let matches = try? client.search(q) else { return }
            for found in matches {
                // Given a password, erase only the item that holds it.
                if let given = request.fields["password"], let secret = found.secret, unpack(secret)["password"] != given {
                    continue
                }
                try client.delete(.item(found.item.persistentReference, for: .delete))
            }
        default:
            die("usage: git-credential-keychain get|store|erase")
        }
    }
}
