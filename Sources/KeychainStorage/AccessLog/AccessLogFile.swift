import Crypto
import _CryptoExtras
import Foundation
import KeychainCore

/// The access log's files (docs/FILE-FORMAT.md "Access log"). The log is a chain of files `access-log-NNNNNN`, each
/// a header and frames:
///
/// - **Header** (148 bytes, in the clear): magic `KCACLOG2` (`KCACLOG1`: the first format, still read), the file's
///   index, its first record's sequence number, the chain hash the previous file ended on, the log's public key,
///   this file's ephemeral public key, and the run id of the keychaind that wrote it.
/// - **Keys**: X25519 between the ephemeral key and the log's key, then HKDF salted with the header's SHA-256: one
///   key encrypts the records (so keychaind writes with every keychain locked, and only the holder of the log's
///   private key, kept in the login keychain, reads), another is the first MAC key.
/// - **Frame**: length (4), then the body (sequence number 8, kind 1, the record encrypted), then SHA-256(MAC key ‖
///   chain hash so far). The chain hash is SHA-256 of the previous one and the body; the MAC key is replaced by
///   SHA-256 of itself after every frame and the old one forgotten, so a program that later steals keychaind's
///   current key cannot rewrite an earlier record unnoticed.
/// - **Encryption**: format 2 XORs each record with the file's AES-256-CTR key stream at an offset the body carries
///   (the stream made 4 KiB at a time, every byte used once); the MAC chain authenticates it. Format 1 sealed each
///   record with AES-256-GCM: a key schedule and a tag per record, before every answer, for an integrity the MAC
///   chain already gives.
/// - A **close** frame ends a file that keychaind finished (rotation, a clean stop): the next file's header carries
///   the chain on.
enum AccessLogFile {
    /// The file formats: 1 sealed each record with AES-GCM (read only), 2 encrypts with a key stream.
    enum Format: UInt8, Sendable { case sealed = 1, streamed = 2 }

    static func magic(_ format: Format) -> [UInt8] { Array("KCACLOG".utf8) + [0x30 + format.rawValue] }
    static let headerSize = 8 + 4 + 8 + 32 + 32 + 32 + 32
    static let macSize = 32
    /// No record is near this; a larger length is damage.
    static let maximumBody = 64 * 1024

    enum Kind: UInt8 { case record = 1, close = 2 }

    struct Header: Equatable {
        var format: Format
        var index: UInt32
        var firstSequence: UInt64
        var previousChain: [UInt8]
        var logKey: [UInt8]
        var ephemeralKey: [UInt8]
        /// Names the run secret of the keychaind that wrote the file (``AccessLogFile/runID(of:)``).
        var runID: [UInt8]

        var bytes: [UInt8] {
            var out = AccessLogFile.magic(format)
            withUnsafeBytes(of: index.bigEndian) { out.append(contentsOf: $0) }
            withUnsafeBytes(of: firstSequence.bigEndian) { out.append(contentsOf: $0) }
            out += previousChain + logKey + ephemeralKey + runID
            return out
        }

        init(format: Format = .streamed, index: UInt32, firstSequence: UInt64, previousChain: [UInt8],
             logKey: [UInt8], ephemeralKey: [UInt8], runID: [UInt8]) {
            self.format = format
            self.index = index
            self.firstSequence = firstSequence
            self.previousChain = previousChain
            self.logKey = logKey
            self.ephemeralKey = ephemeralKey
            self.runID = runID
        }

        init?(_ bytes: [UInt8]) {
            guard bytes.count >= AccessLogFile.headerSize,
                  let format = [Format.streamed, .sealed].first(where: { bytes[0..<8].elementsEqual(AccessLogFile.magic($0)) })
            else { return nil }
            self.format = format
            index = bytes[8..<12].reduce(0) { $0 << 8 | UInt32($1) }
            firstSequence = bytes[12..<20].reduce(0) { $0 << 8 | UInt64($1) }
            previousChain = Array(bytes[20..<52])
            logKey = Array(bytes[52..<84])
            ephemeralKey = Array(bytes[84..<116])
            runID = Array(bytes[116..<148])
        }
    }

    /// The keys of one file, from the shared secret of its ephemeral key and the log's key.
    ///
    /// The MAC is a keyed SHA-256 of the fixed-length chain value rather than HMAC: sound for input of one fixed
    /// length, and without a key object per record (this runs before every answer keychaind gives).
    struct Keys {
        let format: Format
        /// Format 2: the key stream's key; format 1: the records' AES-GCM key.
        let encryption: SymmetricKey
        /// The current MAC key; replaced by SHA-256("next" ‖ key) after every frame and never kept.
        var mac: [UInt8]
        /// The chain hash so far (starts as the header's digest).
        var chain: [UInt8]
        let headerDigest: [UInt8]
        /// Format 2, writing: the key stream's next unused byte, and the chunk it falls in (made when first needed).
        var streamOffset: UInt64 = 0
        var streamChunk = KeyStreamChunk(index: .max, bytes: [])

        /// - Parameter runSecret: the writing keychaind's run secret: the first MAC key needs it, so that only
        ///   keychaind (and, once it is stored in the login keychain, the reader) can make a file's MACs. The
        ///   shared secret alone would not do: anyone can agree one with the public log key.
        init(shared: SharedSecret, header: Header, runSecret: [UInt8]) {
            let digest = Array(SHA256.hash(data: header.bytes))
            format = header.format
            headerDigest = digest
            let label = header.format == .sealed ? "access-log records" : "access-log stream"
            encryption = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: digest,
                                                        sharedInfo: Array(label.utf8), outputByteCount: 32)
            mac = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: digest,
                                                 sharedInfo: Array("access-log mac".utf8) + runSecret, outputByteCount: 32)
                .withUnsafeBytes { Array($0) }
            chain = digest
        }

        /// The frame for `plaintext`, advancing the chain, the MAC key and the key stream.
        mutating func frame(sequence: UInt64, kind: Kind, plaintext: [UInt8]) throws -> [UInt8] {
            var out: [UInt8] = []
            try appendFrame(to: &out, sequence: sequence, kind: kind, plaintext: plaintext)
            return out
        }

        /// Appends the frame for `plaintext` to `out`, advancing the chain, the MAC key and the key stream. Built in
        /// place, without a buffer of its own: this runs under the writer's lock before every answer.
        /// - Parameter numbered: the plaintext is an encoded record whose first field takes `sequence`
        ///   (``AccessLogCoding/setSequence(_:in:at:)``), set here rather than in a copy of it.
        mutating func appendFrame(to out: inout [UInt8], sequence: UInt64, kind: Kind, plaintext: [UInt8],
                                  numbered: Bool = false) throws {
            let start = out.count
            switch format {
            case .streamed:
                let bodyLength = 9 + 8 + plaintext.count
                out.reserveCapacity(start + 4 + bodyLength + AccessLogFile.macSize)
                withUnsafeBytes(of: UInt32(bodyLength).bigEndian) { out.append(contentsOf: $0) }
                AccessLogFile.appendPrefix(sequence, kind, to: &out)
                withUnsafeBytes(of: streamOffset.bigEndian) { out.append(contentsOf: $0) }
                let recordStart = out.count
                out.append(contentsOf: plaintext)
                if numbered { AccessLogCoding.setSequence(sequence, in: &out, at: recordStart) }
                try streamChunk.apply(to: &out, from: recordStart, at: streamOffset, key: encryption)
                streamOffset += UInt64(plaintext.count)
            case .sealed:
                var plaintext = plaintext
                if numbered { AccessLogCoding.setSequence(sequence, in: &plaintext, at: 0) }
                let prefix = AccessLogFile.prefix(sequence, kind)
                let sealed = try AES.GCM.seal(plaintext, using: encryption, nonce: AccessLogFile.nonce(sequence, kind),
                                              authenticating: headerDigest + prefix)
                let bodyLength = prefix.count + sealed.ciphertext.count + 16
                withUnsafeBytes(of: UInt32(bodyLength).bigEndian) { out.append(contentsOf: $0) }
                out.append(contentsOf: prefix)
                out.append(contentsOf: sealed.ciphertext)
                out.append(contentsOf: sealed.tag)
            }
            let tag = out.withUnsafeBytes { advance(overBody: UnsafeRawBufferPointer(rebasing: $0[(start + 4)...])) }
            tag.withUnsafeBytes { out.append(contentsOf: $0) }
        }

        /// The MAC of `body` at this point of the chain, SHA-256(key ‖ chain) (a prefix MAC is sound for input of
        /// one fixed length); moves the chain and the key on.
        mutating func advance(over body: some DataProtocol) -> [UInt8] {
            let bytes = Array(body)
            return bytes.withUnsafeBytes { Array(advance(overBody: $0)) }
        }

        /// ``advance(over:)`` without copies: the chain and the key are replaced in place.
        mutating func advance(overBody body: UnsafeRawBufferPointer) -> SHA256Digest {
            var hasher = SHA256()
            chain.withUnsafeBytes { hasher.update(bufferPointer: $0) }
            hasher.update(bufferPointer: body)
            Self.replace(&chain, with: hasher.finalize())
            var tagger = SHA256()
            mac.withUnsafeBytes { tagger.update(bufferPointer: $0) }
            chain.withUnsafeBytes { tagger.update(bufferPointer: $0) }
            let tag = tagger.finalize()
            var next = SHA256()
            Self.nextLabel.withUnsafeBytes { next.update(bufferPointer: $0) }
            mac.withUnsafeBytes { next.update(bufferPointer: $0) }
            Self.replace(&mac, with: next.finalize())
            return tag
        }

        /// Overwrites a 32-byte value with a digest (a new array only when the old one is shared).
        private static func replace(_ value: inout [UInt8], with digest: SHA256Digest) {
            digest.withUnsafeBytes { new in
                if value.count == new.count {
                    value.withUnsafeMutableBytes { $0.copyMemory(from: new) }
                } else {
                    value = Array(new)
                }
            }
        }

        static let nextLabel = Array("next".utf8)

        /// The record in `body`, whose MAC the caller has checked (format 2 relies on it: the stream carries no
        /// tag of its own).
        mutating func open(_ body: [UInt8]) -> [UInt8]? {
            switch format {
            case .streamed:
                guard body.count >= 9 + 8, Kind(rawValue: body[8]) != nil else { return nil }
                let offset = AccessLogFile.streamOffset(of: body)
                guard offset <= AccessLogFile.maximumStreamOffset else { return nil }
                var plain = Array(body[17...])
                guard (try? streamChunk.apply(to: &plain, from: 0, at: offset, key: encryption)) != nil else { return nil }
                return plain
            case .sealed:
                guard body.count >= 9 + 16 else { return nil }
                let ciphertext = body[9..<(body.count - 16)]
                let tag = body[(body.count - 16)...]
                guard let kind = Kind(rawValue: body[8]),
                      let box = try? AES.GCM.SealedBox(nonce: AccessLogFile.nonce(AccessLogFile.sequence(of: body), kind),
                                                          ciphertext: ciphertext, tag: tag),
                      let plain = try? AES.GCM.open(box, using: encryption, authenticating: headerDigest + body[0..<9])
                else { return nil }
                return Array(plain)
            }
        }
    }

    /// One 4 KiB piece of a file's key stream: AES-256-CTR from the counter block (chunk index ‖ 0⁸), so that a
    /// chunk's 256 blocks never meet another chunk's. Made once for about fifteen records.
    struct KeyStreamChunk {
        static let size = 4096
        var index: UInt64
        var bytes: [UInt8]

        /// XORs `buffer[from...]` with the key stream from stream offset `offset` on, making chunks as it goes.
        mutating func apply(to buffer: inout [UInt8], from start: Int, at offset: UInt64, key: SymmetricKey) throws {
            var position = offset
            var at = start
            while at < buffer.count {
                let wanted = position / UInt64(Self.size)
                if wanted != index { self = try Self(index: wanted, key: key) }
                let within = Int(position % UInt64(Self.size))
                let count = min(Self.size - within, buffer.count - at)
                bytes.withUnsafeBufferPointer { stream in
                    buffer.withUnsafeMutableBufferPointer { out in
                        for i in 0..<count { out[at + i] ^= stream[within + i] }
                    }
                }
                at += count
                position += UInt64(count)
            }
        }

        init(index: UInt64, bytes: [UInt8]) {
            self.index = index
            self.bytes = bytes
        }

        init(index: UInt64, key: SymmetricKey) throws {
            var counter = [UInt8](repeating: 0, count: 16)
            withUnsafeBytes(of: index.bigEndian) { counter.replaceSubrange(0..<8, with: $0) }
            let stream = try AES._CTR.encrypt([UInt8](repeating: 0, count: Self.size), using: key,
                                              nonce: AES._CTR.Nonce(nonceBytes: counter))
            self.init(index: index, bytes: Array(stream))
        }
    }

    /// What a header names a run secret by.
    static func runID(of secret: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: Array("access-log run".utf8) + secret)) }

    static func prefix(_ sequence: UInt64, _ kind: Kind) -> [UInt8] {
        var out: [UInt8] = []
        appendPrefix(sequence, kind, to: &out)
        return out
    }

    /// A frame body's first 9 bytes: sequence number, kind.
    static func appendPrefix(_ sequence: UInt64, _ kind: Kind, to out: inout [UInt8]) {
        withUnsafeBytes(of: sequence.bigEndian) { out.append(contentsOf: $0) }
        out.append(kind.rawValue)
    }

    static func sequence(of body: [UInt8]) -> UInt64 { body[0..<8].reduce(0) { $0 << 8 | UInt64($1) } }

    /// Format 2: where in the key stream a frame's record begins (the frame's length is checked).
    static func streamOffset(of body: [UInt8]) -> UInt64 { body[9..<17].reduce(0) { $0 << 8 | UInt64($1) } }

    /// kind ‖ 0³ ‖ sequence: the close frame carries its file's last sequence number, under the same key.
    static func nonce(_ sequence: UInt64, _ kind: Kind) -> AES.GCM.Nonce {
        var bytes: [UInt8] = [kind.rawValue, 0, 0, 0]
        withUnsafeBytes(of: sequence.bigEndian) { bytes.append(contentsOf: $0) }
        return try! AES.GCM.Nonce(data: bytes)  // 12 bytes: always valid
    }

    static func name(_ index: UInt32) -> String { String(format: "access-log-%06u", index) }

    /// Six digits name a file; sequence numbers stay far from overflow (a forged file cannot make them wrap).
    static let maximumIndex: UInt32 = 999_999
    static let maximumSequence: UInt64 = 1 << 62
    /// No file's key stream goes near this (files are about 1 MiB); a larger offset is damage.
    static let maximumStreamOffset: UInt64 = 1 << 40

    /// The log's files in `directory`, by index: `access-log-` and exactly six ASCII digits.
    static func files(in directory: URL) -> [(index: UInt32, url: URL)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.compactMap { name -> (UInt32, URL)? in
            let digits = name.utf8.dropFirst(11)
            guard name.hasPrefix("access-log-"), digits.count == 6, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let index = UInt32(name.dropFirst(11))
            else { return nil }
            return (index, directory.appendingPathComponent(name))
        }.sorted { $0.0 < $1.0 }
    }

    /// A log file's bytes: a regular file only (never a FIFO or device a program put there), at most what 2 files'
    /// worth of frames can be.
    static func contents(of url: URL) -> [UInt8]? {
        let fd = open(url.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= 64 << 20 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            offset += n
        }
        return Array(bytes.prefix(offset))
    }

    /// A file's frames as far as they are whole: each body with its MAC, and whether bytes were left over.
    struct Frames {
        var header: Header?
        var frames: [(body: [UInt8], mac: [UInt8])] = []
        /// Bytes after the last whole frame (a cut inside a frame).
        var partial = false
    }

    static func frames(of bytes: [UInt8]) -> Frames {
        var result = Frames()
        guard let header = Header(bytes) else { return result }
        result.header = header
        var offset = headerSize
        while offset < bytes.count {
            guard offset + 4 <= bytes.count else { result.partial = true; break }
            let length = Int(bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) })
            guard length >= header.format.minimumBody, length <= maximumBody, offset + 4 + length + macSize <= bytes.count else {
                result.partial = true
                break
            }
            let body = Array(bytes[(offset + 4)..<(offset + 4 + length)])
            let mac = Array(bytes[(offset + 4 + length)..<(offset + 4 + length + macSize)])
            result.frames.append((body, mac))
            offset += 4 + length + macSize
        }
        return result
    }

    /// The chain hash a file ends on and its last sequence number, computed without any key (for the next file's
    /// header).
    static func end(of bytes: [UInt8]) -> (sequence: UInt64, chain: [UInt8])? {
        let parsed = frames(of: bytes)
        guard let header = parsed.header else { return nil }
        guard header.firstSequence >= 1, header.firstSequence < maximumSequence else { return nil }
        var chain = Array(SHA256.hash(data: header.bytes))
        var last = header.firstSequence - 1
        for frame in parsed.frames {
            let number = sequence(of: frame.body)
            // Only frames that follow in order (a record: the next number; the close: the same) carry the chain.
            guard number == last + 1 || (frame.body[8] == Kind.close.rawValue && number == last) else { break }
            chain = Array(SHA256.hash(data: chain + frame.body))
            last = number
        }
        return (last, chain)
    }
}

extension AccessLogFile.Format {
    /// A close frame's body: sequence and kind, then the stream offset (2) or the empty plaintext's tag (1).
    var minimumBody: Int { self == .streamed ? 9 + 8 : 9 + 16 }

    /// A frame's bytes besides its record: length, the minimum body, the MAC.
    var frameOverhead: Int { 4 + minimumBody + AccessLogFile.macSize }
}
