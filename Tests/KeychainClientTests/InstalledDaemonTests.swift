import Foundation
import CKeychainLinux
import KeychainCore
import KeychainWire
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
        // A group of the system with no member, as the installers make keychaind's.
        let group = try #require(Self.groups().first { $0.gid != 0 && $0.members.isEmpty }?.gid)
        #expect(InstalledDaemon.at(directory.file("keychaind", mode: 0o2755, group: group))
                == InstalledDaemon(path: "\(directory.path)/keychaind", group: group))
        #expect(InstalledDaemon.at(directory.file("unknown-group", mode: 0o2755, group: 4_242_424)) == nil,
                "a group nobody made")
        if let shared = Self.groups().first(where: { $0.gid != 0 && !$0.members.isEmpty })?.gid {
            #expect(InstalledDaemon.at(directory.file("shared-group", mode: 0o2755, group: shared)) == nil,
                    "a group with members: any of them could name it")
        }
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

    /// The system's groups and their members (getgrent).
    static func groups() -> [(gid: gid_t, members: [String])] {
        setgrent()
        defer { endgrent() }
        var all: [(gid: gid_t, members: [String])] = []
        while let entry = getgrent()?.pointee {
            var members: [String] = []
            var index = 0
            while let member = entry.gr_mem?[index] {
                members.append(String(cString: member))
                index += 1
            }
            all.append((entry.gr_gid, members))
        }
        return all
    }

    @Test("a keychaind built by hand (the tests' own, beside this test program) asks nothing of the greeting's group")
    func ownBuildIsNotInstalled() {
        #expect(InstalledDaemon.besideThisProgram == nil)
        #expect(InstalledDaemon.expected == nil)
    }

    /// A socket pair whose reading end asks for credentials, as an installed client's does.
    static func pair() -> (daemon: Int32, client: Int32) {
        var ends: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        #expect(ckeychain_pass_credentials(ends[1]) == 0)
        return (ends[0], ends[1])
    }

    static let directories = ["/home/a/.local/share/keychains", "/home/a/.local/state/keychain", "/home/a/.config/keychain"]

    static func sendGreeting(_ fd: Int32, group: gid_t?) -> Int {
        let frame = Framing.framed(Framing.daemonGreeting(directories: directories))
        guard let group else { return Framing.send(Framing.daemonGreeting(directories: directories), on: fd) ? frame.count : -1 }
        return frame.withUnsafeBytes { ckeychain_send_as_group(fd, $0.baseAddress, $0.count, group) }
    }

    @Test("a greeting whose credentials name the installed keychaind's group is accepted; any other group is refused, saying so")
    func greetingGroupIsChecked() throws {
        let socket = URL(fileURLWithPath: "/run/user/1/keychain/keychaind.sock")
        let installed = InstalledDaemon(path: "/usr/bin/keychaind", group: getgid())
        let (daemon, client) = Self.pair()
        defer { close(daemon); close(client) }
        #expect(Self.sendGreeting(daemon, group: getgid()) > 0)
        let greeting = try #require(try SocketTrust.receiveGreeting(on: client))
        #expect(greeting.pid == getpid())
        #expect(try Framing.checkDaemonGreeting(greeting.bytes) == Self.directories)
        try SocketTrust.checkSender(of: greeting, installed: installed, socket: socket)

        let other = InstalledDaemon(path: "/usr/bin/keychaind", group: getgid() &+ 4242)
        let error = #expect(throws: KeychainError.self) { try SocketTrust.checkSender(of: greeting, installed: other, socket: socket) }
        #expect(error?.status == .internalComponent)
        #expect(error?.message.contains("not the installed keychaind (/usr/bin/keychaind)") == true)
        #expect(error?.message.contains("Nothing was sent") == true)
        #expect(error?.message.contains("kill \(getpid())") == true)
    }

    @Test("a plain greeting carries the sender's own group; one sent in two writes of two groups proves nothing")
    func plainAndMixedGreetings() throws {
        let socket = URL(fileURLWithPath: "/run/user/1/keychain/keychaind.sock")
        do {
            let (daemon, client) = Self.pair()
            defer { close(daemon); close(client) }
            #expect(Self.sendGreeting(daemon, group: nil) > 0)
            let greeting = try #require(try SocketTrust.receiveGreeting(on: client))
            #expect(greeting.gid == getegid())
            #expect(throws: KeychainError.self) {
                try SocketTrust.checkSender(of: greeting, installed: InstalledDaemon(path: "/usr/bin/keychaind", group: getegid() &+ 1),
                                            socket: socket)
            }
        }
        // Root may name any group (CAP_SETGID): the first half of the frame with one, the rest with another.
        if geteuid() == 0 {
            let (daemon, client) = Self.pair()
            defer { close(daemon); close(client) }
            let frame = Framing.framed(Framing.daemonGreeting(directories: ["/k", "/s", "/c"]))
            #expect(frame.withUnsafeBytes { ckeychain_send_as_group(daemon, $0.baseAddress, 3, 4242) } == 3)
            #expect(frame.withUnsafeBytes { ckeychain_send_as_group(daemon, $0.baseAddress! + 3, $0.count - 3, 4243) } == frame.count - 3)
            let greeting = try #require(try SocketTrust.receiveGreeting(on: client))
            #expect(greeting.pid == 0)
            #expect(throws: KeychainError.self) {
                try SocketTrust.checkSender(of: greeting, installed: InstalledDaemon(path: "/usr/bin/keychaind", group: 4242),
                                            socket: socket)
            }
        }
    }

    @Test("the kernel lets a process name none but its own groups in what it sends", .enabled(if: geteuid() != 0))
    func kernelRefusesAnotherGroup() {
        let (daemon, client) = Self.pair()
        defer { close(daemon); close(client) }
        let foreign = getgid() &+ 4242
        let sent = Self.sendGreeting(daemon, group: foreign)
        let error = errno
        #expect(sent == -1)
        #expect(error == EPERM)
    }
}
