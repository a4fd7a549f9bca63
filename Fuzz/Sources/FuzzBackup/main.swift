import Foundation
import KeychainCore
@_spi(Testing) import KeychainStorage

/// Reads fuzzer bytes as a backup file (docs/FILE-FORMAT.md "Backup file") under a fixed key, so that no scrypt
/// runs: the header, every record's length, seal and item encoding must answer with the data or a KeychainError,
/// never trap. Half the inputs are the bytes themselves; the other half are edits (offset, byte pairs, and a cut)
/// of a valid backup made at start, which reach past the seals that random bytes never open.
enum Seed {
    static let bytes: [UInt8] = (try? BackupFuzzing.seed(items: 6, in: FileManager.default.temporaryDirectory)) ?? []
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBackup(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    guard let first = input.first else { return 0 }
    if first & 1 == 0 {
        _ = BackupFuzzing.read(Array(input.dropFirst()))
        return 0
    }
    var bytes = Seed.bytes
    guard !bytes.isEmpty else { return 0 }
    var edits = input.dropFirst()
    if let cut = edits.popFirst(), cut & 0x80 != 0 {
        bytes.removeLast(min(bytes.count, Int(cut & 0x7f)))
    }
    while edits.count >= 3 {
        let offset = Int(edits.removeFirst()) << 8 | Int(edits.removeFirst())
        let value = edits.removeFirst()
        if !bytes.isEmpty { bytes[offset % bytes.count] = value }
    }
    _ = BackupFuzzing.read(bytes)
    return 0
}
