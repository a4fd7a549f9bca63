import Crypto
import _CryptoExtras
import Foundation
import KeychainCore

#if canImport(Glibc)
import Glibc
#endif

/// The backup file (docs/FILE-FORMAT.md "Backup file"): a header, one sealed record per item, and a sealed end
/// record that counts them. Read and written as a stream, a record at a time, so a backup of any size needs little
/// memory.
///
/// Every record is AES-256-GCM under a key derived from the backup password (scrypt, then HKDF), with the header's
/// digest and the record's position in its associated data: a record cannot be altered, moved, dropped or taken
/// from another backup, and a file cut short lacks its end record. `…ThisDeviceOnly` items are sealed under a key
/// that also needs this device's key (never exported), so they open only where they were made.
enum BackupArchive {
    static let magic = Array("KCBACKUP".utf8)
    static let version: UInt8 = 1
    /// What the header's check opens to under the right password: a wrong one is told from a damaged file.
    static let checkPlaintext = Array("swift-keychain backup 1".utf8)
    /// A record carries one item: a secret of at most 4 MiB and its attributes (a writer refuses a larger one, so
    /// that every backup it finishes restores).
    static let maximumRecord = ItemRules.maximumSecretSize + (4 << 20)

    enum RecordKind: UInt8 {
        case end = 0
        case portable = 1
        case thisDevice = 2
    }

    /// The header's clear fields.
    struct Header {
        var backupID: UUID
        /// Seconds since 1970 when the backup was made.
        var created: Int64
        /// Which device made it (derived from its device key: not the key, and the same for every backup of it).
        var sourceDevice: [UInt8]
        var kdf: KDFParameters
        var salt: [UInt8]

        var fields: [UInt8] {
            var out: [UInt8] = []
            withUnsafeBytes(of: backupID.uuid) { out.append(contentsOf: $0) }
            withUnsafeBytes(of: created.bigEndian) { out.append(contentsOf: $0) }
            out.append(contentsOf: sourceDevice)
            out.append(UInt8(kdf.id))
            out.append(UInt8(kdf.n.trailingZeroBitCount))
            out.append(UInt8(kdf.r))
            out.append(UInt8(kdf.p))
            out.append(contentsOf: salt)
            return out
        }

        static let fieldsLength = 16 + 8 + 16 + 4 + 32

        init(backupID: UUID, created: Int64, sourceDevice: [UInt8], kdf: KDFParameters, salt: [UInt8]) {
            self.backupID = backupID
            self.created = created
            self.sourceDevice = sourceDevice
            self.kdf = kdf
            self.salt = salt
        }

        init(fields b: [UInt8]) throws(KeychainError) {
            guard b.count == Self.fieldsLength else { throw .decode("the backup's header is damaged") }
            backupID = UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                                   b[13], b[14], b[15]))
            created = b[16..<24].reduce(0) { $0 << 8 | Int64($1) }
            sourceDevice = Array(b[24..<40])
            guard b[41] < 31 else { throw .decode("the backup's KDF parameters are not valid") }
            kdf = KDFParameters(id: Int(b[40]), n: 1 << Int(b[41]), r: Int(b[42]), p: Int(b[43]))
            salt = Array(b[44..<76])
        }
    }

    /// The keys one backup password gives for one backup.
    struct Keys {
        let check: SymmetricKey
        let items: SymmetricKey

        init(password: SecretBytes, header: Header) throws(KeychainError) {
            guard header.kdf.isAcceptable else { throw .decode("the backup's KDF parameters are too weak") }
            let passwordKey: SymmetricKey
            do {
                passwordKey = try password.withUnsafeBytes { pw in
                    try KDF.Scrypt.deriveKey(from: pw, salt: header.salt, outputByteCount: 32, rounds: header.kdf.n,
                                             blockSize: header.kdf.r, parallelism: header.kdf.p)
                }
            } catch {
                throw KeychainError(.internalComponent, "scrypt failed")
            }
            self.init(passwordKey: passwordKey, header: header)
        }

        /// From the password's scrypt output (the fuzzer gives one directly: no scrypt per input).
        init(passwordKey: SymmetricKey, header: Header) {
            let salt = withUnsafeBytes(of: header.backupID.uuid) { Array($0) }
            check = Sealing.hkdf(passwordKey, salt: salt, info: Array("kcb1/check".utf8))
            items = Sealing.hkdf(passwordKey, salt: salt, info: Array("kcb1/items".utf8))
        }

        /// The key of `…ThisDeviceOnly` records: the backup password and this device's key, both.
        func thisDevice(deviceKey: SymmetricKey, header: Header) -> SymmetricKey {
            let salt = withUnsafeBytes(of: header.backupID.uuid) { Array($0) }
            let devicePart = Sealing.hkdf(deviceKey, salt: salt, info: Array("kcb1/device".utf8))
            return Sealing.hkdf(items, salt: devicePart.bytes, info: Array("kcb1/this-device".utf8))
        }
    }

    /// The device's name in backups: 16 bytes derived from its key, the same for every backup it makes.
    static func deviceID(_ deviceKey: SymmetricKey) -> [UInt8] {
        Array(Sealing.hkdf(deviceKey, salt: [UInt8](), info: Array("kcb1/device-id".utf8)).bytes.prefix(16))
    }

    static func checkAAD(_ fields: [UInt8]) -> [UInt8] {
        var aad = AAD("kcb1/check")
        aad.append(fields)
        return aad.bytes
    }

    static func recordAAD(headerDigest: [UInt8], index: Int64, kind: RecordKind) -> [UInt8] {
        var aad = AAD("kcb1/record")
        aad.append(headerDigest)
        aad.append(index)
        aad.append([kind.rawValue])
        return aad.bytes
    }

    // MARK: - Item records

    /// An item and its secret, as a record holds them.
    static func encodeItem(_ item: Item, secret: SecretBytes) -> [UInt8] {
        var out: [UInt8] = []
        append(Array(item.itemClass.rawValue.utf8), to: &out)
        withUnsafeBytes(of: item.uuid.uuid) { out.append(contentsOf: $0) }
        append(ItemCodec.encode(item), to: &out)
        secret.withUnsafeBytes { bytes in
            withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { out.append(contentsOf: $0) }
            out.append(contentsOf: bytes)
        }
        return out
    }

    static func decodeItem(_ bytes: Data) throws(KeychainError) -> (Item, SecretBytes) {
        var reader = ByteReader(bytes: bytes)
        guard let classBytes = reader.blob(), let name = String(validating: classBytes, as: UTF8.self),
            let itemClass = ItemClass(rawValue: name), let u = reader.take(16), let meta = reader.blob(),
            let secret = reader.blob(), reader.atEnd
        else { throw .decode("a backup record is damaged") }
        let uuid = UUID(uuid: (u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                               u[14], u[15]))
        let item = try ItemCodec.decode(Data(meta), itemClass: itemClass, uuid: uuid)
        let result = secret.withUnsafeBytes { SecretBytes(copying: $0) }
        reader.wipe()
        return (item, result)
    }

    /// The end record's counts: what the backup holds and what it left out.
    static func encodeEnd(_ report: BackupReport) -> [UInt8] {
        var out: [UInt8] = []
        for n in [report.items, report.thisDeviceOnly, report.leftOutPasscode, report.leftOutApplicationPassword] {
            withUnsafeBytes(of: UInt64(n).bigEndian) { out.append(contentsOf: $0) }
        }
        return out
    }

    static func decodeEnd(_ bytes: Data) throws(KeychainError) -> BackupReport {
        guard bytes.count == 32 else { throw .decode("the backup's end record is damaged") }
        let b = [UInt8](bytes)
        func count(_ i: Int) throws(KeychainError) -> Int {
            let value = b[(i * 8)..<(i * 8 + 8)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            guard value <= UInt64(Int32.max) else { throw .decode("the backup's end record is damaged") }
            return Int(value)
        }
        return BackupReport(items: try count(0), thisDeviceOnly: try count(1), leftOutPasscode: try count(2),
                            leftOutApplicationPassword: try count(3))
    }

    private static func append(_ bytes: [UInt8], to out: inout [UInt8]) {
        withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { out.append(contentsOf: $0) }
        out.append(contentsOf: bytes)
    }

    struct ByteReader {
        var bytes: [UInt8]
        var offset = 0
        init(bytes: Data) { self.bytes = [UInt8](bytes) }
        /// Zeroes the copy this reader made (it held a secret).
        mutating func wipe() { for i in bytes.indices { bytes[i] = 0 } }
        var atEnd: Bool { offset == bytes.count }
        mutating func take(_ n: Int) -> [UInt8]? {
            guard n >= 0, bytes.count - offset >= n else { return nil }
            defer { offset += n }
            return Array(bytes[offset..<offset + n])
        }
        mutating func blob() -> [UInt8]? {
            guard let l = take(4) else { return nil }
            return take(Int(l.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }))
        }
    }
}

// MARK: - Writing

extension BackupArchive {
    /// Writes a backup into a new private file beside its destination, then moves it into place: the destination
    /// is either its old self or the whole new backup, never part of one.
    final class Writer {
        let header: Header
        let headerDigest: [UInt8]
        let keys: Keys
        private let thisDeviceKey: SymmetricKey
        private let destination: String
        private let temporary: String
        private let fd: Int32
        private var buffer: [UInt8] = []
        private var index: Int64 = 0
        private var finished = false

        convenience init(destination: String, password: SecretBytes, kdf: KDFParameters, deviceKey: SymmetricKey,
                         now: Date) throws(KeychainError)
        {
            try self.init(destination: destination, kdf: kdf, deviceKey: deviceKey, now: now) { header throws(KeychainError) in
                try Keys(password: password, header: header)
            }
        }

        init(destination: String, kdf: KDFParameters, deviceKey: SymmetricKey, now: Date,
             keys makeKeys: (Header) throws(KeychainError) -> Keys) throws(KeychainError)
        {
            var salt = [UInt8](repeating: 0, count: 32)
            for i in salt.indices { salt[i] = UInt8.random(in: 0...255) }
            header = Header(backupID: UUID(), created: Int64(now.timeIntervalSince1970),
                            sourceDevice: BackupArchive.deviceID(deviceKey), kdf: kdf, salt: salt)
            keys = try makeKeys(header)
            thisDeviceKey = keys.thisDevice(deviceKey: deviceKey, header: header)
            self.destination = destination
            // Only a backup is replaced: an -o that names a keychain, the device key or any other file is refused.
            if let existing = FileSystem.readPrefix(destination, count: BackupArchive.magic.count),
                existing != BackupArchive.magic
            {
                throw KeychainError(.param, "\(destination) exists and is not a keychain backup: not replaced")
            }
            let url = URL(fileURLWithPath: destination)
            temporary = url.deletingLastPathComponent().appendingPathComponent(
                ".\(url.lastPathComponent).\(UUID().uuidString).tmp").path
            fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                throw KeychainError(.io, "cannot create \(destination): \(String(cString: strerror(errno)))")
            }
            // The header: magic, version, fields, the password check, and a checksum that tells a damaged header.
            let fields = header.fields
            let check: Data
            do { check = try Sealing.seal(checkPlaintext, key: keys.check, aad: checkAAD(fields)) } catch {
                throw KeychainError(.internalComponent, "sealing failed")
            }
            var bytes = magic + [version]
            bytes += BackupArchive.lengthPrefix(fields.count) + fields
            bytes += BackupArchive.lengthPrefix(check.count) + Array(check)
            let checksum = Array(SHA256.hash(data: bytes).prefix(16))
            bytes += checksum
            headerDigest = Array(SHA256.hash(data: bytes))
            buffer = bytes
        }

        deinit {
            close(fd)
            if !finished { unlink(temporary) }
        }

        func add(_ item: Item, secret: SecretBytes) throws(KeychainError) {
            let kind: RecordKind = item.accessibility.isThisDeviceOnly ? .thisDevice : .portable
            var plain = encodeItem(item, secret: secret)
            defer { plain.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
            try append(plain, kind: kind, key: kind == .thisDevice ? thisDeviceKey : keys.items)
        }

        /// Seals the end record, makes the file durable and moves it into place.
        func finish(_ report: BackupReport) throws(KeychainError) {
            try append(encodeEnd(report), kind: .end, key: keys.items)
            try flush()
            guard fsync(fd) == 0 else { throw KeychainError(.io, "cannot write \(destination) to disk") }
            guard rename(temporary, destination) == 0 else {
                throw KeychainError(.io, "cannot write \(destination): \(String(cString: strerror(errno)))")
            }
            finished = true
            let directory = open(URL(fileURLWithPath: destination).deletingLastPathComponent().path,
                                 O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if directory >= 0 {
                fsync(directory)
                close(directory)
            }
        }

        private func append(_ plain: [UInt8], kind: RecordKind, key: SymmetricKey) throws(KeychainError) {
            let sealed: Data
            do {
                sealed = try Sealing.seal(plain, key: key,
                                          aad: recordAAD(headerDigest: headerDigest, index: index, kind: kind))
            } catch {
                throw KeychainError(.internalComponent, "sealing failed")
            }
            guard sealed.count + 1 <= maximumRecord else {
                throw KeychainError(.dataTooLarge, "an item is too large for a backup record (\(sealed.count) bytes)")
            }
            index += 1
            buffer += BackupArchive.lengthPrefix(sealed.count + 1)
            buffer.append(kind.rawValue)
            buffer.append(contentsOf: sealed)
            if buffer.count >= 1 << 20 { try flush() }
        }

        private func flush() throws(KeychainError) {
            var written = 0
            while written < buffer.count {
                let n = buffer.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    throw KeychainError(.io, "cannot write \(destination): \(String(cString: strerror(errno)))")
                }
                written += n
            }
            buffer.removeAll(keepingCapacity: true)
        }
    }

    static func lengthPrefix(_ count: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(count).bigEndian) { Array($0) } }
}

// MARK: - Reading

extension BackupArchive {
    /// Reads a backup a record at a time. The header is checked when it is made (a damaged one: errSecDecode) and
    /// the password with ``unlock(password:deviceKey:)`` (a wrong one: errSecAuthFailed); every record after that
    /// either opens as it was written or is errSecDecode.
    final class Reader {
        let header: Header
        let headerDigest: [UInt8]
        private let check: Data
        private var source: ByteSource
        private var keys: Keys?
        private var thisDeviceKey: SymmetricKey?
        private var index: Int64 = 0
        private(set) var ended = false
        /// How far into the file reading got, and its size: a restore's progress.
        var bytesRead: Int64 { source.consumed }
        var size: Int64 { source.size }

        /// The outcome of one record.
        enum Record {
            case item(Item, SecretBytes)
            /// A `…ThisDeviceOnly` item sealed on another device: it cannot be opened here.
            case otherDevice
            case end(BackupReport)
        }

        convenience init(path: String) throws(KeychainError) {
            let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
            guard fd >= 0 else {
                throw KeychainError(errno == ENOENT ? .param : .io,
                                    "cannot open \(path): \(String(cString: strerror(errno)))")
            }
            var status = stat()
            guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
                close(fd)
                throw KeychainError(.param, "\(path) is not a file")
            }
            try self.init(source: ByteSource(fd: fd, size: Int64(status.st_size)))
        }

        /// A backup in memory (tests, the fuzzer).
        convenience init(bytes: [UInt8]) throws(KeychainError) {
            try self.init(source: ByteSource(bytes: bytes))
        }

        private init(source: ByteSource) throws(KeychainError) {
            self.source = source
            let damaged = KeychainError.decode("not a keychain backup, or its header is damaged")
            guard let start = try source.read(magic.count + 1), Array(start.prefix(magic.count)) == magic else {
                throw damaged
            }
            guard start.last == version else {
                throw .decode("the backup's format \(start.last ?? 0) is not one this keychain reads (it reads \(version))")
            }
            guard let fieldsLength = try source.length(), fieldsLength == Header.fieldsLength,
                let fields = try source.read(fieldsLength), let checkLength = try source.length(), checkLength <= 256,
                let check = try source.read(checkLength), let checksum = try source.read(16)
            else { throw damaged }
            var bytes = start
            bytes += BackupArchive.lengthPrefix(fields.count) + fields
            bytes += BackupArchive.lengthPrefix(check.count) + check
            guard Array(SHA256.hash(data: bytes).prefix(16)) == checksum else { throw damaged }
            header = try Header(fields: fields)
            self.check = Data(check)
            headerDigest = Array(SHA256.hash(data: bytes + checksum))
        }

        /// Checks the backup password (scrypt: slow, so called with nothing held); a wrong one is errSecAuthFailed.
        func unlock(password: SecretBytes, deviceKey: SymmetricKey) throws(KeychainError) {
            try unlock(keys: Keys(password: password, header: header), deviceKey: deviceKey)
        }

        func unlock(keys: Keys, deviceKey: SymmetricKey) throws(KeychainError) {
            do {
                _ = try Sealing.open(check, key: keys.check, aad: checkAAD(header.fields))
            } catch {
                throw KeychainError(.authFailed, "the backup password is not correct")
            }
            self.keys = keys
            if BackupArchive.deviceID(deviceKey) == header.sourceDevice {
                thisDeviceKey = keys.thisDevice(deviceKey: deviceKey, header: header)
            }
        }

        /// Whether the backup was made on this device (its `…ThisDeviceOnly` items restore here).
        var madeOnThisDevice: Bool { thisDeviceKey != nil }

        /// The next record; nil after the end record, when the file must end too.
        func next() throws(KeychainError) -> Record? {
            guard let keys else { throw KeychainError(.authFailed, "the backup is not unlocked") }
            if ended {
                guard try source.read(1) == nil else { throw .decode("the backup has bytes after its end") }
                return nil
            }
            guard let length = try source.length() else { throw .decode("the backup is cut short: it has no end") }
            guard length >= 1, length <= maximumRecord, let body = try source.read(length) else {
                throw .decode("the backup is cut short or damaged")
            }
            guard let kind = RecordKind(rawValue: body[0]) else { throw .decode("a backup record is damaged") }
            let aad = recordAAD(headerDigest: headerDigest, index: index, kind: kind)
            index += 1
            let sealed = Data(body[1...])
            switch kind {
            case .end:
                ended = true
                return .end(try decodeEnd(Sealing.open(sealed, key: keys.items, aad: aad)))
            case .portable:
                var plain = try Sealing.open(sealed, key: keys.items, aad: aad)
                defer { plain.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
                let (item, secret) = try decodeItem(plain)
                return .item(item, secret)
            case .thisDevice:
                guard let thisDeviceKey else { return .otherDevice }
                var plain = try Sealing.open(sealed, key: thisDeviceKey, aad: aad)
                defer { plain.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
                let (item, secret) = try decodeItem(plain)
                guard item.accessibility.isThisDeviceOnly else { throw .decode("a backup record is damaged") }
                return .item(item, secret)
            }
        }
    }

    /// Bytes from a file (read 64 KiB at a time) or from memory.
    final class ByteSource {
        private let fd: Int32
        private var buffer: [UInt8]
        private var position = 0
        private var atEnd = false
        /// Bytes handed out before the buffer's start, and the whole source's size.
        private var dropped: Int64 = 0
        let size: Int64
        var consumed: Int64 { dropped + Int64(position) }

        init(fd: Int32, size: Int64) {
            self.fd = fd
            self.size = size
            buffer = []
        }

        init(bytes: [UInt8]) {
            fd = -1
            buffer = bytes
            size = Int64(bytes.count)
            atEnd = true
        }

        deinit { if fd >= 0 { close(fd) } }

        /// Exactly `count` bytes; nil at a clean end before any of them; errSecDecode when the file ends inside.
        func read(_ count: Int) throws(KeychainError) -> [UInt8]? {
            while buffer.count - position < count && !atEnd { try fill() }
            if buffer.count == position && count > 0 { return nil }
            guard buffer.count - position >= count else { throw .decode("the backup is cut short") }
            defer { position += count }
            return Array(buffer[position..<position + count])
        }

        func length() throws(KeychainError) -> Int? {
            guard let b = try read(4) else { return nil }
            return Int(b.reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        }

        private func fill() throws(KeychainError) {
            if position > 0 {
                buffer.removeFirst(position)
                dropped += Int64(position)
                position = 0
            }
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n >= 0 else { throw KeychainError(.io, "cannot read the backup: \(String(cString: strerror(errno)))") }
                if n == 0 { atEnd = true } else { buffer.append(contentsOf: chunk[0..<n]) }
                return
            }
        }
    }
}

/// The fuzzer's way in (Fuzz/Sources/FuzzBackup): backups sealed under a fixed key instead of a password, so that
/// no scrypt runs per input.
@_spi(Testing) public enum BackupFuzzing {
    static let key = SymmetricKey(data: [UInt8](repeating: 7, count: 32))

    /// A valid backup of `count` items of every kind of record (portable and this-device), as bytes.
    public static func seed(items count: Int, in directory: URL) throws(KeychainError) -> [UInt8] {
        let path = directory.appendingPathComponent("seed-\(UUID().uuidString).backup").path
        let writer = try BackupArchive.Writer(destination: path, kdf: .standard, deviceKey: key, now: Date()) { header in
            BackupArchive.Keys(passwordKey: key, header: header)
        }
        for i in 0..<count {
            let item = Item(itemClass: i % 2 == 0 ? .genericPassword : .internetPassword, attributes: [
                "acct": .string("account \(i)"), "svce": .string("service"), "srvr": .string("example.com"),
                "pdmn": .string(i % 3 == 0 ? "aku" : "ak"), "mdat": .date(Double(i)),
            ])
            try writer.add(item, secret: SecretBytes(utf8: "secret \(i)"))
        }
        try writer.finish(BackupReport(items: count, thisDeviceOnly: (count + 2) / 3))
        defer { unlink(path) }
        guard let bytes = FileSystem.readFile(path) else { throw KeychainError(.io, "cannot read the seed") }
        return bytes
    }

    /// Reads `bytes` as a backup under the fixed key, every record opened and decoded; how many records were read
    /// before the end or the first error (which must be a KeychainError, never a trap).
    public static func read(_ bytes: [UInt8]) -> Int {
        guard let reader = try? BackupArchive.Reader(bytes: bytes) else { return 0 }
        guard (try? reader.unlock(keys: BackupArchive.Keys(passwordKey: key, header: reader.header), deviceKey: key))
            != nil
        else { return 0 }
        var records = 0
        while let record = try? reader.next() {
            if case .item(let item, _) = record { _ = item.primaryKeyBytes }
            records += 1
        }
        return records
    }
}
