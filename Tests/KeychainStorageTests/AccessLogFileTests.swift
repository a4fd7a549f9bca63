import Crypto
import Foundation
import KeychainCore
import Testing
@testable import KeychainStorage

/// The access log's files as an attacker with the user's rights meets them (issue: who read what): records cut,
/// edited, reordered, removed, and files spliced from another log, each found and named by the check.
@Suite("Access log files")
struct AccessLogFileTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("access-log-\(UUID().uuidString)")
    let key = Curve25519.KeyAgreement.PrivateKey()
    /// The run secrets of the writers a test made (what the login keychain would keep).
    final class Runs: @unchecked Sendable { var secrets: [[UInt8]] = [] }
    let runs = Runs()

    /// A writer as keychaind makes one; its run secret is kept as the login keychain would keep it.
    func writer(_ directory: URL? = nil, fileSize: Int = 1 << 20, files: Int = 16) throws -> AccessLogWriter {
        let writer = try AccessLogWriter(directory: directory ?? self.directory, publicKey: key.publicKey,
                                         maximumFileSize: fileSize, maximumFiles: files)
        runs.secrets.append(writer.runSecret)
        return writer
    }

    var secrets: AccessLogSecrets { AccessLogSecrets(privateKey: Array(key.rawRepresentation), runSecrets: runs.secrets) }

    static func record(_ n: Int, label: String = "Mail password") -> AccessLogRecord {
        var record = AccessLogRecord(time: Date(timeIntervalSince1970: 1_800_000_000 + Double(n)),
                                     keychain: "/home/u/.local/share/keychains/login.keychain-db", action: .readSecret,
                                     outcome: .allowed, item: Item(itemClass: .genericPassword,
                                                                   attributes: ["labl": .string("\(label) \(n)")],
                                                                   uuid: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, UInt8(n)))))
        record.program = "/usr/bin/program-\(n % 3)"
        record.digest = String(repeating: "ab", count: 32)
        record.pid = Int32(1000 + n)
        record.frontEnd = .secretService
        return record
    }

    /// A log of `count` records in files of about `fileSize` bytes, written as keychaind writes it; its head.
    func writeLog(_ count: Int, fileSize: Int = 2_000, close: Bool = false) throws -> AccessLogHead {
        let writer = try writer(fileSize: fileSize)
        for n in 1...count { try writer.append([Self.record(n)]) }
        let head = writer.head
        if close { writer.close() }
        return head
    }

    func check(_ head: AccessLogHead?) -> AccessLogReport {
        AccessLogReader.read(directory: directory, secrets: secrets, head: head)
    }

    func files() -> [URL] { AccessLogFile.files(in: directory).map(\.url) }

    /// The frames of a file as byte ranges, so a test can cut, swap or edit whole records.
    func frameRanges(_ url: URL) throws -> (bytes: [UInt8], ranges: [Range<Int>]) {
        let bytes = try [UInt8](Data(contentsOf: url))
        var ranges: [Range<Int>] = []
        var offset = AccessLogFile.headerSize
        while offset + 4 <= bytes.count {
            let length = Int(bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) })
            let end = offset + 4 + length + AccessLogFile.macSize
            ranges.append(offset..<end)
            offset = end
        }
        return (bytes, ranges)
    }

    @Test("records come back in order, across files, filtered; nothing of them is in the files in the clear")
    func roundTrip() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let head = try writeLog(40)
        #expect(files().count > 3)
        let report = check(head)
        #expect(report.check.isIntact, "\(report.check)")
        #expect(report.check.records == 40)
        #expect(report.records.map(\.sequence) == Array(1...40))
        #expect(report.records[6] == { var r = Self.record(7); r.sequence = 7; return r }())
        let filtered = AccessLogReader.read(directory: directory, secrets: secrets, head: head,
                                            filter: AccessLogFilter(program: "program-1"))
        #expect(filtered.records.count == 14 && filtered.records.allSatisfy { $0.program == "/usr/bin/program-1" })
        let since = AccessLogReader.read(directory: directory, secrets: secrets, head: head,
                                         filter: AccessLogFilter(item: "Mail password 5"))
        #expect(since.records.map(\.sequence) == [5])
        for url in files() {
            let text = String(decoding: try Data(contentsOf: url), as: UTF8.self)
            #expect(!text.contains("Mail password") && !text.contains("program-") && !text.contains("login.keychain"))
        }
        // Without the log's private key nothing opens.
        let other = AccessLogReader.read(directory: directory, secrets: AccessLogSecrets(
            privateKey: Array(Curve25519.KeyAgreement.PrivateKey().rawRepresentation), runSecrets: runs.secrets), head: head)
        #expect(other.records.isEmpty)
    }

    @Test("a keychaind killed and started again carries the chain on; the unclosed file is a note, not a problem")
    func restartCarriesTheChain() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try writeLog(5, fileSize: 1 << 20)  // killed: never closed
        let writer = try writer()
        try writer.append([Self.record(6)])
        let report = check(writer.head)
        #expect(report.check.isIntact, "\(report.check)")
        #expect(report.records.map(\.sequence) == Array(1...6))
        #expect(report.check.notes.contains { $0.contains("was not closed") })
    }

    @Test("every single-byte change of every file is found", arguments: [false, true])
    func everyByteEdited(closed: Bool) throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let head = try writeLog(6, fileSize: 900, close: closed)
        for url in files() {
            let original = try Data(contentsOf: url)
            for offset in stride(from: 0, to: original.count, by: 1) {
                var edited = original
                edited[offset] ^= 0x01
                try edited.write(to: url)
                let report = check(closed ? nil : head)
                #expect(!report.check.isIntact, "\(url.lastPathComponent) byte \(offset) changed unnoticed")
                if report.check.isIntact { break }
            }
            try original.write(to: url)
        }
        #expect(check(closed ? nil : head).check.isIntact)
    }

    @Test("a record removed from the middle is named")
    func recordRemoved() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let head = try writeLog(6, fileSize: 1 << 20)
        let url = files()[0]
        let (bytes, ranges) = try frameRanges(url)
        try Data(Array(bytes[..<ranges[2].lowerBound]) + Array(bytes[ranges[2].upperBound...])).write(to: url)
        #expect(check(head).check.problem?.hasPrefix("record 3 removed") == true, "\(check(head).check)")
    }

    @Test("two records swapped are found out of order")
    func recordsReordered() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let head = try writeLog(6, fileSize: 1 << 20)
        let url = files()[0]
        let (bytes, ranges) = try frameRanges(url)
        let swapped = Array(bytes[..<ranges[1].lowerBound]) + Array(bytes[ranges[2]]) + Array(bytes[ranges[1]])
            + Array(bytes[ranges[2].upperBound...])
        try Data(swapped).write(to: url)
        let problem = check(head).check.problem ?? ""
        #expect(problem.hasPrefix("record 3 out of order: it comes before record 2"), "\(problem)")
    }

    @Test("records cut from the end of the file being written, or inside a record, are found")
    func tailCut() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let head = try writeLog(6, fileSize: 1 << 20)
        let url = files()[0]
        let (bytes, ranges) = try frameRanges(url)
        try Data(bytes[..<ranges[4].lowerBound]).write(to: url)
        #expect(check(head).check.problem?.contains("records 5…6 are missing") == true, "\(check(head).check)")
        try Data(bytes[..<(ranges[5].lowerBound + 10)]).write(to: url)
        #expect(check(head).check.problem?.contains("cut inside the record after 5") == true, "\(check(head).check)")
    }

    @Test("a closed file cut short, a file removed, or a file from another log spliced in breaks the chain")
    func filesCutRemovedSpliced() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let head = try writeLog(30)
        let all = files()
        #expect(all.count >= 4)
        let second = try Data(contentsOf: all[1])

        // Cut: the close record and the last record of the second file.
        let (bytes, ranges) = try frameRanges(all[1])
        try Data(bytes[..<ranges[ranges.count - 2].lowerBound]).write(to: all[1])
        #expect(check(head).check.problem?.contains("does not follow") == true, "\(check(head).check)")
        try second.write(to: all[1])
        #expect(check(head).check.isIntact)

        // Removed.
        try FileManager.default.removeItem(at: all[2])
        #expect(check(head).check.problem?.contains("is missing") == true, "\(check(head).check)")

        // Spliced: the third file of another log (same key, same numbering) put in its place.
        let elsewhere = directory.appendingPathExtension("other")
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let writer = try writer(elsewhere, fileSize: 2_000)
        for n in 1...30 { try writer.append([Self.record(n, label: "Other")]) }
        try FileManager.default.copyItem(at: AccessLogFile.files(in: elsewhere)[2].url, to: all[2])
        #expect(check(head).check.problem?.contains("does not follow") == true, "\(check(head).check)")
    }

    @Test("old files are rotated away beyond the limit; the check says so and holds")
    func rotation() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let writer = try writer(fileSize: 1_000, files: 3)
        for n in 1...60 { try writer.append([Self.record(n)]) }
        #expect(files().count == 3)
        let report = check(writer.head)
        #expect(report.check.isIntact, "\(report.check)")
        #expect(report.records.last?.sequence == 60)
        #expect(report.check.notes.contains { $0.contains("rotated away") })
    }

    @Test("planted files: a first sequence of 0, a frame numbered 2^64-1, a sign in the name: no crash, and named")
    func plantedFiles() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let zero = AccessLogFile.Header(index: 1, firstSequence: 0, previousChain: [UInt8](repeating: 0, count: 32),
                                        logKey: Array(key.publicKey.rawRepresentation),
                                        ephemeralKey: Array(Curve25519.KeyAgreement.PrivateKey().publicKey.rawRepresentation),
                                        runID: [UInt8](repeating: 0, count: 32))
        try Data(zero.bytes).write(to: directory.appendingPathComponent("access-log-000001"))
        #expect(check(nil).check.problem?.contains("damaged") == true)
        // A frame numbered 2^64-1 after a valid header: the writer starts after it without trapping.
        var maxed = zero
        maxed.firstSequence = 1
        var frame: [UInt8] = [0, 0, 0, 40] + [UInt8](repeating: 0xFF, count: 8) + [1] + [UInt8](repeating: 0, count: 31)
        frame += [UInt8](repeating: 0, count: 32)
        try Data(maxed.bytes + frame).write(to: directory.appendingPathComponent("access-log-000001"))
        try Data().write(to: directory.appendingPathComponent("access-log-+00005"))
        let writer = try writer()
        try writer.append([Self.record(1)])
        #expect(writer.head.file == 2 && writer.head.sequence == 1)
        #expect(check(writer.head).check.problem != nil)
    }

    @Test("a rotation that cannot open the next file fails closed: no call's record is dropped silently")
    func rotationFailsClosed() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let writer = try writer(fileSize: 1_000)
        // The next file's name is taken (another program put something there).
        try Data("in the way".utf8).write(to: directory.appendingPathComponent("access-log-000002"))
        var failures = 0
        for n in 1...20 {
            do { try writer.append([Self.record(n)]) } catch { failures += 1 }
        }
        #expect(failures > 0)
        // Once the way is clear, the writer carries on in a new file, and the chain holds to its head.
        try FileManager.default.removeItem(at: directory.appendingPathComponent("access-log-000002"))
        try writer.append([Self.record(99)])
        let report = check(writer.head)
        #expect(report.check.isIntact, "\(report.check)")
        #expect(report.records.count == 21 - failures)
    }

    @Test("a file made by another program with the log's public key (keys of its own, a chain that follows) cannot be authenticated")
    func forgedFile() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try writeLog(3, fileSize: 1 << 20, close: true)
        // The forger: the public key and the previous file's end are all it needs to make a file that chains on,
        // but not keychaind's run secret.
        let forger = try AccessLogWriter(directory: directory, publicKey: key.publicKey)
        try forger.append([Self.record(4, label: "Forged")])
        let report = check(forger.head)
        #expect(report.check.problem?.contains("cannot be authenticated") == true, "\(report.check)")
        #expect(!report.records.contains { $0.itemLabel?.hasPrefix("Forged") == true })
    }

    @Test("the checkpoint of a clean stop: records cut from the closed file while no keychaind runs are found")
    func checkpointAfterCleanStop() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let writer = try writer()
        for n in 1...5 { try writer.append([Self.record(n)]) }
        writer.close()
        var kept = secrets
        kept.checkpoint = writer.closedHead
        #expect(AccessLogReader.read(directory: directory, secrets: kept, head: nil).check.isIntact)
        // Cut the last record and the close frame: the file is still a well-formed, unclosed file.
        let url = files()[0]
        let (bytes, ranges) = try frameRanges(url)
        try Data(bytes[..<ranges[ranges.count - 2].lowerBound]).write(to: url)
        let problem = AccessLogReader.read(directory: directory, secrets: kept, head: nil).check.problem ?? ""
        #expect(problem.contains("changed after it was finished"), "\(problem)")
        // The file removed altogether.
        try FileManager.default.removeItem(at: url)
        let next = try self.writer()
        try next.append([Self.record(1)])
        #expect(AccessLogReader.read(directory: directory, secrets: kept, head: next.head).check.problem != nil)
    }

    @Test("what the login keychain keeps for the log round-trips; the first form (the key alone) still reads")
    func secretsEncoding() throws {
        var secrets = AccessLogSecrets(privateKey: Array(key.rawRepresentation))
        let added = secrets.add(run: [UInt8](repeating: 7, count: 32))
        let again = secrets.add(run: [UInt8](repeating: 7, count: 32))
        #expect(added && !again)
        secrets.checkpoint = AccessLogHead(file: 3, sequence: 99, chain: [UInt8](repeating: 9, count: 32))
        #expect(AccessLogSecrets(encoded: secrets.encoded) == secrets)
        #expect(AccessLogSecrets(encoded: Array(key.rawRepresentation))?.privateKey == Array(key.rawRepresentation))
        for _ in 0..<100 { _ = secrets.add(run: (0..<32).map { _ in UInt8.random(in: 0...255) }) }
        #expect(secrets.runSecrets.count == 64)
        #expect(AccessLogSecrets(encoded: Array(secrets.encoded.dropLast())) == nil)
    }

    @Test("a log begun in the first format (a seal per record) is still read, and goes on in the second across the upgrade")
    func firstFormatStillRead() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let old = try AccessLogWriter(directory: directory, publicKey: key.publicKey, maximumFileSize: 2_000,
                                      maximumFiles: 16, format: .sealed)
        runs.secrets.append(old.runSecret)
        for n in 1...12 { try old.append([Self.record(n)]) }
        old.close()
        let first = try [UInt8](Data(contentsOf: files()[0]))
        #expect(Array(first.prefix(8)) == Array("KCACLOG1".utf8))
        let new = try writer(fileSize: 2_000)
        for n in 13...20 { try new.append([Self.record(n)]) }
        #expect(try [UInt8](Data(contentsOf: files().last!)).prefix(8).elementsEqual("KCACLOG2".utf8))
        let report = check(new.head)
        #expect(report.check.isIntact, "\(report.check)")
        #expect(report.records.map(\.sequence) == Array(1...20))
        #expect(report.records[3].itemLabel == Self.record(4).itemLabel)

        // An edited record of the first format is still found.
        let url = files()[0]
        let (bytes, ranges) = try frameRanges(url)
        var edited = bytes
        edited[ranges[1].lowerBound + 20] ^= 0x40
        try Data(edited).write(to: url)
        #expect(check(new.head).check.problem?.contains("record 2 altered") == true, "\(check(new.head).check)")
    }

    @Test("the key stream: records across its 4 KiB pieces read back; the same record twice is two different ciphertexts")
    func keyStream() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let writer = try writer()
        let long = String(repeating: "long label ", count: 60)
        for n in 1...40 { try writer.append([Self.record(n % 2 == 0 ? 2 : n, label: n % 3 == 0 ? long : "Mail password")]) }
        try writer.append([Self.record(2), Self.record(2)])  // one call, two records
        let report = check(writer.head)
        #expect(report.check.isIntact, "\(report.check)")
        #expect(report.records.count == 42)
        #expect(report.records[2].itemLabel == "\(long) 3")
        let (bytes, ranges) = try frameRanges(files()[0])
        #expect(bytes.count > 3 * AccessLogFile.KeyStreamChunk.size)
        // Records 2 and 4 are the same record but for the sequence number: after it, nothing of their
        // ciphertexts may match (a key stream used twice would show as equal bytes).
        let second = Array(bytes[ranges[1]].dropFirst(4 + 17 + 8).dropLast(32))
        let fourth = Array(bytes[ranges[3]].dropFirst(4 + 17 + 8).dropLast(32))
        #expect(second.count == fourth.count)
        #expect(zip(second, fourth).filter { $0 == $1 }.count < second.count / 8)
    }

    @Test("a write that failed leaves a gap in the key stream, which the check takes; a stream used twice is named")
    func keyStreamGapAndReuse() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let writer = try writer()
        try writer.append([Self.record(1)])
        // As after a failed write: frames were made (the stream moved on), none reached the file.
        guard var lost = writer.currentKeys else { Issue.record("no file"); return }
        _ = try lost.frame(sequence: 2, kind: .record, plaintext: AccessLogCoding.encode(Self.record(2)))
        writer.skipKeyStream(to: lost)
        try writer.append([Self.record(2)])
        try writer.append([Self.record(3)])
        let report = check(writer.head)
        #expect(report.check.isIntact, "\(report.check)")
        #expect(report.records.map(\.sequence) == [1, 2, 3])

        // A writer that used the stream again (its offset moved back) is found, though every MAC holds.
        let other = directory.appendingPathExtension("reuse")
        defer { try? FileManager.default.removeItem(at: other) }
        let reusing = try self.writer(other)
        try reusing.append([Self.record(1)])
        guard var start = reusing.currentKeys else { Issue.record("no file"); return }
        start.streamOffset = 0
        start.streamChunk = AccessLogFile.KeyStreamChunk(index: .max, bytes: [])
        reusing.skipKeyStream(to: start)
        try reusing.append([Self.record(2)])
        let problem = AccessLogReader.read(directory: other, secrets: secrets, head: reusing.head).check.problem ?? ""
        #expect(problem.contains("record 2 reuses the key stream"), "\(problem)")
    }

    @Test("a record's item id is written as Foundation spells it, and every field reads back; a batch's frames are numbered in place")
    func recordCoding() throws {
        for _ in 0..<200 {
            let uuid = UUID()
            var text: [UInt8] = []
            AccessLogCoding.appendUUIDString(uuid, to: &text)
            #expect(String(decoding: text, as: UTF8.self) == uuid.uuidString)
        }
        var record = Self.record(7)
        record.item = UUID()
        record.status = -25293
        record.question = "consent"
        var decoded = AccessLogCoding.decode(AccessLogCoding.encode(record))
        #expect(decoded == record)
        record.item = nil
        record.itemClass = nil
        decoded = AccessLogCoding.decode(AccessLogCoding.encode(record))
        #expect(decoded == record)

        // One call's records in one write: each frame carries its own sequence number, inside the record too.
        defer { try? FileManager.default.removeItem(at: directory) }
        let writer = try writer()
        try writer.append([Self.record(1)])
        try writer.append((2...6).map { Self.record($0) })
        let report = check(writer.head)
        #expect(report.check.isIntact, "\(report.check)")
        #expect(report.records.map(\.sequence) == [1, 2, 3, 4, 5, 6])
        #expect(report.records.map(\.pid) == (1...6).map { Int32(1000 + $0) })
    }
}
