/// Each subcommand's getopt flag spec, in one place: the parsers, the completions and the man page read it.
enum CommandFlags {
    static let addGeneric = "a:c:C:D:G:j:l:s:T:w:X:p:AU"
    static let addInternet = "a:c:C:d:D:j:l:p:P:r:s:t:T:w:X:AU"
    static let findGeneric = "a:c:C:D:G:j:l:s:gw"
    static let findInternet = "a:c:C:d:D:j:l:p:P:r:s:t:gw"
    static let deleteGeneric = "a:c:C:D:G:j:l:s:"
    static let deleteInternet = "a:c:C:d:D:j:l:p:P:r:s:t:"
    static let createKeychain = "Pp:"
    static let lockKeychain = "a"
    static let unlockKeychain = "up:"
    static let setPassword = "o:p:"
    static let setSettings = "lut:"
    static let dump = "adir"
    static let domainAndSet = "d:s"

    static let byCommand: [String: String] = [
        "add-generic-password": addGeneric, "add-internet-password": addInternet,
        "find-generic-password": findGeneric, "find-internet-password": findInternet,
        "delete-generic-password": deleteGeneric, "delete-internet-password": deleteInternet,
        "create-keychain": createKeychain, "lock-keychain": lockKeychain, "unlock-keychain": unlockKeychain,
        "set-keychain-password": setPassword, "set-keychain-settings": setSettings, "dump-keychain": dump,
        "list-keychains": domainAndSet, "default-keychain": domainAndSet, "login-keychain": domainAndSet,
    ]

    /// The commands that also take `--json`.
    static let json: Set<String> = [
        "find-generic-password", "find-internet-password", "dump-keychain",
    ]

    /// `-a`, `-b:`… as a list of `-x` words.
    static func words(_ spec: String) -> [String] { spec.filter { $0 != ":" }.map { "-\($0)" } }
}
