#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

/// How an entry of another store becomes one of Apple's items (docs/MIGRATION.md).
enum ImportMapping {
    /// An entry with a web address is an internet password (server, protocol, port, path); anything else a generic
    /// password named by its title.
    static func entry(title: String, user: String, url: String, comment: String, group: String) -> [String: QueryValue] {
        var attributes: [String: QueryValue]
        if let web = internetAttributes(url: url) {
            attributes = web
            attributes["labl"] = .string(title.isEmpty ? web["srvr"].flatMap(stringValue) ?? "" : title)
        } else {
            attributes = ["class": "genp", "svce": .string(title), "labl": .string(title)]
        }
        attributes["acct"] = .string(user)
        if !comment.isEmpty { attributes["icmt"] = .string(comment) }
        if !group.isEmpty { attributes["desc"] = .string(group) }
        return attributes
    }

    /// `https://login.example.com:8443/path` as an internet password's attributes; nil without a host.
    static func internetAttributes(url text: String) -> [String: QueryValue]? {
        let trimmed = text.trimmedOfWhitespace
        guard !trimmed.isEmpty, let url = URL(string: trimmed.contains("://") ? trimmed : "https://" + trimmed),
            let host = url.host, !host.isEmpty
        else { return nil }
        var attributes: [String: QueryValue] = ["class": "inet", "srvr": .string(host)]
        if let scheme = url.scheme?.lowercased(), let code = protocolCodes[scheme] { attributes["ptcl"] = .string(code) }
        if let port = url.port { attributes["port"] = .int(Int64(port)) }
        if !url.path.isEmpty && url.path != "/" { attributes["path"] = .string(url.path) }
        return attributes
    }

    /// URL schemes as kSecAttrProtocol's four-character codes (apple-constants.txt).
    static let protocolCodes: [String: String] = [
        "https": "htps", "http": "http", "ftp": "ftp ", "ftps": "ftps", "ssh": "ssh ", "imap": "imap",
        "imaps": "imps", "pop3": "pop3", "pop3s": "pops", "smtp": "smtp", "ldap": "ldap", "ldaps": "ldps",
        "telnet": "teln", "telnets": "tels", "smb": "smb ", "afp": "afp ", "socks": "sox ", "irc": "irc ",
        "ircs": "ircs", "nntp": "nntp", "nntps": "ntps", "rtsp": "rtsp", "ipp": "ipp ",
    ]

    static func stringValue(_ value: QueryValue) -> String? {
        if case .string(let s) = value { return s }
        return nil
    }
}

extension StringProtocol {
    /// Without leading and trailing white space (newlines included).
    var trimmedOfWhitespace: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
