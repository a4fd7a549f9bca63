import Crypto
import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage
import Synchronization

/// keychaind's access log (docs/ACCESS-LOG.md): every decision about an item, written before the answer goes out.
///
/// Records are sealed to the log's public key, so they are written with every keychain locked; its private key
/// lives in the login keychain (``KeychaindItem/accessLogKey``), so reading them takes the login password. A key
/// made while the login keychain was locked waits in memory for its first unlock. The public key is kept beside the
/// files (`log-key`) for the next start; a replaced one is noticed at the next unlock, when the log is sealed again
/// to the key the keychain holds.
final class AccessLogKeeper: AccessLogKeeping {
    let directory: URL
    private let writer: Mutex<AccessLogWriter>
    private let pendingKey: Mutex<Curve25519.KeyAgreement.PrivateKey?>
    /// The login keychain holds the key the log is sealed to (checked once per keychaind; until then, after every
    /// call, since a call may have created or unlocked the login keychain).
    private let keyed = Atomic(false)

    var isKeyed: Bool { keyed.load(ordering: .acquiring) }


    var keyFile: URL { directory.appendingPathComponent("log-key") }

    /// - Parameter maximumFileSize: the size at which a file is finished (tests make it small).
    init(directory: URL, maximumFileSize: Int = 1 << 20) throws(KeychainError) {
        self.directory = directory
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw KeychainError(.io, "cannot create the access log's directory \(directory.path)")
        }
        var pending: Curve25519.KeyAgreement.PrivateKey?
        let publicKey: Curve25519.KeyAgreement.PublicKey
        if let data = try? Data(contentsOf: directory.appendingPathComponent("log-key")),
           let key = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: data)
        {
            publicKey = key
        } else {
            let key = Curve25519.KeyAgreement.PrivateKey()
            pending = key
            publicKey = key.publicKey
            try Self.write(publicKey, to: directory.appendingPathComponent("log-key"))
        }
        pendingKey = Mutex(pending)
        writer = Mutex(try AccessLogWriter(directory: directory, publicKey: publicKey, maximumFileSize: maximumFileSize))
    }

    /// Writes `records` (one `write(2)`); an error means the call's answer must be an error too.
    func record(_ records: [AccessLogRecord]) throws(KeychainError) {
        guard !records.isEmpty else { return }
        // Encoded before the writer's lock is taken: every call's answer waits on that lock.
        let encoded = AccessLogWriter.encode(records)
        let finished = try writer.withLock { (writer: inout AccessLogWriter) throws(KeychainError) -> AccessLogHead? in
            let file = writer.head.file
            try writer.append(encoded: encoded)
            return writer.head.file != file ? writer.closedHead : nil
        }
        // A file finished (rotation): where it ended goes into the login keychain, as at a clean stop, so that after a
        // kill only the file being written can lose records unnoticed. Once per file, with no lock of the log held.
        if let finished { keepCheckpoint(finished) }
    }

    /// Ends the current file cleanly (keychaind stops) and keeps where it ended in the login keychain, so that
    /// records cut from it while no keychaind runs are noticed.
    func close() {
        if let head = writer.withLock({ writer -> AccessLogHead? in writer.close(); return writer.closedHead }) {
            keepCheckpoint(head)
        }
    }

    /// Keeps `head` (a finished file's end) as the checkpoint in the login keychain, once it holds the log's secrets.
    private func keepCheckpoint(_ head: AccessLogHead) {
        keying.withLock { _ in
            guard let login = loginFile.withLock({ $0 }),
                  case .success(let stored?) = Result(catching: { () throws(KeychainError) in
                      try login.keychaindSecret(.accessLogKey)
                  }),
                  var secrets = stored.withUnsafeBytes({ AccessLogSecrets(encoded: [UInt8]($0)) }),
                  (secrets.checkpoint?.file ?? 0) <= head.file
            else { return }
            secrets.checkpoint = head
            var bytes = secrets.encoded
            try? login.storeKeychaindSecret(.accessLogKey, SecretBytes(consuming: &bytes))
        }
    }

    /// One key change at a time (unlock events, calls and a read of the log may all ask at once).
    private let keying = Mutex(())
    /// The login keychain that took the log's secrets (for the checkpoint at a clean stop).
    private let loginFile = Mutex<KeychainFile?>(nil)

    func keyReady(in login: KeychainFile) {
        keying.withLock { _ in takeKey(in: login) }
    }

    /// The login keychain keeps the log's private key and this run's secret (``AccessLogSecrets``); the log is
    /// sealed to the key it keeps.
    private func takeKey(in login: KeychainFile) {
        guard !login.isLocked,
              case .success(let stored) = Result(catching: { () throws(KeychainError) in try login.keychaindSecret(.accessLogKey) })
        else { return }
        let runSecret = writer.withLock { $0.runSecret }
        var secrets: AccessLogSecrets
        if let stored, let kept = stored.withUnsafeBytes({ AccessLogSecrets(encoded: [UInt8]($0)) }), kept.key != nil {
            secrets = kept
        } else {
            // The keychain holds none: the key made while it was locked, or, when that one was lost with a
            // keychaind that ended first, a new one. Files sealed to a lost key stay (the check names them):
            // nothing removes records on the word of a keychain file a program could have swapped.
            let key = pendingKey.withLock({ $0 }) ?? Curve25519.KeyAgreement.PrivateKey()
            secrets = AccessLogSecrets(privateKey: Array(key.rawRepresentation))
        }
        if secrets.add(run: runSecret) || stored == nil {
            var bytes = secrets.encoded
            guard (try? login.storeKeychaindSecret(.accessLogKey, SecretBytes(consuming: &bytes))) != nil else { return }
        }
        guard let key = secrets.key else { return }
        pendingKey.withLock { $0 = nil }
        loginFile.withLock { $0 = login }
        seal(to: key.publicKey)
        keyed.store(true, ordering: .releasing)
    }

    /// Seals the log to `key` from the next record on. A file that cannot be opened leaves the writer without one:
    /// every later call then fails closed (errSecIO) until one can.
    private func seal(to key: Curve25519.KeyAgreement.PublicKey) {
        writer.withLock { writer in
            guard writer.publicKey.rawRepresentation != key.rawRepresentation else { return }
            try? writer.use(key)
        }
        try? Self.write(key, to: keyFile)
    }

    func report(_ request: AccessLogRequest, secrets: SecretBytes) throws(KeychainError) -> AccessLogReport {
        guard let kept = secrets.withUnsafeBytes({ AccessLogSecrets(encoded: [UInt8]($0)) }), kept.key != nil else {
            throw KeychainError(.decode, "the access log's key is damaged")
        }
        // Where the log stands now: records written while it is read are not part of this report.
        let head = writer.withLock { $0.head }
        let filter: AccessLogFilter
        switch request {
        case .read(let wanted): filter = wanted
        case .verify: filter = AccessLogFilter(program: "\u{0}")  // checks every record, returns none
        }
        return AccessLogReader.read(directory: directory, secrets: kept, head: head, filter: filter)
    }

    private static func write(_ key: Curve25519.KeyAgreement.PublicKey, to url: URL) throws(KeychainError) {
        do {
            try key.rawRepresentation.write(to: url, options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        } catch {
            throw KeychainError(.io, "cannot write \(url.path)")
        }
    }
}
