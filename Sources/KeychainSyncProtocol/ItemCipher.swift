import Crypto
import Foundation

/// How an item travels (docs/SYNC-PROTOCOL.md "Item ciphertext"): padded to a size class, sealed with AES-GCM under
/// a key derived per item from the account's item key of an epoch, with the account, item id, epoch, version and
/// format as associated data. So the server can neither read it nor move it to another item, account, epoch or
/// version unnoticed; a replayed old version is caught by the version check of the device.
public enum ItemCipher {
    public static let format: UInt8 = 1
    /// A tombstone is sealed too (an empty record under its own format byte): a server cannot delete an item on a
    /// device, or bring a deleted one back, with anything it made itself.
    public static let tombstoneFormat: UInt8 = 2
    static let tombstoneRecord = Data("keychain-sync-tombstone".utf8)

    public enum Failure: Error, Equatable {
        case tooLarge, unreadable
    }

    public static func itemKey(epochKey: SymmetricKey, account: Data, item: Data) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: epochKey, salt: account,
                               info: Data("keychain-sync-item-v1".utf8) + item, outputByteCount: 32)
    }

    public static func associatedData(account: Data, item: Data, epoch: Int32, version: Int64,
                                      format: UInt8 = format) -> Data {
        var aad = Data("keychain-sync-aad-v1".utf8)
        aad.append(UInt8(account.count)); aad.append(account)
        aad.append(UInt8(item.count)); aad.append(item)
        withUnsafeBytes(of: epoch.bigEndian) { aad.append(contentsOf: $0) }
        withUnsafeBytes(of: version.bigEndian) { aad.append(contentsOf: $0) }
        aad.append(format)
        return aad
    }

    /// The padded length of a plaintext of `count` bytes: a power of two from 512 bytes, so a length tells only
    /// a size class.
    public static func paddedLength(_ count: Int) -> Int {
        var size = 512
        while size < count + 1 { size <<= 1 }
        return size
    }

    public static func sealTombstone(epochKey: SymmetricKey, account: Data, item: Data, epoch: Int32,
                                     version: Int64) throws(Failure) -> Data {
        try seal(tombstoneRecord, epochKey: epochKey, account: account, item: item, epoch: epoch, version: version,
                 format: tombstoneFormat)
    }

    /// Whether `ciphertext` is the tombstone of this item, epoch and version, sealed by a holder of the epoch's key.
    public static func isTombstone(_ ciphertext: Data, epochKey: SymmetricKey, account: Data, item: Data,
                                   epoch: Int32, version: Int64) -> Bool {
        (try? open(ciphertext, epochKey: epochKey, account: account, item: item, epoch: epoch, version: version,
                   format: tombstoneFormat)) == tombstoneRecord
    }

    public static func seal(_ plaintext: Data, epochKey: SymmetricKey, account: Data, item: Data, epoch: Int32,
                            version: Int64, format: UInt8 = format) throws(Failure) -> Data
    {
        let length = paddedLength(plaintext.count)
        guard length + 28 <= SyncLimits.maxCiphertext else { throw .tooLarge }
        var padded = plaintext
        padded.append(0x80)
        padded.append(Data(count: length - padded.count))
        defer { padded.resetBytes(in: 0..<padded.count) }
        let key = itemKey(epochKey: epochKey, account: account, item: item)
        let aad = associatedData(account: account, item: item, epoch: epoch, version: version, format: format)
        guard let box = try? AES.GCM.seal(padded, using: key, authenticating: aad), let combined = box.combined else {
            throw .unreadable
        }
        return combined
    }

    public static func open(_ ciphertext: Data, epochKey: SymmetricKey, account: Data, item: Data, epoch: Int32,
                            version: Int64, format: UInt8 = format) throws(Failure) -> Data
    {
        let key = itemKey(epochKey: epochKey, account: account, item: item)
        let aad = associatedData(account: account, item: item, epoch: epoch, version: version, format: format)
        guard let box = try? AES.GCM.SealedBox(combined: ciphertext),
              var padded = try? AES.GCM.open(box, using: key, authenticating: aad),
              padded.count == paddedLength(0) || padded.count.nonzeroBitCount == 1,
              let end = padded.lastIndex(where: { $0 != 0 }), padded[end] == 0x80
        else { throw .unreadable }
        let plaintext = padded.prefix(upTo: end)
        guard paddedLength(plaintext.count) == padded.count else {
            padded.resetBytes(in: 0..<padded.count)
            throw .unreadable
        }
        let result = Data(plaintext)
        padded.resetBytes(in: 0..<padded.count)
        return result
    }
}
