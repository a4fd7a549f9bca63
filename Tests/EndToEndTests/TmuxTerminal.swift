import Foundation
import KeychainClient

/// A detached tmux session running one shell command: the terminal a person would type a pinentry password into.
///
/// Every wait ends as soon as its condition holds and gives up only after a generous deadline: on a loaded CI
/// machine (two cores, the whole suite in parallel, memory-hard KDFs) a pinentry can take many seconds to appear,
/// and keys typed before it draws its screen are lost.
struct TmuxTerminal {
    let name = "kc-\(UUID().uuidString.prefix(8))"

    init(command: String) throws {
        try Self.tmux("new-session", "-d", "-s", name, "-x", "100", "-y", "30", command)
    }

    @discardableResult
    static func tmux(_ arguments: String...) throws -> String {
        try tmux(arguments)
    }

    @discardableResult
    static func tmux(_ arguments: [String]) throws -> String {
        String(decoding: try ChildProcess.run("/usr/bin/tmux", arguments: arguments).stdout, as: UTF8.self)
    }

    func screen() -> String { (try? Self.tmux("capture-pane", "-p", "-t", name)) ?? "" }

    /// Waits until the screen shows `text`; returns the last screen seen (check it for `text` yourself).
    @discardableResult
    func waitForScreen(containing text: String, seconds: Double = 60) -> String {
        var last = ""
        _ = waitUntil(seconds: seconds) {
            last = screen()
            return last.contains(text)
        }
        return last
    }

    /// Types literal text, or a named key (`Enter`, `Escape`, `Tab`).
    func type(_ keys: [String]) throws {
        for key in keys {
            if ["Enter", "Escape", "Tab"].contains(key) {
                try Self.tmux("send-keys", "-t", name, key)
            } else {
                try Self.tmux("send-keys", "-t", name, "-l", key)
            }
            // pinentry-curses redraws after each key; a key sent mid-redraw still arrives, but give it a beat so
            // focus changes (Tab) are applied in order on slow machines.
            usleep(150_000)
        }
    }

    func close() { _ = try? Self.tmux("kill-session", "-t", name) }

    /// Polls `condition` every 100 ms until it holds or `seconds` pass.
    func waitUntil(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(100_000)
        }
        return condition()
    }
}
