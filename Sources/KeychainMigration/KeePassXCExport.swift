#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

/// What `keepassxc-cli export` writes, as items: an entry with a URL becomes an internet password (server,
/// protocol, port, path), any other a generic password named by its title. The title is the label, the user name
/// the account, the notes the comment, the group path the description (`security … -D`); custom fields are kept
/// in the comment as `name: value` lines, except protected ones, which are secrets: each becomes a generic
/// password of its own (service: the entry's title, account: the field's name). Entries in the recycle bin and
/// earlier versions (history) do not come. The CSV export has no custom fields; its recycle bin is known by its
/// name only ("Recycle Bin").
public enum KeePassXCExport {
    /// One entry of either export.
    struct Entry {
        var group: [String]
        var title = "", user = "", password = "", url = "", notes = ""
        var fields: [(name: String, value: String, protected: Bool)] = []
    }

    /// The CSV export: a header row naming the columns (Group, Title, Username, Password, URL, Notes, …), then one
    /// row per entry; fields quoted with `"` and quotes doubled, as KeePassXC writes them.
    public static func csv(_ text: String) throws(KeychainError) -> [ImportedSecret] {
        let rows = try parseCSV(text)
        guard let header = rows.first else { return [] }
        let columns = Dictionary(header.enumerated().map { ($1.lowercased(), $0) }, uniquingKeysWith: { a, _ in a })
        guard let titleColumn = columns["title"], let passwordColumn = columns["password"] else {
            throw KeychainError(.decode, "not a KeePassXC CSV export: its first row names no Title and Password columns")
        }
        func value(_ row: [String], _ name: String) -> String {
            guard let index = columns[name], index < row.count else { return "" }
            return row[index]
        }
        return rows.dropFirst().filter { !($0.count == 1 && $0[0].isEmpty) }.flatMap { row -> [ImportedSecret] in
            var groups = value(row, "group").split(separator: "/").map(String.init)
            if groups.count > 1 { groups.removeFirst() }  // the database's root group ("Root") is no group of its own
            if groups.count == 1 && groups[0] == "Root" { groups = [] }
            // The CSV does not say which group is the recycle bin: KeePassXC names it "Recycle Bin".
            if groups.first == "Recycle Bin" { return [] }
            var entry = Entry(group: groups)
            entry.title = titleColumn < row.count ? row[titleColumn] : ""
            entry.password = passwordColumn < row.count ? row[passwordColumn] : ""
            entry.user = value(row, "username")
            entry.url = value(row, "url")
            entry.notes = value(row, "notes")
            return secrets(of: entry)
        }
    }

    /// The XML export (KeePass 2 XML, unencrypted): Root's groups and entries, nested.
    public static func xml(_ text: String) throws(KeychainError) -> [ImportedSecret] {
        let document = try MiniXML.parse(text)
        guard document.name == "KeePassFile", let root = document.child("Root"), let top = root.child("Group") else {
            throw KeychainError(.decode, "not a KeePassXC XML export: no KeePassFile/Root/Group")
        }
        let meta = document.child("Meta")
        let recycleBin = meta?.child("RecycleBinEnabled")?.text == "True" ? meta?.child("RecycleBinUUID")?.text : nil
        var out: [ImportedSecret] = []
        func walk(_ group: MiniXML.Element, path: [String]) {
            if let recycleBin, group.child("UUID")?.text == recycleBin { return }
            for element in group.children {
                switch element.name {
                case "Entry": out += secrets(of: entry(element, group: path))
                case "Group": walk(element, path: path + [element.child("Name")?.text ?? ""])
                default: break
                }
            }
        }
        walk(top, path: [])  // the top group is the database itself
        return out
    }

    static func entry(_ element: MiniXML.Element, group: [String]) -> Entry {
        var entry = Entry(group: group)
        for string in element.children where string.name == "String" {
            let key = string.child("Key")?.text ?? ""
            let valueElement = string.child("Value")
            let value = valueElement?.text ?? ""
            switch key {
            case "Title": entry.title = value
            case "UserName": entry.user = value
            case "Password": entry.password = value
            case "URL": entry.url = value
            case "Notes": entry.notes = value
            default:
                entry.fields.append((key, value, valueElement?.attributes["ProtectInMemory"] == "True"))
            }
        }
        return entry
    }

    static func secrets(of entry: Entry) -> [ImportedSecret] {
        let group = entry.group.joined(separator: "/")
        var comment = entry.notes
        for field in entry.fields where !field.protected {
            comment += (comment.isEmpty ? "" : "\n") + "\(field.name): \(field.value)"
        }
        let name = group.isEmpty ? entry.title : group + "/" + entry.title
        var out = [ImportedSecret(
            attributes: ImportMapping.entry(title: entry.title, user: entry.user, url: entry.url, comment: comment,
                                            group: group),
            secret: SecretBytes(utf8: entry.password), name: name)]
        for field in entry.fields where field.protected {
            var attributes: [String: QueryValue] = [
                "class": "genp", "svce": .string(entry.title), "acct": .string(field.name),
                "labl": .string("\(entry.title) (\(field.name))"),
            ]
            if !group.isEmpty { attributes["desc"] = .string(group) }
            out.append(ImportedSecret(attributes: attributes, secret: SecretBytes(utf8: field.value),
                                      name: name + " (\(field.name))"))
        }
        return out
    }

    /// RFC 4180 rows: fields separated by commas, quoted fields may hold commas, newlines and doubled quotes.
    static func parseCSV(_ text: String) throws(KeychainError) -> [[String]] {
        var rows: [[String]] = []
        var row: [String] = []
        var field = ""
        var quoted = false
        var iterator = Array(text.unicodeScalars).makeIterator()
        var pending: Unicode.Scalar? = nil
        func next() -> Unicode.Scalar? {
            if let p = pending { pending = nil; return p }
            return iterator.next()
        }
        while let c = next() {
            if quoted {
                if c == "\"" {
                    if let following = next() {
                        if following == "\"" { field.unicodeScalars.append("\"") } else { quoted = false; pending = following }
                    } else {
                        quoted = false
                    }
                } else {
                    field.unicodeScalars.append(c)
                }
                continue
            }
            switch c {
            case "\"" where field.isEmpty: quoted = true
            case ",": row.append(field); field = ""
            case "\r": break
            case "\n": row.append(field); rows.append(row); row = []; field = ""
            default: field.unicodeScalars.append(c)
            }
        }
        guard !quoted else { throw KeychainError(.decode, "the CSV file ends inside a quoted field") }
        if !field.isEmpty || !row.isEmpty { row.append(field); rows.append(row) }
        return rows
    }
}
