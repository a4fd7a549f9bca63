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
        try tmux("new-session", "-d", "-s", name, "-x", "100", "-y", "30", command)
    }

    /// Runs tmux against this terminal's own server (`-L`, a socket named after it, `-f /dev/null`): tests that
    /// run at the same time, or a tmux of the machine's user, share neither a server's start nor its settings.
    @discardableResult
    func tmux(_ arguments: String...) throws -> String {
        let output = try ChildProcess.run("/usr/bin/tmux", arguments: ["-L", name, "-f", "/dev/null"] + arguments)
        return String(decoding: output.stdout, as: UTF8.self)
    }

    func screen() -> String { (try? tmux("capture-pane", "-p", "-t", name)) ?? "" }

    /// The screen with its attributes as escape sequences (pinentry-curses shows the focused button in reverse
    /// video, `ESC[7m`).
    func styledScreen() -> String { (try? tmux("capture-pane", "-e", "-p", "-t", name)) ?? "" }

    /// Moves pinentry-curses' focus with Tab until `button` (as drawn: `<Cancel>`) is highlighted. It starts only
    /// once the whole dialog is drawn (its buttons come last) and sends the next Tab only after the last one moved
    /// the highlight: a Tab counted against a redraw that was not its own stays in flight and moves the focus past
    /// the button after this returns, so Enter lands on the password field (seen once on a loaded CI machine).
    @discardableResult
    func focus(_ button: String, maximumTabs: Int = 6) throws -> Bool {
        guard waitForScreen(containing: button).contains(button) else { return false }
        for _ in 0..<maximumTabs {
            let before = highlighted()
            if before == button { return true }
            try tmux("send-keys", "-t", name, "Tab")
            _ = waitUntil(seconds: 20) { highlighted() != before }
        }
        return highlighted() == button
    }

    /// The button shown in reverse video (`<OK>`, `<Cancel>`), or nil while the focus is in the password field.
    func highlighted() -> String? {
        let screen = styledScreen()
        guard let start = screen.range(of: "\u{1b}[7m<")?.upperBound,
              let end = screen[start...].firstIndex(of: ">") else { return nil }
        return "<" + screen[start..<end] + ">"
    }

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

    /// Waits for the whole pinentry-curses dialog (its buttons are drawn last), types `password`, waits until the
    /// field shows one `*` per character, then presses Enter. Returns false (with the screen left as it was) if the
    /// dialog never finished drawing or the characters never all arrived, so a test fails with a reason instead of
    /// leaving pinentry waiting for an Enter that belongs to lost keys.
    func enterPassword(_ password: String) throws -> Bool {
        guard waitForScreen(containing: "<Cancel>").contains("<Cancel>") else { return false }
        try tmux("send-keys", "-t", name, "-l", password)
        let masked = String(repeating: "*", count: password.count) + "_"
        guard waitUntil(seconds: 30, { screen().contains(masked) }) else { return false }
        try tmux("send-keys", "-t", name, "Enter")
        return true
    }

    /// Types literal text, or a named key (`Enter`, `Escape`, `Tab`).
    func type(_ keys: [String]) throws {
        for key in keys {
            if ["Enter", "Escape", "Tab"].contains(key) {
                try tmux("send-keys", "-t", name, key)
            } else {
                try tmux("send-keys", "-t", name, "-l", key)
            }
            // pinentry-curses redraws after each key; a key sent mid-redraw still arrives, but give it a beat so
            // focus changes (Tab) are applied in order on slow machines.
            usleep(150_000)
        }
    }

    func close() { _ = try? tmux("kill-server") }

    /// The words of a captured screen as one line: a dialog wraps its text where the terminal's width falls (a long
    /// program path moves every later word), so tests look for phrases in this, not in the raw screen.
    static func words(of screen: String) -> String {
        screen.split(whereSeparator: { $0.isWhitespace || "│┌┐└┘─".contains($0) }).joined(separator: " ")
    }

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
