#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore
import KeychainInterface

/// A password-store directory (`pass`): each `*.gpg` file one entry, decrypted by the user's own gpg (its agent
/// asks for the key's passphrase, if the key has one). The first line is the secret, the rest is kept as the item's
/// comment; the entry's path is its service and label, its file name its account.
public struct PassStore {
    public let directory: URL

    public init(directory: URL) { self.directory = directory }

    /// `$PASSWORD_STORE_DIR`, else `~/.password-store`.
    public static func defaultDirectory(environment: [String: String]) -> URL {
        if let dir = environment["PASSWORD_STORE_DIR"], !dir.isEmpty { return URL(fileURLWithPath: dir) }
        return URL(fileURLWithPath: environment["HOME"] ?? "/").appendingPathComponent(".password-store")
    }

    /// The entries' paths (`email/alice`), sorted, without `.gpg`: the files (or links to files) named `*.gpg` below
    /// the store, which may itself be a link. Hidden files and directories (`.git`) are skipped, and so is a
    /// directory that cannot be read; a link to a directory is not followed (no loops).
    public func entries() throws(KeychainError) -> [String] {
        let root = directory.resolvingSymlinksInPath().path
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory), isDirectory else {
            throw KeychainError(.param, "no password store at \(directory.path)")
        }
        var found: [String] = []
        func walk(_ relative: String) {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: relative.isEmpty ? root : root + "/" + relative)
            else { return }
            for name in names where !name.hasPrefix(".") {
                let path = relative.isEmpty ? name : relative + "/" + name
                let full = root + "/" + path
                let type = (try? FileManager.default.attributesOfItem(atPath: full))?[.type] as? FileAttributeType
                if type == .typeDirectory {
                    walk(path)
                } else if name.hasSuffix(".gpg"), type == .typeRegular
                    || (type == .typeSymbolicLink && FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory) && !isDirectory)
                {
                    found.append(String(path.dropLast(4)))
                }
            }
        }
        walk("")
        return found.sorted()
    }

    /// Decrypts one entry with `gpg --decrypt` and maps it. The secret passes through gpg's standard output only.
    public func read(_ entry: String, environment: [String: String]) throws(KeychainError) -> ImportedSecret {
        let file = directory.appendingPathComponent(entry + ".gpg").path
        let gpg = ["/usr/bin/gpg", "/bin/gpg"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "gpg"
        var output: ChildProcess.Output
        do {
            output = try ChildProcess.run(gpg, arguments: ["--decrypt", "--batch", "--quiet", "--yes", "--", file],
                                          environment: environment, input: Data())
        } catch {
            throw KeychainError(.notAvailable, "cannot run gpg: \(error)")
        }
        guard output.termination == .exited(0) else {
            let reason = String(decoding: output.stderr, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
            throw KeychainError(.decode, "gpg could not decrypt it\(reason.isEmpty ? "" : ": " + reason)")
        }
        // Read in place and zeroed after: the decrypted text lives in no other copy.
        defer { output.stdout.resetBytes(in: output.stdout.startIndex..<output.stdout.endIndex) }
        let newline = output.stdout.firstIndex(of: 0x0a) ?? output.stdout.endIndex
        var secretBytes = Array(output.stdout[output.stdout.startIndex..<newline])
        if secretBytes.last == 0x0d { secretBytes.removeLast() }
        var rest = newline < output.stdout.endIndex ? Array(output.stdout[(newline + 1)...]) : []
        while rest.last == 0x0a || rest.last == 0x0d { rest.removeLast() }
        let comment = String(decoding: rest, as: UTF8.self)
        for i in rest.indices { rest[i] = 0 }
        let account = entry.split(separator: "/").last.map(String.init) ?? entry
        var attributes: [String: QueryValue] = ["class": "genp", "svce": .string(entry), "acct": .string(account),
                                                "labl": .string(entry), "desc": "pass"]
        if !comment.isEmpty { attributes["icmt"] = .string(comment) }
        return ImportedSecret(attributes: attributes, secret: SecretBytes(consuming: &secretBytes), name: entry)
    }
}
