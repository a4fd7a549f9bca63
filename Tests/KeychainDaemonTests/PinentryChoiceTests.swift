import Foundation
import Testing
@testable import KeychainDaemon

/// Which program keychaind runs as its pinentry. PINENTRY_PROGRAM comes from whoever started keychaind, which may be
/// a program of the user: only a file root alone can change is run, and the installed keychaind runs nothing but a
/// pinentry (an interpreter such as python3 would run that program's code from its HOME).
@Suite("The pinentry keychaind runs")
struct PinentryChoiceTests {
    @Test("an installed keychaind runs only a pinentry as PINENTRY_PROGRAM; a build of one's own any root-owned program")
    func installedRunsOnlyAPinentry() {
        let python = URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().path
        let chosen = ["PINENTRY_PROGRAM": "/usr/bin/python3"]
        #expect(KeychainDaemonServer.pinentryProgram(chosen, installed: false) == python)
        let installed = KeychainDaemonServer.pinentryProgram(chosen, installed: true)
        #expect(installed != python)
        #expect(KeychainDaemonServer.isPinentry(installed))
        #expect(KeychainDaemonServer.isPinentry("/usr/bin/pinentry-curses"))
        #expect(KeychainDaemonServer.isPinentry("/usr/bin/pinentry"))
        #expect(!KeychainDaemonServer.isPinentry("/usr/bin/pinentryx"))
        #expect(!KeychainDaemonServer.isPinentry("/usr/bin/python3"))
        #expect(!KeychainDaemonServer.isPinentry("/opt/pinentry-stuff/sh"))
    }

    @Test("a user's own file is never run as pinentry, installed or not")
    func usersFileIsNotRun() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pinentry-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: directory) }
        let own = directory.appendingPathComponent("pinentry-own").path
        #expect(FileManager.default.createFile(atPath: own, contents: Data("#!/bin/sh\n".utf8),
                                               attributes: [.posixPermissions: 0o755]))
        chmod(directory.path, 0o777)  // anyone may replace what is in it
        for installed in [false, true] {
            #expect(KeychainDaemonServer.pinentryProgram(["PINENTRY_PROGRAM": own], installed: installed) != own)
        }
    }
}
