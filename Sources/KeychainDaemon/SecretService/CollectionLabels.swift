import Foundation
import KeychainCore
import KeychainInterface
import Synchronization

/// The collections' labels (the Secret Service's writable `Label`), kept beside the search list in
/// `$XDG_CONFIG_HOME/keychain/collection-labels`: one `path<TAB>label` line per keychain that has one.
///
/// A collection is a keychain file, and a keychain has no name but its file's; the label is what a desktop shows
/// (gnome-keyring's "Login", "Passwords"), so it is a preference like the default keychain, not part of the file:
/// readable while the keychain is locked, and changing it never moves the file nor changes the collection's path
/// (clients keep their object paths). A keychain without a label shows its name.
struct CollectionLabels: Sendable {
    let file: URL

    init(locations: KeychainLocations) { file = locations.configDirectory.appendingPathComponent("collection-labels") }

    /// Read-modify-write of the file is one step in this process (keychaind is its only writer).
    private static let writing = Mutex(())

    func label(of keychain: KeychainReference) -> String? { all()[keychain.path] }

    /// Sets a keychain's label and returns the one it now shows: an empty label, or the keychain's own `name`,
    /// removes it (the name shows again).
    @discardableResult
    func setLabel(_ label: String, of keychain: KeychainReference, name: String) throws -> String {
        guard Self.isValid(label) else {
            throw SecretServiceServer.Failure.invalidArgs("a label is at most 1,024 characters, without control characters")
        }
        guard !keychain.path.contains(where: { $0 == "\t" || $0 == "\n" }) else {
            throw SecretServiceServer.Failure(name: "org.freedesktop.DBus.Error.NotSupported",
                                              message: "this keychain's path cannot be given a label")
        }
        let kept = label.isEmpty || label == name ? nil : label
        try Self.writing.withLock { _ in
            var labels = all()
            guard labels[keychain.path] != kept else { return }
            labels[keychain.path] = kept
            try write(labels)
        }
        return kept ?? name
    }

    /// Drops the labels of keychains that no longer exist (deleted through the Secret Service, by `security
    /// delete-keychain` or by hand; run on every change to the keychain list), so that a new keychain of the same
    /// name does not inherit one.
    func prune() {
        Self.writing.withLock { _ in
            let labels = all()
            let kept = labels.filter { FileManager.default.fileExists(atPath: $0.key) }
            if kept.count != labels.count { try? write(kept) }
        }
    }

    static func isValid(_ label: String) -> Bool {
        label.count <= 1024 && !label.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    private func all() -> [String: String] {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [:] }
        var labels: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "\t", maxSplits: 1)
            if parts.count == 2 { labels[String(parts[0])] = String(parts[1]) }
        }
        return labels
    }

    private func write(_ labels: [String: String]) throws {
        let text = labels.sorted { $0.key < $1.key }.map { "\($0.key)\t\($0.value)\n" }.joined()
        do {
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            try Data(text.utf8).write(to: file, options: .atomic)
        } catch {
            throw SecretServiceServer.Failure(name: "org.freedesktop.DBus.Error.Failed", message: "cannot write the collection labels")
        }
    }
}
