import Crypto
import Foundation
import KeychainCore

#if canImport(Glibc)
import Glibc
#endif

/// Where the log stands: the last record written and the chain hash after it, in which file. A check compares the
/// files against it, so that records cut from the end of the file being written are noticed.
public struct AccessLogHead: Sendable, Hashable {
    public var file: UInt32
    public var sequence: UInt64
    public var chain: [UInt8]
}

/// Appends records to the access log (``AccessLogFile``). Not thread-safe: keychaind keeps one behind a lock.
///
/// Each append is one `write(2)` before keychaind answers the call, so a kill at any instant loses no record of an
/// answer that went out (a file mapped shared would save the system call, but a program that truncates it would then
/// end keychaind with SIGBUS at its next record). A new file is started at every start (the last one's keys are gone
/// with the process that wrote it), when the current one passes ``maximumFileSize``, and when the log's key changes;
/// the oldest files go beyond ``maximumFiles``.
public final class AccessLogWriter {
    public let directory: URL
    public private(set) var publicKey: Curve25519.KeyAgreement.PublicKey
    let maximumFileSize: Int
    let maximumFiles: Int

    private var fd: Int32 = -1
    private var keys: AccessLogFile.Keys?
    private var index: UInt32 = 0
    private var size = 0
    private var sequence: UInt64 = 0
    /// The chain hash the last file ended on, while no file is open.
    private var lastChain: [UInt8] = []
    /// Where the last closed file ended (its close frame included): the checkpoint of a clean stop.
    public private(set) var closedHead: AccessLogHead?

    /// This run's secret (``AccessLogFile/Keys``): kept in the login keychain once it can take it
    /// (``AccessLogSecrets``), so that the reader can tell this run's files from files anyone could make.
    public let runSecret: [UInt8]

    /// The format new files are written in (the first one only in tests that check it is still read).
    let format: AccessLogFile.Format

    public convenience init(directory: URL, publicKey: Curve25519.KeyAgreement.PublicKey, maximumFileSize: Int = 1 << 20,
                            maximumFiles: Int = 16) throws(KeychainError) {
        try self.init(directory: directory, publicKey: publicKey, maximumFileSize: maximumFileSize,
                      maximumFiles: maximumFiles, format: .streamed)
    }

    init(directory: URL, publicKey: Curve25519.KeyAgreement.PublicKey, maximumFileSize: Int, maximumFiles: Int,
         format: AccessLogFile.Format) throws(KeychainError) {
        self.format = format
        runSecret = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        self.directory = directory
        self.publicKey = publicKey
        self.maximumFileSize = maximumFileSize
        self.maximumFiles = max(2, maximumFiles)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw KeychainError(.io, "cannot create the access log's directory \(directory.path)")
        }
        var previous: (sequence: UInt64, chain: [UInt8]) = (0, [UInt8](repeating: 0, count: 32))
        if let last = AccessLogFile.files(in: directory).last {
            index = last.index
            // A file without a readable header (a start killed at its first write) is carried over as it is:
            // the check reports it; the chain goes on from zero.
            if let bytes = AccessLogFile.contents(of: last.url), let end = AccessLogFile.end(of: bytes) {
                previous = end
            }
        }
        try startFile(after: previous)
    }

    deinit { if fd >= 0 { Glibc.close(fd) } }

    /// Where the log stands now.
    public var head: AccessLogHead { AccessLogHead(file: index, sequence: sequence, chain: keys?.chain ?? []) }

    /// Appends `records` (their sequence numbers are given here) in one write.
    public func append(_ records: [AccessLogRecord]) throws(KeychainError) {
        try append(encoded: Self.encode(records))
    }

    /// Records encoded for ``append(encoded:)``: work that needs no lock (keychaind encodes before it takes the
    /// writer's).
    public struct EncodedRecords: Sendable {
        fileprivate let plaintexts: [[UInt8]]
    }

    public static func encode(_ records: [AccessLogRecord]) -> EncodedRecords {
        EncodedRecords(plaintexts: records.map(AccessLogCoding.encode))
    }

    /// Appends records encoded by ``encode(_:)`` (their sequence numbers are given here) in one write.
    public func append(encoded records: EncodedRecords) throws(KeychainError) {
        let plaintexts = records.plaintexts
        guard !plaintexts.isEmpty else { return }
        // A writer without a file (a rotation or key change that could not open the next one) tries again, and
        // fails closed: no record, no answer.
        if keys == nil || fd < 0 { try startFile(after: (sequence, lastChain)) }
        guard sequence < AccessLogFile.maximumSequence - UInt64(plaintexts.count) else {
            throw KeychainError(.io, "the access log's sequence numbers are used up")
        }
        guard var keys else { throw KeychainError(.io, "the access log has no file to write to") }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(plaintexts.reduce(0) { $0 + $1.count + format.frameOverhead })
        var next = sequence
        do {
            for plaintext in plaintexts {
                next += 1
                try keys.appendFrame(to: &bytes, sequence: next, kind: .record, plaintext: plaintext, numbered: true)
            }
        } catch {
            throw KeychainError(.internalComponent, "cannot seal an access log record")
        }
        do {
            try write(bytes)
        } catch {
            skipKeyStream(to: keys)
            throw error
        }
        self.keys = keys
        sequence = next
        size += bytes.count
        // This call's records are written; a next file that cannot be opened fails the next call instead.
        if size >= maximumFileSize { try? rotate() }
    }

    /// After a write that failed: nothing of it stays, but the key stream its frames used (up to where `used`
    /// stands) is not used again; the next frame leaves a gap in the stream's offsets.
    func skipKeyStream(to used: AccessLogFile.Keys) {
        keys?.streamOffset = used.streamOffset
        keys?.streamChunk = used.streamChunk
    }

    /// A copy of the current file's keys, for a test that makes frames without writing them.
    var currentKeys: AccessLogFile.Keys? { keys }

    /// Seals the log to `key` from the next record on (a new file).
    public func use(_ key: Curve25519.KeyAgreement.PublicKey) throws(KeychainError) {
        guard key.rawRepresentation != publicKey.rawRepresentation else { return }
        publicKey = key
        try rotate()
    }

    /// Ends the current file with its close frame (a clean stop).
    /// - Returns: the chain hash the file ends on (the next file's header carries it).
    @discardableResult
    public func close() -> [UInt8] {
        defer { closedHead = AccessLogHead(file: index, sequence: sequence, chain: lastChain) }
        guard fd >= 0, var keys else { return [] }
        if let frame = try? keys.frame(sequence: sequence, kind: .close, plaintext: []) {
            try? write(frame)
        }
        fsync(fd)
        Glibc.close(fd)
        fd = -1
        self.keys = nil
        lastChain = keys.chain
        return keys.chain
    }

    private func rotate() throws(KeychainError) {
        let last = sequence
        let chain = close()
        try startFile(after: (last, chain))
        removeOldFiles()
    }

    private func startFile(after previous: (sequence: UInt64, chain: [UInt8])) throws(KeychainError) {
        guard index < AccessLogFile.maximumIndex, previous.sequence < AccessLogFile.maximumSequence else {
            throw KeychainError(.io, "the access log's file numbers are used up")
        }
        let index = index + 1  // taken only once the file is there
        let ephemeral = Curve25519.KeyAgreement.PrivateKey()
        let header = AccessLogFile.Header(format: format, index: index, firstSequence: previous.sequence + 1,
                                          previousChain: previous.chain.count == 32 ? previous.chain : [UInt8](repeating: 0, count: 32),
                                          logKey: Array(publicKey.rawRepresentation),
                                          ephemeralKey: Array(ephemeral.publicKey.rawRepresentation),
                                          runID: AccessLogFile.runID(of: runSecret))
        guard let shared = try? ephemeral.sharedSecretFromKeyAgreement(with: publicKey) else {
            throw KeychainError(.internalComponent, "the access log's key is not usable")
        }
        let path = directory.appendingPathComponent(AccessLogFile.name(index)).path
        let opened = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard opened >= 0 else { throw KeychainError(.io, "cannot create \(path)") }
        fd = opened
        self.index = index
        sequence = previous.sequence
        keys = AccessLogFile.Keys(shared: shared, header: header, runSecret: runSecret)
        size = 0  // a header written in part is cut back to nothing
        do {
            try write(header.bytes)
        } catch {
            // No file without its header: it goes, its number is not taken, and the next call starts it again.
            Glibc.close(opened)
            unlink(path)
            fd = -1
            keys = nil
            self.index = index - 1
            sequence = previous.sequence
            lastChain = previous.chain
            throw error
        }
        fsync(fd)
        size = header.bytes.count
    }

    /// Writes `bytes` whole or not at all: a short write (a full disk) is cut back, so that the file never holds
    /// a fragment that every later frame would follow.
    private func write(_ bytes: [UInt8]) throws(KeychainError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let reason = String(cString: strerror(errno))
                if offset > 0 { _ = ftruncate(fd, off_t(size)) }
                throw KeychainError(.io, "the access log cannot be written (\(reason))")
            }
            offset += n
        }
    }

    /// The oldest files beyond ``maximumFiles``: only ones before the current file, never it.
    private func removeOldFiles() {
        let older = AccessLogFile.files(in: directory).filter { $0.index < index }
        guard older.count >= maximumFiles else { return }
        for file in older.prefix(older.count - (maximumFiles - 1)) { try? FileManager.default.removeItem(at: file.url) }
    }
}
