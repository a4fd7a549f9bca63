import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage

// git-credential-keychain: git's credential helper protocol over internet-password items, stored the way
// git-credential-osxkeychain stores them (protocol, host and port, path, username as account).
//   git config --global credential.helper keychain

let operation = CommandLine.arguments.dropFirst().first ?? ""

/// The key=value lines git sends, up to a blank line or the end of input.
func readRequest() -> [String: String] {
    var fields: [String: String] = [:]
    while let line = readLine(strippingNewline: true), !line.isEmpty {
        guard let eq = line.firstIndex(of: "=") else { continue }
        fields[String(line[..<eq])] = String(line[line.index(after: eq)...])
    }
    return fields
}

/// git protocol names as Apple's four-character protocol codes.
let protocols: [String: String] = [
    "https": "htps", "http": "http", "ftp": "ftp ", "ftps": "ftps", "smtp": "smtp", "imap": "imap",
    "imaps": "imps", "ssh": "ssh ", "ldap": "ldap", "ldaps": "ldps", "pop3": "pop3", "pop3s": "pops",
]

/// The attributes that identify the credential; missing fields match anything.
func query(_ request: [String: String]) -> [String: QueryValue]? {
    var q: [String: QueryValue] = ["class": "inet"]
    if let proto = request["protocol"] {
        guard let code = protocols[proto] else { return nil }
        q["ptcl"] = .string(code)
    }
    if var host = request["host"], !host.isEmpty {
        if let colon = host.lastIndex(of: ":"), let port = Int64(host[host.index(after: colon)...]) {
            q["port"] = .int(port)
            host = String(host[..<colon])
        }
        q["srvr"] = .string(host)
    }
    if let path = request["path"], !path.isEmpty { q["path"] = .string(path) }
    if let user = request["username"], !user.isEmpty { q["acct"] = .string(user) }
    return q
}

/// The secret holds the password, then the extra fields git keeps with it, one `key=value` per line.
let extraFields = ["password_expiry_utc", "oauth_refresh_token"]

func pack(_ request: [String: String]) -> SecretBytes {
    var text = request["password"] ?? ""
    for key in extraFields { if let v = request[key] { text += "\n\(key)=\(v)" } }
    return SecretBytes(utf8: text)
}

func unpack(_ secret: SecretBytes) -> [String: String] {
    let lines = (secret.unprotectedString() ?? "").split(separator: "\n", omittingEmptySubsequences: false)
    var out = ["password": String(lines.first ?? "")]
    for line in lines.dropFirst() {
        guard let eq = line.firstIndex(of: "=") else { continue }
        out[String(line[..<eq])] = String(line[line.index(after: eq)...])
    }
    return out
}

func run() throws(KeychainError) {
    let request = readRequest()
    guard let base = query(request) else { return }  // a protocol we do not store: nothing to do
    let client = try KeychainClient.openDefault(caller: Caller(accessGroups: ["git-credential-keychain", "*"]))
    switch operation {
    case "get":
        var q = base
        q["r_Data"] = true
        q["r_Attributes"] = true
        guard let found = try? client.search(q).first, let secret = found.secret else { return }
        var out = ""
        if let account = found.item.attributes["acct"]?.stringValue, request["username"] == nil {
            out += "username=\(account)\n"
        }
        let fields = unpack(secret)
        out += "password=\(fields["password"] ?? "")\n"
        for key in extraFields {
            if let v = fields[key] {
                // An expired password is not handed out, as git's own helpers do.
                if key == "password_expiry_utc", let t = TimeInterval(v), t < Date().timeIntervalSince1970 { return }
                out += "\(key)=\(v)\n"
            }
        }
        FileHandle.standardOutput.write(Data(out.utf8))
    case "store":
        guard request["host"] != nil, request["username"] != nil, request["password"] != nil else { return }
        var attributes = base
        attributes["labl"] = .string(request["host"]!)
        try client.upsert(base, secret: pack(request), attributes: ["labl": attributes["labl"]!])
    case "erase":
        guard request["host"] != nil || request["username"] != nil else { return }
        var q = base
        q["r_Data"] = true
        q["r_Attributes"] = true
        q["m_Limit"] = "m_LimitAll"
        guard let matches = try? client.search(q) else { return }
        for found in matches {
            // Given a password, erase only the item that holds it.
            if let given = request["password"], let secret = found.secret, unpack(secret)["password"] != given {
                continue
            }
            try client.delete(["v_PersistentRef": .data(found.item.persistentReference.data)])
        }
    default:
        FileHandle.standardError.write(Data("usage: git-credential-keychain get|store|erase\n".utf8))
        exit(1)
    }
}

ProcessHardening.disableCoreDumps()
do {
    try run()
    OpenKeychains.shared.closeAll()
} catch {
    FileHandle.standardError.write(Data("git-credential-keychain: \(error.message)\n".utf8))
    exit(1)
}
