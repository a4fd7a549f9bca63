import Foundation
import KeychainCore
import KeychainInterface

#if canImport(Glibc)
import Glibc
#endif

/// Which programs each access group belongs to, as keychaind has seen and the user has confirmed.
///
/// A program's groups come from the files beside its executable (`<name>.entitlements`, `Info.plist`), which any
/// program of the user can write. So the first program (path and SHA-256) that uses a group is bound to it, and a
/// later program claiming a group bound to others is asked about once: Always Allow binds it too; Allow admits
/// this connection only; Deny (or nobody to ask) leaves the group out of its groups for this connection.
///
/// Kept in `$XDG_STATE_HOME/keychain/applications` as `group<TAB>path<TAB>sha256-hex` lines, rewritten under an
/// flock (never held while the user is asked) and replaced whole, so read without it. The file is the user's own,
/// like the device key: it stops a program that merely writes an entitlements file, not one that edits this file
/// too (the secret of an item still needs the item's trusted-application list).
struct ApplicationRegistry: Sendable {
    let path: String

    /// The parsed file, kept while it is unchanged (once it settled: ``ChangedFileCache``).
    private let files: ChangedFileCache<[Binding]>

    /// `unsettledSeconds`: a cache of this registry's own that keeps a version that much after its last change
    /// (for tests); by default the process's, with its two seconds.
    init(stateDirectory: URL, unsettledSeconds: Int64? = nil) {
        path = stateDirectory.appendingPathComponent("applications").path
        files = unsettledSeconds.map { ChangedFileCache(capacity: 1, unsettledSeconds: $0) } ?? Self.parsed
    }

    struct Binding: Hashable {
        var group: String
        var application: TrustedApplication
    }

    /// The groups of `caller` that it may use: each either unbound (bound to it now), bound to it, or confirmed by
    /// `ask` (called with the group and the programs it is bound to, outside the lock).
    func admit(_ caller: Caller, ask: (String, [TrustedApplication]) -> ConfirmationResponse) -> Caller {
        guard let application = caller.application, !caller.hasWildcard else { return caller }
        let claimed = caller.accessGroups.filter { $0 != Caller.tokenGroup }
        let known = current()
        var admitted: [String] = []
        var toBind: [Binding] = []
        for group in claimed {
            let members = known.filter { $0.group == group }.map(\.application)
            if members.isEmpty || members.contains(where: { $0.isSameProgram(as: application) }) {
                admitted.append(group)
                if members.isEmpty { toBind.append(Binding(group: group, application: application)) }
                continue
            }
            switch ask(group, members) {
            case .alwaysAllow:
                admitted.append(group)
                toBind.append(Binding(group: group, application: application))
            case .allow: admitted.append(group)
            case .deny, .cancelled, .unavailable: break
            }
        }
        if !toBind.isEmpty {
            withLock {
                var all = load()
                for binding in toBind where !all.contains(binding) { all.append(binding) }
                save(all)
            }
        }
        let groups = caller.accessGroups.filter { admitted.contains($0) || $0 == Caller.tokenGroup }
        return Caller(accessGroups: groups, application: application)
    }

    /// The bindings as the file holds them now, parsed again only when the file changed: every session reads them.
    /// No lock for this read: the file is only ever replaced whole (``save(_:)`` renames), so a read sees one
    /// complete version.
    private func current() -> [Binding] {
        files.value(at: path, parse: Self.parse) ?? []
    }

    /// One per process (keychaind has one state directory; the tests a few).
    private static let parsed = ChangedFileCache<[Binding]>(capacity: 16)

    private func load() -> [Binding] {
        (try? String(contentsOfFile: path, encoding: .utf8)).map(Self.parse) ?? []
    }

    private static func parse(_ text: String) -> [Binding] {
        text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count == 3, let digest = Self.bytes(hex: fields[2]) else { return nil }
            return Binding(group: String(fields[0]), application: TrustedApplication(path: String(fields[1]), digest: digest))
        }
    }

    private func save(_ bindings: [Binding]) {
        let text = bindings.map { "\($0.group)\t\($0.application.path)\t\(Self.hex($0.application.digest))\n" }.joined()
        let temporary = path + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        _ = fsync(fd)
        close(fd)
        if written == bytes.count { rename(temporary, path) } else { unlink(temporary) }
    }

    private func withLock<T>(_ body: () -> T) -> T {
        let directory = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o700])
        let fd = open(path + ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        defer { if fd >= 0 { close(fd) } }
        if fd >= 0 { while flock(fd, LOCK_EX) != 0 && errno == EINTR {} }
        return body()
    }

    static func hex(_ data: Data) -> String { Hex.string(data) }

    static func bytes(hex: Substring) -> Data? { Hex.bytes(hex).map { Data($0) } }
}
