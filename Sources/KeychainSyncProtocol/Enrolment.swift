import Crypto
import Foundation

/// `POST /v1/joins`: a new device asks to join an account; signed by the key it registers.
public struct JoinRequest: Codable, Sendable, Equatable {
    public var device: DeviceRecord
    public init(device: DeviceRecord) { self.device = device }
}

/// The server's answer: the code the user types on a trusted device.
public struct JoinTicket: Codable, Sendable, Equatable {
    public var code: String
    public var expiresSeconds: Int64
    public init(code: String, expiresSeconds: Int64) {
        self.code = code
        self.expiresSeconds = expiresSeconds
    }
}

/// What a trusted device tells the new one through the server: which account, which device approves, and the
/// device log as the approver has verified it (the head is part of the confirmation words).
public struct JoinClaim: Codable, Sendable, Equatable {
    public var account: Data
    public var approver: Data
    public var log: [SignedLogEntry]
    public init(account: Data, approver: Data, log: [SignedLogEntry]) {
        self.account = account
        self.approver = approver
        self.log = log
    }
}

/// `GET /v1/joins/{code}` (the new device) and `POST /v1/joins/{code}/claim` (the approver).
public struct JoinStatus: Codable, Sendable, Equatable {
    public var device: DeviceRecord
    public var claim: JoinClaim?
    public var approved: Bool
    public init(device: DeviceRecord, claim: JoinClaim?, approved: Bool) {
        self.device = device
        self.claim = claim
        self.approved = approved
    }
}

/// `POST /v1/accounts/{a}/devices`: a trusted device appends a signed entry to the device log, with the item keys
/// wrapped to the device it adds; `join` names the join it answers, if any.
public struct DeviceAddition: Codable, Sendable, Equatable {
    public var entry: SignedLogEntry
    public var shares: [KeyShare]
    public var join: String?
    public init(entry: SignedLogEntry, shares: [KeyShare], join: String?) {
        self.entry = entry
        self.shares = shares
        self.join = join
    }
}

/// `GET /v1/accounts/{a}/shares`: the key shares wrapped to the asking device.
public struct KeyShares: Codable, Sendable, Equatable {
    public var shares: [KeyShare]
    public init(shares: [KeyShare]) { self.shares = shares }
}

/// An epoch's item key wrapped to one device with HPKE (X25519, HKDF-SHA256, ChaCha20-Poly1305) and signed by the
/// device that wrapped it. The server stores it and cannot open it; the recipient takes it only from a device that
/// its verified device log trusts.
public struct KeyShare: Codable, Sendable, Equatable {
    public var account: Data
    public var recipient: Data
    public var epoch: Int32
    public var encapsulatedKey: Data
    public var ciphertext: Data
    public var signer: Data
    public var signature: Data

    static let suite = HPKE.Ciphersuite.Curve25519_SHA256_ChachaPoly

    static func context(account: Data, recipient: Data, epoch: Int32) -> Data {
        var info = Data("keychain-sync-share-v1".utf8)
        info.append(account)
        info.append(recipient)
        withUnsafeBytes(of: epoch.bigEndian) { info.append(contentsOf: $0) }
        return info
    }

    var signedBytes: Data {
        var bytes = Self.context(account: account, recipient: recipient, epoch: epoch)
        bytes.append(UInt8(encapsulatedKey.count)); bytes.append(encapsulatedKey)
        bytes.append(ciphertext)
        return bytes
    }

    public static func wrap(_ key: SymmetricKey, account: Data, epoch: Int32, to recipient: DeviceRecord,
                            signer: Data, signingKey: P256.Signing.PrivateKey) throws -> KeyShare {
        let publicKey = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: recipient.agreementKey)
        let info = context(account: account, recipient: recipient.id, epoch: epoch)
        var sender = try HPKE.Sender(recipientKey: publicKey, ciphersuite: suite, info: info)
        let ciphertext = try key.withUnsafeBytes { try sender.seal(Data($0), authenticating: info) }
        var share = KeyShare(account: account, recipient: recipient.id, epoch: epoch,
                             encapsulatedKey: sender.encapsulatedKey, ciphertext: ciphertext, signer: signer,
                             signature: Data())
        share.signature = try signingKey.signature(for: share.signedBytes).rawRepresentation
        return share
    }

    public func isSigned(by publicKey: Data) -> Bool {
        guard let key = try? P256.Signing.PublicKey(x963Representation: publicKey),
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        else { return false }
        return key.isValidSignature(signature, for: signedBytes)
    }

    public func open(with privateKey: Curve25519.KeyAgreement.PrivateKey) throws -> SymmetricKey {
        let info = Self.context(account: account, recipient: recipient, epoch: epoch)
        var receiver = try HPKE.Recipient(privateKey: privateKey, ciphersuite: Self.suite, info: info,
                                          encapsulatedKey: encapsulatedKey)
        let plain = try receiver.open(ciphertext, authenticating: info)
        guard plain.count == 32 else { throw CryptoKitError.incorrectKeySize }
        return SymmetricKey(data: plain)
    }
}

/// The words a person compares on both devices before a new one is let in: derived from the account, the device
/// log's head as the approver verified it, and the new device's public keys. A server that swaps the new device's
/// keys, or shows the new device another account or log, makes them differ.
public enum ConfirmationWords {
    public static func words(account: Data, logHead: Data, device: DeviceRecord) -> [String] {
        var hasher = SHA256()
        hasher.update(data: Data("keychain-sync-words-v1".utf8))
        for field in [account, logHead, device.id, device.signingKey, device.agreementKey] {
            hasher.update(data: Data([UInt8(field.count)]))
            hasher.update(data: field)
        }
        return hasher.finalize().prefix(6).map { list[Int($0)] }
    }

    /// 256 short, distinct English words: one byte each.
    static let list: [String] = """
        acid acorn actor adobe after agent alarm album alder alpha amber angle ankle apple april apron arena argue \
        arrow aspen atlas attic audio award bacon badge bagel baker banjo barge basil batch beach beard berry bingo \
        birch bison blade blank blaze blend bloom board boat bonus brass bread brick bride brook brush bucket bugle \
        cabin cable cactus camel canal candy canoe cargo carol cedar chalk charm chess chili cider cigar civic clerk \
        cliff clock cloud coach cobra cocoa comet coral couch cover crane crate creek crisp crown cubic curve daisy \
        dance delta denim depot diary diner disco ditch dizzy dodge dolphin donut draft dragon drama dream drift \
        drum eagle earth easel ebony elbow elder ember empty epoch equal essay ethic event exile fable fancy feast \
        fence ferry fever fiber field flame flask fleet flint flora flute focus forge fossil frame frost fudge \
        galaxy gamma garden gecko ghost giant ginger glade globe glove gourd grain grape gravel grove guava guide \
        habit hammer harbor harp hazel heron hinge hobby honey hotel husky igloo image index ivory jacket jaguar \
        jelly jewel joker judge juice jumbo karma kayak kernel kettle kiosk koala label ladder lagoon lemon level \
        lilac linen lobby locket lotus lunar lyric magnet mango maple marble meadow melon metal mint mocha model \
        moose motor mural nectar needle noble novel oasis ocean olive onion opera orbit otter oxide paddle palace \
        panda paper parade pastel peach pearl pepper piano pilot pixel plaza polar poppy prism pulse quartz quiet \
        quilt rabbit radar raven relic ribbon ridge river robin rocket rumba saddle salmon sandal satin scout \
        shadow silver sketch slate solar spice spiral sponge spruce squid stable statue stone storm sugar summit \
        swan tango tapir temple thorn tiger timber toast topaz torch tower tulip tundra turtle umber unity velvet \
        violet vivid walnut willow zebra
        """.split(whereSeparator: \.isWhitespace).prefix(256).map(String.init)
}

/// What a verified device log says: who is a device of the account now, the current epoch, and the head.
public struct VerifiedDeviceLog: Sendable, Equatable {
    public var devices: [Data: DeviceRecord]
    public var epoch: Int32
    public var head: Data
    public var recoverySigningKey: Data
    public var recoveryAgreementKey: Data
    /// Which device signed each entry (the approvals), in order.
    public var approvals: [(device: Data, by: Data)]

    public static func == (a: Self, b: Self) -> Bool {
        a.devices == b.devices && a.epoch == b.epoch && a.head == b.head
    }

    /// The id the recovery key signs as (it may approve a device after every device was lost).
    public static func recoveryID(_ signingKey: Data) -> Data { Data(SHA256.hash(data: signingKey).prefix(16)) }

    public enum Failure: Error, Equatable {
        case broken(String)
    }

    /// Checks the whole chain from its first entry: each entry follows the one before (seq and hash), is of the
    /// account, and is signed by a device the log trusted at that point (the first by the device it names).
    public init(_ entries: [SignedLogEntry], account: Data) throws(Failure) {
        guard let first = entries.first, let genesis = DeviceLogEntry(encoded: first.entry), genesis.kind == .genesis,
              genesis.seq == 0, genesis.previous == Data(count: 32), genesis.account == account,
              first.signer == genesis.device.id, first.isSigned(by: genesis.device.signingKey)
        else { throw .broken("the device log's first entry is not its first device's own") }
        devices = [genesis.device.id: genesis.device]
        epoch = genesis.epoch
        recoverySigningKey = genesis.recoverySigningKey
        recoveryAgreementKey = genesis.recoveryAgreementKey
        head = first.chainHash
        approvals = [(genesis.device.id, genesis.device.id)]
        let recovery = Self.recoveryID(recoverySigningKey)
        for (index, signed) in entries.enumerated().dropFirst() {
            guard let entry = DeviceLogEntry(encoded: signed.entry), entry.kind != .genesis,
                  entry.seq == UInt32(index), entry.previous == head, entry.account == account
            else { throw .broken("the device log is not one chain (entry \(index))") }
            let signerKey = signed.signer == recovery ? recoverySigningKey : devices[signed.signer]?.signingKey
            guard let signerKey, signed.isSigned(by: signerKey) else {
                throw .broken("entry \(index) of the device log is not signed by a device of the account")
            }
            guard entry.epoch >= epoch else { throw .broken("entry \(index) goes back to an earlier epoch") }
            switch entry.kind {
            case .addDevice:
                guard devices[entry.device.id] == nil, entry.device.id != recovery else {
                    throw .broken("entry \(index) adds a device that is already there")
                }
                devices[entry.device.id] = entry.device
            case .removeDevice:
                guard devices.removeValue(forKey: entry.device.id) != nil else {
                    throw .broken("entry \(index) removes a device that is not there")
                }
                guard entry.epoch > epoch else { throw .broken("a device left without a new epoch") }
            case .genesis: throw .broken("a second first entry")
            }
            epoch = entry.epoch
            head = signed.chainHash
            approvals.append((entry.device.id, signed.signer))
        }
    }
}
