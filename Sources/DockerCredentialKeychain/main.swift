import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage

// docker-credential-keychain: docker's credential helper protocol (store / get / erase / list / version), storing
// internet-password items the way docker-credential-osxkeychain does (label "Docker Credentials").
//   ~/.docker/config.json: { "credsStore": "keychain" }

let label = "Docker Credentials"
let version = "0.1.0"
let encoder: JSONEncoder = {
    let e = JSONEncoder()
    e.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
    return e
}()

struct Credentials: Codable {
    var ServerURL: String
    var Username: String
    var Secret: String
}

/// Errors go to standard output, with exit status 1, as docker's helpers do.
func fail(_ message: String) -> Never {
    FileHandle.standardOutput.write(Data((message + "\n").utf8))
    exit(1)
}

/// The parts of a server URL that identify the item. Without a scheme, https is assumed; port and path are used
/// when given, and match any when not.
func parts(_ serverURL: String) -> [String: QueryValue]? {
    let text = serverURL.contains("://") ? serverURL : "https://" + serverURL
    guard let url = URLComponents(string: text), let host = url.host, !host.isEmpty else { return nil }
    var q: [String: QueryValue] = ["class": "inet", "srvr": .string(host)]
    switch url.scheme?.lowercased() {
    case "https": q["ptcl"] = "htps"
    case "http": q["ptcl"] = "http"
    default: return nil
    }
    if let port = url.port { q["port"] = .int(Int64(port)) }
    if !url.path.isEmpty && url.path != "/" { q["path"] = .string(url.path) }
    return q
}

func readInput() -> String {
    String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        .trimmingCharacters(in: .whitespacesAndNewlines)
}

func run(_ operation: String) throws(KeychainError) {
    let client = { () throws(KeychainError) -> KeychainClient in
        try KeychainClient.openDefault(caller: Caller(accessGroups: ["docker-credential-keychain", "*"]))
    }
    switch operation {
    case "store":
        guard let creds = try? JSONDecoder().decode(Credentials.self, from: Data(readInput().utf8)) else {
            fail("credentials are malformed")
        }
        guard let q = parts(creds.ServerURL) else { fail("no credentials server URL") }
        try client().upsert(q, secret: SecretBytes(utf8: creds.Secret),
                            attributes: ["labl": .string(label), "acct": .string(creds.Username)])
    case "get":
        let server = readInput()
        guard var q = parts(server) else { fail("no credentials server URL") }
        q["labl"] = .string(label)
        q["r_Data"] = true
        q["r_Attributes"] = true
        guard let found = try? client().search(q).first else { fail("credentials not found in native keychain") }
        let creds = Credentials(
            ServerURL: server, Username: found.item.attributes["acct"]?.stringValue ?? "",
            Secret: found.secret?.unprotectedString() ?? "")
        FileHandle.standardOutput.write((try? encoder.encode(creds)) ?? Data())
        FileHandle.standardOutput.write(Data("\n".utf8))
    case "erase":
        guard var q = parts(readInput()) else { fail("no credentials server URL") }
        q["labl"] = .string(label)
        do {
            try client().delete(q)
        } catch KeychainStatus.itemNotFound {
            fail("credentials not found in native keychain")
        } catch {
            throw error
        }
    case "list":
        var all: [String: String] = [:]
        let items = (try? client().search([
            "class": "inet", "labl": .string(label), "r_Attributes": true, "m_Limit": "m_LimitAll",
        ])) ?? []
        for found in items {
            let a = found.item.attributes
            let scheme = a["ptcl"] == .string("http") ? "http" : "https"
            var url = "\(scheme)://\(a["srvr"]?.stringValue ?? "")"
            if let port = a["port"]?.numberValue, port != 0 { url += ":\(port)" }
            if let path = a["path"]?.stringValue, !path.isEmpty { url += path }
            all[url] = a["acct"]?.stringValue ?? ""
        }
        FileHandle.standardOutput.write((try? encoder.encode(all)) ?? Data("{}".utf8))
        FileHandle.standardOutput.write(Data("\n".utf8))
    case "version":
        print("docker-credential-keychain (swift-keychain) \(version)")
    default:
        fail("Usage: docker-credential-keychain <store|get|erase|list|version>")
    }
}

ProcessHardening.disableCoreDumps()
do {
    try run(CommandLine.arguments.dropFirst().first ?? "")
    OpenKeychains.shared.closeAll()
} catch {
    fail(error.message)
}
