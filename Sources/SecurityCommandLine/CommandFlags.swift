/// Each subcommand's getopt flag spec, in one place: the parsers, the completions and the man page read it.
public enum CommandFlags {
    public static let addGeneric = "a:c:C:D:G:j:l:s:T:w:X:p:AU"
    public static let addInternet = "a:c:C:d:D:j:l:p:P:r:s:t:T:w:X:AU"
    public static let findGeneric = "a:c:C:D:G:j:l:s:gw"
    public static let findInternet = "a:c:C:d:D:j:l:p:P:r:s:t:gw"
    public static let deleteGeneric = "a:c:C:D:G:j:l:s:"
    public static let deleteInternet = "a:c:C:d:D:j:l:p:P:r:s:t:"
    public static let createKeychain = "Pp:"
    public static let lockKeychain = "a"
    public static let unlockKeychain = "up:"
    public static let setPassword = "o:p:"
    public static let setSettings = "lut:"
    public static let dump = "adir"
    public static let domainAndSet = "d:s"
    public static let importItems = "k:t:f:P:wxa:AT:"
    public static let export = "k:t:f:wpP:o:"
    public static let addCertificates = "k:"
    public static let findCertificate = "ac:e:mpZ"
    public static let findIdentity = "p:s:v"
    public static let deleteCertificate = "c:Z:t"
    public static let backupKeychain = "k:o:P:"
    public static let restoreKeychain = "k:i:P:"

    public static let byCommand: [String: String] = [
        "add-generic-password": addGeneric, "add-internet-password": addInternet,
        "find-generic-password": findGeneric, "find-internet-password": findInternet,
        "delete-generic-password": deleteGeneric, "delete-internet-password": deleteInternet,
        "create-keychain": createKeychain, "lock-keychain": lockKeychain, "unlock-keychain": unlockKeychain,
        "set-keychain-password": setPassword, "set-keychain-settings": setSettings, "dump-keychain": dump,
        "list-keychains": domainAndSet, "default-keychain": domainAndSet, "login-keychain": domainAndSet,
        "import": importItems, "export": export, "add-certificates": addCertificates,
        "find-certificate": findCertificate, "find-identity": findIdentity,
        "delete-certificate": deleteCertificate, "delete-identity": deleteCertificate,
        "backup-keychain": backupKeychain, "restore-keychain": restoreKeychain,
    ]

    /// The commands that also take `--json`.
    public static let json: Set<String> = [
        "find-generic-password", "find-internet-password", "dump-keychain",
    ]

    /// `-a`, `-b:`… as a list of `-x` words.
    public static func words(_ spec: String) -> [String] { spec.filter { $0 != ":" }.map { "-\($0)" } }
}
