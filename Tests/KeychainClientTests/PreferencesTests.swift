import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage
import Testing
@testable import KeychainInterface

@Suite("Several keychains, the default keychain and the search list")
struct PreferencesTests {
    @Test("names resolve under the keychain directory; paths are kept")
    func names() throws {
        let kc = try TestKeychain()
        let l = kc.locations
        #expect(l.url(forKeychain: "work").lastPathComponent == "work.keychain-db")
        #expect(l.url(forKeychain: "work.keychain").lastPathComponent == "work.keychain-db")
        #expect(l.url(forKeychain: "/tmp/x.keychain-db").path == "/tmp/x.keychain-db")
        #expect(l.url(forKeychain: "work").deletingLastPathComponent().path == l.keychainDirectory.path)
    }

    @Test("default and search list round-trip; deleting a keychain drops it from both")
    func preferences() throws {
        let kc = try TestKeychain()
        let prefs = KeychainPreferences(locations: kc.locations)
        #expect(prefs.defaultKeychain() == kc.locations.loginKeychain)
        #expect(prefs.searchList() == [kc.locations.loginKeychain])
        let test = kc.locations.url(forKeychain: "test")
        try prefs.setDefaultKeychain(test)
        try prefs.setSearchList([test, kc.locations.loginKeychain])
        #expect(prefs.defaultKeychain() == test)
        #expect(prefs.searchList() == [test, kc.locations.loginKeychain])
        try prefs.deleteKeychain(test)
        #expect(!FileManager.default.fileExists(atPath: test.path))
        #expect(prefs.searchList() == [kc.locations.loginKeychain])
        #expect(prefs.defaultKeychain() == kc.locations.loginKeychain)
        #expect(status { try prefs.deleteKeychain(test) } == -25294)
        try prefs.setSearchList([])
        #expect(prefs.searchList() == [])
    }

    @Test("a preference file changed by another process is seen at once, even rewritten in place to the same length")
    func changedElsewhere() throws {
        let kc = try TestKeychain()
        let prefs = KeychainPreferences(locations: kc.locations)
        let a = kc.locations.url(forKeychain: "aaaa"), b = kc.locations.url(forKeychain: "bbbb")
        try prefs.setSearchList([a])
        #expect(prefs.paths().searchList == [a.path])
        // Old enough to be remembered (a file changed in the last two seconds never is), then read.
        Thread.sleep(forTimeInterval: 2.2)
        #expect(prefs.paths().searchList == [a.path])
        #expect(prefs.searchList() == [a])
        // Same inode, same size, the same second: only the status-change time tells.
        let handle = try FileHandle(forWritingTo: kc.locations.searchListFile)
        try handle.write(contentsOf: Data((b.path + "\n").utf8))
        try handle.close()
        #expect(prefs.paths().searchList == [b.path])
        #expect(prefs.searchList() == [b])
        try FileManager.default.removeItem(at: kc.locations.searchListFile)
        #expect(prefs.paths().searchList == [prefs.paths().defaultKeychain])
    }

    @Test("a preference file that is a symbolic link: a change of its target, outside the watched directory, is seen")
    func linkedPreference() throws {
        let kc = try TestKeychain()
        let prefs = KeychainPreferences(locations: kc.locations)
        let a = kc.locations.url(forKeychain: "aaaa"), b = kc.locations.url(forKeychain: "bbbb")
        try prefs.setSearchList([a])
        let elsewhere = kc.locations.stateDirectory.appendingPathComponent("search-list-target")
        try FileManager.default.createDirectory(at: kc.locations.stateDirectory, withIntermediateDirectories: true)
        try Data((a.path + "\n").utf8).write(to: elsewhere)
        try FileManager.default.removeItem(at: kc.locations.searchListFile)
        try FileManager.default.createSymbolicLink(at: kc.locations.searchListFile, withDestinationURL: elsewhere)
        #expect(prefs.paths().searchList == [a.path])
        #expect(prefs.paths().searchList == [a.path])
        try Data((b.path + "\n").utf8).write(to: elsewhere, options: .atomic)
        #expect(prefs.paths().searchList == [b.path])
    }

    @Test("two keychains are independent")
    func independent() throws {
        let kc = try TestKeychain()
        let other = try KeychainClient.open(
            keychain: "other", locations: kc.locations, caller: Caller(accessGroups: ["G1"]), kdf: .fastForTests)
        try kc.client.add(["class": "genp", "acct": "a"])
        #expect(status { _ = try other.search(["class": "genp", "acct": "a"]) } == -25300)
        try other.add(["class": "genp", "acct": "a"])
    }
}

@Suite("Keychain locations")
struct KeychainLocationsTests {
    @Test("the daemon's socket is the same before and after the directories exist (a client started before keychaind made them found no daemon)")
    func socketStableAcrossDirectoryCreation() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("loc-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let environment = ["HOME": home.path, "XDG_RUNTIME_DIR": home.appendingPathComponent("run").path]
        let before = KeychainLocations.current(environment: environment)
        for directory in [".local/share/keychains", ".local/state/keychain", ".config/keychain"] {
            try FileManager.default.createDirectory(at: home.appendingPathComponent(directory), withIntermediateDirectories: true)
        }
        let after = KeychainLocations.current(environment: environment)
        #expect(before.daemonSocket(home: home.path).path == after.daemonSocket(home: home.path).path)
        #expect(before.daemonSocket(home: home.path).lastPathComponent == "keychaind.sock")
    }

    @Test("the directories are the paths URL's own joining gives, for homes and XDG directories with or without a trailing slash",
          arguments: ["/", "/home/u", "/home/u/", "/home//u", "/home/u/.", "/home/ü ñ", "relative/home"])
    func joinedAsURLJoins(home: String) {
        let base = URL(fileURLWithPath: home)
        func expected(_ name: String) -> String { base.appendingPathComponent(name).path }
        let plain = KeychainLocations.current(environment: ["HOME": home, "XDG_RUNTIME_DIR": "/run/user/7/"])
        #expect(plain.keychainDirectory.path == expected(".local/share/keychains"))
        #expect(plain.stateDirectory.path == expected(".local/state/keychain"))
        #expect(plain.configDirectory.path == expected(".config/keychain"))
        #expect(plain.runtimeDirectory.path == "/run/user/7/keychain")
        // The user's own directories get the one socket name keychaind listens on; any other set a hashed one.
        #expect(plain.daemonSocket(home: home).path == "/run/user/7/keychain/keychaind.sock")
        let moved = KeychainLocations.current(environment: ["HOME": home, "XDG_DATA_HOME": "/data/", "XDG_RUNTIME_DIR": "/r"])
        #expect(moved.keychainDirectory.path == "/data/keychains")
        #expect(moved.daemonSocket(home: home).path.hasPrefix("/r/keychain/keychaind-"))
    }
}
