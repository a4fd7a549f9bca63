import Foundation
import KeychainCore
@_spi(Testing) import KeychainStorage

/// Opens fuzzer bytes as a keychain file (a passwordless one, so that no scrypt runs and every class opens), with a
/// fixed device key, and reads everything in it. Header, keybag, manifest and row parsing must answer with the
/// right data or a KeychainError, never trap. Seeds: Fuzz/corpus/keychain-file (real keychains made with the device
/// key in Fuzz/fixtures/state).
enum Workspace {
    static let root: URL = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-keychain-file-\(getpid())")
        try? FileManager.default.createDirectory(at: dir.appendingPathComponent("state"), withIntermediateDirectories: true)
        let fixture = ProcessInfo.processInfo.environment["FUZZ_DEVICE_KEY"] ?? "Fuzz/fixtures/state/device.key"
        try? FileManager.default.removeItem(at: dir.appendingPathComponent("state/device.key"))
        try? FileManager.default.copyItem(atPath: fixture, toPath: dir.appendingPathComponent("state/device.key").path)
        // The device key is used only when private (git keeps no modes beyond the executable bit).
        try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: dir.appendingPathComponent("state").path)
        try? FileManager.default.setAttributes([.posixPermissions: 0o600],
                                               ofItemAtPath: dir.appendingPathComponent("state/device.key").path)
        return dir
    }()
    static let file = root.appendingPathComponent("input.keychain-db")
    static let caller = Caller(accessGroups: ["fuzz", Caller.wildcardGroup])
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeychainFile(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let fm = FileManager.default
    for suffix in ["", "-wal", "-shm"] { try? fm.removeItem(atPath: Workspace.file.path + suffix) }
    // Each input starts from a device that has seen nothing (no recorded epoch, no recorded fingerprint).
    if let states = try? fm.contentsOfDirectory(atPath: Workspace.root.appendingPathComponent("state").path) {
        for state in states where state.hasSuffix(".state") {
            try? fm.removeItem(at: Workspace.root.appendingPathComponent("state/\(state)"))
        }
    }
    guard fm.createFile(atPath: Workspace.file.path, contents: Data(UnsafeBufferPointer(start: data, count: size)),
                        attributes: [.posixPermissions: 0o600]) else { return 0 }
    let configuration = KeychainFile.Configuration(stateDirectory: Workspace.root.appendingPathComponent("state"))
    // A device that has seen nothing of this file yet (epoch 0), so the open goes on to the manifest and the rows.
    try? KeychainFile.writeFreshDeviceState(for: Workspace.file, configuration: configuration)
    guard let file = try? KeychainFile.open(at: Workspace.file, configuration: configuration) else { return 0 }
    defer { file.close() }
    _ = try? file.settings()
    _ = try? file.allItems(includingSecrets: true, caller: Workspace.caller)
    for itemClass in ["genp", "inet", "cert", "keys"] {
        if let query = try? QueryParser.parse(
            ["class": .string(itemClass), "m_Limit": "m_LimitAll", "r_Attributes": true, "r_Data": true], for: .search)
        {
            _ = try? file.search(query, caller: Workspace.caller)
        }
    }
    // A write through the damaged file must fail cleanly or succeed.
    if let add = try? QueryParser.parse(["class": "genp", "acct": "fuzz", "svce": "fuzz", "v_Data": .data(Data([1]))],
                                        for: .add) {
        _ = try? file.add(add, caller: Workspace.caller)
    }
    return 0
}
