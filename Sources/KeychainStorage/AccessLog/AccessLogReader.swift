import Crypto
import Foundation
import KeychainCore

/// Reads and checks the access log with its private key: every record opened, its order, its chain and its MAC
/// checked, files followed from one to the next. What it reports first is what a person has to look at: the first
/// record or file that was altered, removed, reordered, spliced in or cut.
public enum AccessLogReader {
    /// The records of the log in `directory` that `filter` keeps, and the check. `secrets` are what the login
    /// keychain keeps (the private key, the runs' secrets, the last clean stop's checkpoint); `head` is where the
    /// writer stands (keychaind's own memory), so that a cut at the end of the current file shows; nil when no
    /// writer runs.
    public static func read(directory: URL, secrets: AccessLogSecrets, head: AccessLogHead?,
                            filter: AccessLogFilter = AccessLogFilter()) -> AccessLogReport {
        var check = AccessLogCheck()
        var records: [AccessLogRecord] = []
        let files = AccessLogFile.files(in: directory)
        guard let privateKey = secrets.key else {
            check.problem = "the log's key in the login keychain is damaged"
            return AccessLogReport(records: [], check: check)
        }
        let ownKey = Array(privateKey.publicKey.rawRepresentation)
        var runs: [[UInt8]: [UInt8]] = [:]
        for secret in secrets.runSecrets { runs[AccessLogFile.runID(of: secret)] = secret }
        let checkpoint = secrets.checkpoint
        var sawCheckpointFile = false
        // What the previous file ended on: its index, last sequence number, chain hash, and whether it was closed.
        var previous: (index: UInt32, sequence: UInt64, chain: [UInt8], closed: Bool)?
        func fail(_ problem: String) -> AccessLogReport {
            check.problem = problem
            return AccessLogReport(records: records, check: check)
        }
        for file in files {
            if let head, file.index > head.file { break }  // begun after the head was taken
            let name = file.url.lastPathComponent
            guard let bytes = AccessLogFile.contents(of: file.url) else { return fail("\(name) cannot be read") }
            let parsed = AccessLogFile.frames(of: bytes)
            guard let header = parsed.header, header.index == file.index, header.firstSequence >= 1,
                  header.firstSequence < AccessLogFile.maximumSequence
            else {
                return fail("\(name): its header is damaged or names another file")
            }
            check.files += 1
            if let previous {
                guard file.index == previous.index + 1 else {
                    return fail("\(AccessLogFile.name(previous.index + 1)) is missing (records after \(previous.sequence) removed)")
                }
                if !previous.closed {
                    // keychaind starts a new file at every start and closes the old one when it can; killed, it
                    // could not, and the next file carries on from what was left.
                    check.notes.append("\(AccessLogFile.name(previous.index)) was not closed (keychaind stopped without closing it) after record \(previous.sequence)")
                }
                guard header.previousChain == previous.chain, header.firstSequence == previous.sequence + 1 else {
                    return fail("\(name) does not follow \(AccessLogFile.name(previous.index)): "
                        + (previous.closed ? "a file was replaced or spliced in" : "records were cut from its end, or a file was replaced"))
                }
            } else if header.firstSequence > 1 || file.index > 1 {
                check.notes.append("records before \(header.firstSequence) were rotated away (the log keeps its newest files)")
            }
            // A file sealed to another key: not this log's, or written while the log's key was another (a replaced
            // log-key file; a key lost with a keychaind that ended before the login keychain could take it).
            guard header.logKey == ownKey,
                  let ephemeral = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: header.ephemeralKey),
                  let shared = try? privateKey.sharedSecretFromKeyAgreement(with: ephemeral)
            else { return fail("\(name) is sealed to another key: not this log's file") }
            // Its MACs need the run secret of the keychaind that wrote it: a file anyone else made has none here.
            guard let runSecret = runs[header.runID] else {
                return fail("\(name) cannot be authenticated: not written by keychaind (or by one that ended before "
                    + "the login keychain could keep its run secret)")
            }
            var keys: AccessLogFile.Keys? = AccessLogFile.Keys(shared: shared, header: header, runSecret: runSecret)
            let sequences = parsed.frames.map { AccessLogFile.sequence(of: $0.body) }
            var chain = Array(SHA256.hash(data: header.bytes))
            var expected = header.firstSequence
            var closed = false
            // Format 2: where the next frame's key stream must begin (each byte used once).
            var streamOffset: UInt64 = 0
            for frame in parsed.frames {
                // Where keychaind stood when the check began: what follows was written since.
                if let head, file.index == head.file, expected - 1 == head.sequence, !closed {
                    guard chain == head.chain else { return fail("\(name) was replaced") }
                    return AccessLogReport(records: records, check: check)
                }
                let sequence = AccessLogFile.sequence(of: frame.body)
                let kind = frame.body[8]
                guard sequence < AccessLogFile.maximumSequence else { return fail("record \(sequence) altered (\(name))") }
                if closed { return fail("\(name): data after its close record") }
                if kind == AccessLogFile.Kind.close.rawValue {
                    guard sequence == expected - 1 else { return fail("\(name): its close record is out of place") }
                } else {
                    if sequence > expected, sequences.contains(expected) {
                        return fail("record \(sequence) out of order: it comes before record \(expected) (\(name))")
                    }
                    if sequence > expected {
                        return fail("record \(expected)\(sequence - 1 > expected ? "…\(sequence - 1)" : "") removed (\(name))")
                    }
                    if sequence < expected { return fail("record \(sequence) out of order or repeated (\(name), after \(expected - 1))") }
                }
                chain = Array(SHA256.hash(data: chain + frame.body))
                if var current = keys {
                    let mac = current.advance(over: frame.body)
                    guard mac == frame.mac, let plain = current.open(frame.body) else {
                        return fail("record \(sequence) altered (\(name))")
                    }
                    guard kind == AccessLogFile.Kind.record.rawValue || plain.isEmpty else {
                        return fail("\(name): its close record holds data")
                    }
                    if header.format == .streamed {
                        // Authentic but before where the stream stood: a writer that used key stream twice. (After
                        // it is a gap: a write that failed, whose stream is not used again.)
                        let offset = AccessLogFile.streamOffset(of: frame.body)
                        guard offset >= streamOffset else {
                            return fail("record \(sequence) reuses the key stream (\(name))")
                        }
                        streamOffset = offset + UInt64(plain.count)
                    }
                    keys = current
                    if kind == AccessLogFile.Kind.record.rawValue {
                        guard var record = AccessLogCoding.decode(plain), record.sequence == sequence else {
                            return fail("record \(sequence) altered (\(name))")
                        }
                        record.sequence = sequence
                        check.records += 1
                        if filter.matches(record) { records.append(record) }
                    }
                }
                if kind == AccessLogFile.Kind.close.rawValue { closed = true } else { expected = sequence + 1 }
            }
            if let head, file.index == head.file, expected - 1 == head.sequence, !closed {
                guard chain == head.chain else { return fail("\(name) was replaced") }
                return AccessLogReport(records: records, check: check)
            }
            if parsed.partial { return fail("\(name) is cut inside the record after \(expected - 1)") }
            if let head, file.index == head.file {
                guard expected - 1 == head.sequence else {
                    return fail("the log is cut: records \(expected)…\(head.sequence) are missing from \(name)")
                }
                guard chain == head.chain else { return fail("\(name) was replaced") }
                return AccessLogReport(records: records, check: check)
            }
            // Where the log stood when keychaind last stopped cleanly: that file must end exactly there.
            if let checkpoint, checkpoint.file == file.index {
                sawCheckpointFile = true
                guard closed, expected - 1 == checkpoint.sequence, chain == checkpoint.chain else {
                    return fail("\(name) was changed after it was finished: records cut from its end, or the file replaced")
                }
            }
            previous = (file.index, expected - 1, chain, closed)
        }
        if let checkpoint, !sawCheckpointFile, let first = files.first?.index, checkpoint.file >= first,
           head.map({ checkpoint.file <= $0.file }) ?? true
        {
            return fail("\(AccessLogFile.name(checkpoint.file)) is missing: keychaind stopped after writing it")
        }
        if let head, head.sequence > 0, previous.map({ $0.index < head.file }) ?? true {
            return fail("\(AccessLogFile.name(head.file)), the file being written, is missing")
        }
        return AccessLogReport(records: records, check: check)
    }
}
