import Foundation
import KeychainClient
import Testing

/// `security import`, `export`, `find-certificate`, `find-identity`, `delete-certificate`, `delete-identity` and
/// `add-certificates` on files OpenSSL makes, and what they write read back by OpenSSL.
@Suite("security: certificates and identities, end to end",
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")))
struct CertificateCommandTests {
    func openssl(_ tool: Tool, _ arguments: String...) throws -> Tool.Result {
        try tool.run(program: URL(fileURLWithPath: "/usr/bin/openssl"), arguments, stdin: nil)
    }

    /// A key, a self-signed certificate (PEM and DER) and a .p12 of both, in the tool's home.
    func makeIdentity(_ tool: Tool, name: String, legacy: Bool = false, folder: String = "files") throws -> URL {
        let dir = tool.home.appendingPathComponent(folder)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let made = try openssl(tool, "req", "-x509", "-nodes", "-days", "2", "-subj", "/CN=\(name)/emailAddress=\(name.lowercased().replacingOccurrences(of: " ", with: "."))@example.org",
                               "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                               "-keyout", dir.appendingPathComponent("key.pem").path,
                               "-out", dir.appendingPathComponent("cert.pem").path)
        #expect(made.status == 0, "\(made.stderr)")
        var export = ["pkcs12", "-export", "-inkey", dir.appendingPathComponent("key.pem").path,
                      "-in", dir.appendingPathComponent("cert.pem").path, "-name", name, "-passout", "pass:pw",
                      "-out", dir.appendingPathComponent("id.p12").path]
        if legacy { export.append("-legacy") }
        let exported = try tool.run(program: URL(fileURLWithPath: "/usr/bin/openssl"), export, stdin: nil)
        #expect(exported.status == 0, "\(exported.stderr)")
        return dir
    }

    @Test("PEM is read by the RFC: text between blocks is skipped; a block with other line lengths is errSecUnknownFormat and adds nothing")
    func pemStrictness() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        let dir = try makeIdentity(tool, name: "Pem Reader")
        let pem = try String(contentsOf: dir.appendingPathComponent("cert.pem"), encoding: .utf8)
        // What `openssl pkcs12 -nokeys` prints: attributes before the block.
        let withText = dir.appendingPathComponent("with-text.pem")
        try ("Bag Attributes\n    friendlyName: Pem Reader\nsubject=CN=Pem Reader\n" + pem).write(to: withText, atomically: true, encoding: .utf8)
        let imported = try tool.run("import", withText.path)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout == "1 certificate imported.\n")
        // The same certificate re-wrapped at 76 characters a line (as MIME would) is not PEM.
        let lines = pem.split(separator: "\n")
        let body = lines.dropFirst().dropLast().joined()
        var wrapped: [String] = [String(lines.first!)]
        var rest = Substring(body)
        while !rest.isEmpty { wrapped.append(String(rest.prefix(76))); rest = rest.dropFirst(76) }
        wrapped.append(String(lines.last!))
        let badFile = dir.appendingPathComponent("wrapped.pem")
        try (wrapped.joined(separator: "\n") + "\n").write(to: badFile, atomically: true, encoding: .utf8)
        let other = Tool()
        defer { try? FileManager.default.removeItem(at: other.home) }
        let refused = try other.run("import", badFile.path)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("Unknown format in import."), "\(refused.stderr)")
        #expect(try other.run("find-certificate", "-a").stdout.isEmpty)
    }

    @Test("import a .p12 (default and -legacy): one identity, listed by find-identity with its SHA-1; twice is a duplicate; a wrong passphrase changes nothing")
    func importIdentity() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        let dir = try makeIdentity(tool, name: "Import Me")
        let p12 = dir.appendingPathComponent("id.p12").path
        let wrong = try tool.run("import", p12, "-P", "nope")
        #expect(wrong.status == 1)
        #expect(wrong.stderr.contains("security: SecKeychainItemImport: The user name or passphrase you entered is not correct."))
        #expect(try tool.run("find-identity", "-v").stdout.contains("0 valid identities found"))

        let imported = try tool.run("import", p12, "-P", "pw")
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout == "1 identity imported.\n")
        let again = try tool.run("import", p12, "-P", "pw")
        #expect(again.status == 1)
        #expect(again.stderr.contains("already exists"))

        let sha1 = try openssl(tool, "x509", "-in", dir.appendingPathComponent("cert.pem").path, "-noout", "-fingerprint", "-sha1")
            .stdout.split(separator: "=").last.map { $0.replacingOccurrences(of: ":", with: "").trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
        let identities = try tool.run("find-identity")
        #expect(identities.stdout.contains("Policy: X.509 Basic\n  Matching identities\n  1) \(sha1) \"Import Me\"\n     1 identities found\n"))
        #expect(identities.stdout.hasSuffix("  Valid identities only\n  1) \(sha1) \"Import Me\"\n     1 valid identities found\n"))

        let legacyTool = Tool()
        defer { try? FileManager.default.removeItem(at: legacyTool.home) }
        let legacyDir = try makeIdentity(legacyTool, name: "Legacy Me", legacy: true)
        let legacy = try legacyTool.run("import", legacyDir.appendingPathComponent("id.p12").path, "-P", "pw")
        #expect(legacy.stdout == "1 identity imported.\n", "\(legacy.stderr)")
    }

    @Test("find-certificate -c/-e/-Z/-m/-p, export as PEM and as a .p12 that OpenSSL opens, delete-identity by hash")
    func findExportDelete() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        let dir = try makeIdentity(tool, name: "Find Me")
        #expect(try tool.run("import", dir.appendingPathComponent("id.p12").path, "-P", "pw").status == 0)
        let certificatePEM = try String(contentsOf: dir.appendingPathComponent("cert.pem"), encoding: .utf8)

        let byName = try tool.run("find-certificate", "-c", "find", "-Z", "-m")
        #expect(byName.status == 0, "\(byName.stderr)")
        #expect(byName.stdout.contains("SHA-256 hash: "))
        #expect(byName.stdout.contains("email addresses: find.me@example.org\n"))
        #expect(byName.stdout.contains("class: \"cert\""))
        #expect(try tool.run("find-certificate", "-e", "find.me@example.org", "-p").stdout == certificatePEM)
        let missing = try tool.run("find-certificate", "-c", "nobody")
        #expect(missing.status == 44)

        let pem = try tool.run("export", "-t", "certs", "-f", "pemseq")
        #expect(pem.stdout == certificatePEM)
        let out = tool.home.appendingPathComponent("out.p12").path
        #expect(try tool.run("export", "-t", "identities", "-f", "pkcs12", "-P", "expw", "-o", out).status == 0)
        let read = try openssl(tool, "pkcs12", "-in", out, "-passin", "pass:expw", "-nodes")
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout.contains("-----BEGIN PRIVATE KEY-----"))
        #expect(read.stdout.contains(certificatePEM.trimmingCharacters(in: .whitespacesAndNewlines)))
        let noPassphrase = try tool.run("export", "-t", "identities", "-f", "pkcs12")
        #expect(noPassphrase.status == 84)  // no terminal to ask: errSecPassphraseRequired

        let sha1 = try #require(byName.stdout.split(separator: "\n").first { $0.hasPrefix("SHA-1 hash: ") }?.dropFirst(12))
        #expect(try tool.run("delete-identity", "-Z", String(sha1)).status == 0)
        #expect(try tool.run("find-identity", "-v").stdout.contains("0 valid identities found"))
        #expect(try tool.run("find-certificate", "-c", "find").status == 44)
    }

    @Test("import -x: the private key never comes back, not even in a .p12 export")
    func nonExtractable() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        let dir = try makeIdentity(tool, name: "Keep Me")
        #expect(try tool.run("import", dir.appendingPathComponent("id.p12").path, "-P", "pw", "-x").status == 0)
        let export = try tool.run("export", "-t", "identities", "-f", "pkcs12", "-P", "expw")
        #expect(export.status == 86)  // errSecKeyIsSensitive
        #expect(export.stdoutBytes.isEmpty)
        let dump = try tool.run("dump-keychain", "-d")
        #expect(!dump.stdout.contains("PRIVATE"))
    }

    @Test("add-certificates: PEM and DER files, a duplicate reported, the next file still added, exit 1")
    func addCertificates() throws {
        let tool = Tool()
        defer { try? FileManager.default.removeItem(at: tool.home) }
        let dir = try makeIdentity(tool, name: "Add Me")
        let pem = dir.appendingPathComponent("cert.pem").path
        let other = try makeIdentity(tool, name: "Add Me Too", folder: "other")
        let der = tool.home.appendingPathComponent("other.der").path
        #expect(try openssl(tool, "x509", "-in", other.appendingPathComponent("cert.pem").path, "-outform", "DER", "-out", der).status == 0)
        #expect(try tool.run("add-certificates", pem).status == 0)
        let second = try tool.run("add-certificates", pem, der)
        #expect(second.status == 1)
        #expect(second.stderr.contains("security: \(pem): already in default keychain"))
        #expect(try tool.run("find-certificate", "-c", "Add Me Too").status == 0)
        #expect(try tool.run("delete-certificate", "-c", "Add Me").status == 1)  // two match: ambiguous
    }
}
