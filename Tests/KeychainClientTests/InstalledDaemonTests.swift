import Foundation
import KeychainCore
import Testing
@testable import KeychainInterface

#if canImport(Glibc)
import Glibc
#endif

/// Which keychaind a client talks to: an installed keychaind is root's file, set-group-ID, where only root can change
/// it; a client beside one accepts a socket only from a process with that group (scripts/package-test.sh runs the
/// real processes: the installed keychaind, a listener of the user's, a copy, a traced start).
@Suite("Which keychaind a client talks to")
struct InstalledDaemonTests {
    /// A directory of root's (0755) under /tmp, for files that only root can change; removed at the end.
    final class RootDirectory {
        let path = "/tmp/kc-installed-\(UUID().uuidString)"
        init() throws {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false,
                                                    attributes: [.posixPermissions: 0o755])
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }

        func file(_ name: String, mode: mode_t, group: gid_t) -> String {
            let file = "\(path)/\(name)"
            _ = FileManager.default.createFile(atPath: file, contents: Data([0x7f, 0x45, 0x4c, 0x46]))
            chown(file, 0, group)
            chmod(file, mode)  // after chown, which clears the set-group-ID bit
            return file
        }
    }

    @Test("root's set-group-ID file where only root can change it is an installed keychaind; anything less is not",
          .enabled(if: geteuid() == 0))
    func installedOnlyWhenRootsAndSetGroupID() throws {
        let directory = try RootDirectory()
        let group: gid_t = 4242
        #expect(InstalledDaemon.at(directory.file("keychaind", mode: 0o2755, group: group))
                == InstalledDaemon(path: "\(directory.path)/keychaind", group: group))
        #expect(InstalledDaemon.at(directory.file("plain", mode: 0o755, group: group)) == nil, "not set-group-ID")
        #expect(InstalledDaemon.at(directory.file("unrunnable", mode: 0o2744, group: group)) == nil,
                "set-group-ID without the group's execute bit means mandatory locking, not a group to run with")
        #expect(InstalledDaemon.at(directory.file("writable", mode: 0o2777, group: group)) == nil, "anyone can replace it")
        let owned = directory.file("users", mode: 0o2755, group: group)
        chown(owned, 1000, group)
        chmod(owned, 0o2755)
        #expect(InstalledDaemon.at(owned) == nil, "a user's own file proves nothing")
        chmod(directory.path, 0o777)
        #expect(InstalledDaemon.at("\(directory.path)/keychaind") == nil, "its directory is anyone's")
        #expect(InstalledDaemon.at("\(directory.path)/missing") == nil)
    }

    @Test("a keychaind built by hand (the tests' own, beside this test program) asks nothing of the socket's group")
    func ownBuildIsNotInstalled() {
        #expect(InstalledDaemon.besideThisProgram == nil)
    }

    @Test("with an installed keychaind, a socket's listener of another group is refused, saying so; its group is accepted")
    func peerGroupIsChecked() throws {
        var ends: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        let socket = URL(fileURLWithPath: "/run/user/1/keychain/keychaind.sock")
        // A socket pair's peer is this process: its effective group is what the kernel recorded.
        let ours = InstalledDaemon(path: "/usr/bin/keychaind", group: getegid())
        let other = InstalledDaemon(path: "/usr/bin/keychaind", group: getegid() &+ 1)
        try SocketTrust.checkPeer(ends[0], socket: socket, installed: ours)
        try SocketTrust.checkPeer(ends[0], socket: socket, installed: nil)
        let error = #expect(throws: KeychainError.self) { try SocketTrust.checkPeer(ends[0], socket: socket, installed: other) }
        #expect(error?.status == .internalComponent)
        #expect(error?.message.contains("not the installed keychaind (/usr/bin/keychaind)") == true)
        #expect(error?.message.contains("Nothing was sent") == true)
    }
}
