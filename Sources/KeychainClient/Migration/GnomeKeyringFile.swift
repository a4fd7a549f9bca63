import Crypto
import Foundation
import KeychainCore
import _CryptoExtras

/// A gnome-keyring keyring file (`~/.local/share/keyrings/NAME.keyring`, gnome-keyring's binary format, version
/// 0.0), read offline with its password for `security import-secrets --from gnome-keyring FILE`: every item's
/// label, attributes and secret, byte for byte.
///
/// The format (gnome-keyring's `gkm-secret-binary.c`): a clear part with the keyring's name, times, KDF salt and
/// iteration count, and each item's id, type and attribute names with hashed values; then one AES-128-CBC block
/// whose key and IV come from the password by iterated SHA-256 over password and salt, holding an MD5 of the rest
/// and, per item, its display name, secret, times and real attribute values.
struct GnomeKeyringFile {
    static let magic = Array("GnomeKeyring\n\r\0\n".utf8)

    struct Item {
        var id: UInt32
        var type: UInt32
        var label: String
        var secret: [UInt8]
        var attributes: [String: String]
        var created: UInt64
        var modified: UInt64
    }

    let keyringName: String
    let items: [Item]

    init(_ file: SecretBytes, password: SecretBytes) throws(KeychainError) {
        let bytes = file.withUnsafeBytes { [UInt8]($0) }
        // A keyring made with an empty password is kept in gnome-keyring's textual format, in the clear.
        if bytes.starts(with: Array("[keyring]".utf8)) {
            (keyringName, items) = try Self.textual(bytes)
            return
        }
        var reader = Reader(bytes: bytes)
        let damaged = KeychainError.decode("not a gnome-keyring keyring file, or a damaged one")
        guard reader.take(16) == Self.magic, let major = reader.byte(), let minor = reader.byte() else { throw damaged }
        guard major == 0, minor == 0 else {
            throw KeychainError(.unimplemented, "gnome-keyring keyring format \(major).\(minor) is not one this reads (0.0)")
        }
        guard let crypto = reader.byte(), let hash = reader.byte() else { throw damaged }
        guard crypto == 0, hash == 0 else {
            throw KeychainError(.unimplemented, "the keyring's cipher (\(crypto)) or hash (\(hash)) is not AES/MD5")
        }
        guard let name = try reader.string(), reader.time() != nil, reader.time() != nil, reader.uint32() != nil,
            reader.uint32() != nil, let iterations = reader.uint32(), let salt = reader.take(8),
            reader.take(16) != nil, let count = reader.uint32()
        else { throw damaged }
        keyringName = name ?? ""
        // The clear part: ids, types and hashed attributes, in the order of the encrypted items.
        var headers: [(id: UInt32, type: UInt32)] = []
        for _ in 0..<count {
            guard let id = reader.uint32(), let type = reader.uint32(), let attributes = reader.uint32() else { throw damaged }
            for _ in 0..<attributes {
                guard (try? reader.string()) != nil, let kind = reader.uint32() else { throw damaged }
                switch kind {
                case 0: guard (try? reader.string()) != nil else { throw damaged }
                case 1: guard reader.uint32() != nil else { throw damaged }
                default: throw damaged
                }
            }
            headers.append((id, type))
        }
        guard let length = reader.uint32(), length % 16 == 0, let encrypted = reader.take(Int(length)) else { throw damaged }
        guard iterations >= 1, iterations < 1 << 24 else { throw damaged }

        let (key, iv) = Self.deriveKey(password: password, salt: salt, iterations: Int(iterations))
        var plain: [UInt8]
        do {
            plain = Array(try AES._CBC.decrypt(encrypted, using: key, iv: AES._CBC.IV(ivBytes: iv), noPadding: true))
        } catch {
            throw damaged
        }
        defer { for i in plain.indices { plain[i] = 0 } }
        // The first 16 bytes are the MD5 of the rest: a wrong password gives something else.
        guard plain.count >= 16, Array(Insecure.MD5.hash(data: plain[16...])) == Array(plain[0..<16]) else {
            throw KeychainError(.authFailed, "the keyring's password is not correct")
        }
        var secretReader = Reader(bytes: Array(plain[16...]))
        var items: [Item] = []
        for header in headers {
            guard let label = try secretReader.string(), let secret = secretReader.blob(),
                let created = secretReader.time(), let modified = secretReader.time(),
                (try? secretReader.string()) != nil, secretReader.take(16) != nil, let attributeCount = secretReader.uint32()
            else { throw damaged }
            var attributes: [String: String] = [:]
            for _ in 0..<attributeCount {
                guard let attributeName = try secretReader.string(), let name = attributeName, let kind = secretReader.uint32()
                else { throw damaged }
                switch kind {
                case 0:
                    guard let value = try secretReader.string() else { throw damaged }
                    attributes[name] = value ?? ""
                case 1:
                    guard let value = secretReader.uint32() else { throw damaged }
                    attributes[name] = String(value)
                default: throw damaged
                }
            }
            // Access-control entries (kept by old versions): read past them.
            guard let acls = secretReader.uint32() else { throw damaged }
            for _ in 0..<acls {
                guard secretReader.uint32() != nil, (try? secretReader.string()) != nil, (try? secretReader.string()) != nil,
                    (try? secretReader.string()) != nil, secretReader.uint32() != nil
                else { throw damaged }
            }
            items.append(Item(id: header.id, type: header.type, label: label ?? "", secret: secret ?? [],
                              attributes: attributes, created: created, modified: modified))
        }
        self.items = items
    }

    /// gnome-keyring's textual format (`gkm-secret-textual.c`), a GLib key file: `[keyring]` with `display-name`,
    /// then per item `[ID]` (`display-name`, `secret=` text or `binary-secret=` hex, absent when empty, `ctime`,
    /// `mtime`) and its attributes in `[ID:attributeN]` (`name`, `type` string or uint32, `value`). Values are
    /// GLib-escaped (`\s`, `\n`, `\t`, `\r`, `\\`), read back as gnome-keyring reads them.
    static func textual(_ bytes: [UInt8]) throws(KeychainError) -> (String, [Item]) {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw KeychainError.decode("the textual keyring is not UTF-8")
        }
        var groups: [(name: String, values: [String: String])] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("#") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                groups.append((String(line.dropFirst().dropLast()), [:]))
                continue
            }
            guard let equals = line.firstIndex(of: "="), !groups.isEmpty else {
                throw KeychainError.decode("the textual keyring has a line that is neither a group nor a key")
            }
            groups[groups.count - 1].values[String(line[..<equals])] = unescape(line[line.index(after: equals)...])
        }
        let byName = Dictionary(groups.map { ($0.name, $0.values) }, uniquingKeysWith: { first, _ in first })
        let name = byName["keyring"]?["display-name"] ?? ""
        var items: [Item] = []
        for group in groups where UInt32(group.name) != nil {
            let values = group.values
            var secret = Array((values["secret"] ?? "").utf8)
            if let hex = values["binary-secret"] {
                guard hex.utf8.count % 2 == 0 else { throw KeychainError.decode("a binary secret is not hex") }
                var decoded: [UInt8] = []
                var digits = hex.makeIterator()
                while let high = digits.next(), let low = digits.next() {
                    guard let byte = UInt8(String([high, low]), radix: 16) else {
                        throw KeychainError.decode("a binary secret is not hex")
                    }
                    decoded.append(byte)
                }
                secret = decoded
            }
            var attributes: [String: String] = [:]
            var index = 0
            while let attribute = byName["\(group.name):attribute\(index)"] {
                guard let attributeName = attribute["name"], let value = attribute["value"] else {
                    throw KeychainError.decode("an attribute of item \(group.name) has no name or value")
                }
                attributes[attributeName] = value
                index += 1
            }
            items.append(Item(id: UInt32(group.name) ?? 0, type: UInt32(values["item-type"] ?? "0") ?? 0,
                              label: values["display-name"] ?? "", secret: secret, attributes: attributes,
                              created: UInt64(values["ctime"] ?? "0") ?? 0, modified: UInt64(values["mtime"] ?? "0") ?? 0))
        }
        return (name, items.sorted { $0.id < $1.id })
    }

    /// GLib's key-file unescaping: `\s` space, `\n`, `\t`, `\r`, `\\`; any other escape is kept as written.
    static func unescape(_ raw: Substring) -> String {
        var out = ""
        var escaped = false
        for c in raw {
            if escaped {
                switch c {
                case "s": out.append(" ")
                case "n": out.append("\n")
                case "t": out.append("\t")
                case "r": out.append("\r")
                case "\\": out.append("\\")
                default: out.append("\\"); out.append(c)
                }
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else {
                out.append(c)
            }
        }
        if escaped { out.append("\\") }
        return out
    }

    /// gnome-keyring's "simple" key derivation: SHA-256 over (previous digest,) password and salt, hashed again
    /// `iterations - 1` times; the digests fill the key and then the IV.
    static func deriveKey(password: SecretBytes, salt: [UInt8], iterations: Int) -> (SymmetricKey, [UInt8]) {
        var digest: [UInt8] = []
        var output: [UInt8] = []
        while output.count < 32 {
            var hasher = SHA256()
            hasher.update(data: digest)
            password.withUnsafeBytes { hasher.update(bufferPointer: $0) }
            hasher.update(data: salt)
            digest = Array(hasher.finalize())
            for _ in 1..<max(iterations, 1) { digest = Array(SHA256.hash(data: digest)) }
            output += digest
        }
        defer { for i in output.indices { output[i] = 0 } }
        return (SymmetricKey(data: output[0..<16]), Array(output[16..<32]))
    }

    /// The items as the keychain stores them: generic passwords with their Secret Service attributes, as keychaind's
    /// Secret Service stores them, so that the programs that stored them find them by the same attributes.
    func secrets() -> [ImportedSecret] {
        items.filter { SecretItemMapping.isStorable($0.attributes) }.map { item in
            var secret = item.secret
            return ImportedSecret(attributes: SecretItemMapping.importedAttributes(label: item.label,
                                                                                   attributes: item.attributes),
                                  secret: SecretBytes(consuming: &secret), name: "\(keyringName)/\(item.label)")
        }
    }

    /// The items whose attributes the keychain cannot keep apart (they hold its separators), by name.
    var unstorable: [String] {
        items.filter { !SecretItemMapping.isStorable($0.attributes) }.map { "\(keyringName)/\($0.label)" }
    }

    /// Big-endian fields as gnome-keyring writes them; nil past the end.
    struct Reader {
        let bytes: [UInt8]
        var offset = 0
        mutating func take(_ n: Int) -> [UInt8]? {
            guard n >= 0, bytes.count - offset >= n else { return nil }
            defer { offset += n }
            return Array(bytes[offset..<offset + n])
        }
        mutating func byte() -> UInt8? { take(1)?.first }
        mutating func uint32() -> UInt32? { take(4).map { $0.reduce(0) { $0 << 8 | UInt32($1) } } }
        mutating func time() -> UInt64? {
            guard let high = uint32(), let low = uint32() else { return nil }
            return UInt64(high) << 32 | UInt64(low)
        }
        /// A length-prefixed byte string; 0xffffffff is NULL (.some(nil)); nil when cut short.
        mutating func blob() -> [UInt8]?? {
            guard let length = uint32() else { return nil }
            if length == 0xffff_ffff { return .some(nil) }
            guard let bytes = take(Int(length)) else { return nil }
            return .some(bytes)
        }
        /// A string; `.some(nil)` for NULL, nil when cut short; not UTF-8 is errSecDecode.
        mutating func string() throws(KeychainError) -> String?? {
            guard let blob = blob() else { return nil }
            guard let bytes = blob else { return .some(nil) }
            guard let text = String(validating: bytes, as: UTF8.self) else { throw .decode("a keyring string is not UTF-8") }
            return .some(text)
        }
    }
}
