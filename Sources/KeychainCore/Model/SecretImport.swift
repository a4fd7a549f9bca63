/// One secret read from another store (`security import-secrets`), as the item it becomes.
public struct ImportedSecret: Sendable {
    /// The item's class and attributes, as `SecItemAdd` takes them (no `v_Data`).
    public var attributes: [String: QueryValue]
    public var secret: SecretBytes
    /// What messages call it: where it came from in its store ("email/alice", "Finance/Bank PIN").
    public var name: String

    public init(attributes: [String: QueryValue], secret: SecretBytes, name: String) {
        self.attributes = attributes
        self.secret = secret
        self.name = name
    }
}

/// A batch of secrets to store, or a store the keychain service reads itself (a keyring file, whose decryption
/// belongs where the keychain's ciphers are).
public struct SecretImport: Sendable {
    public enum Source: Sendable {
        case entries([ImportedSecret])
        /// A gnome-keyring `.keyring` file and its password.
        case gnomeKeyringFile(SecretBytes, password: SecretBytes)
    }

    public var source: Source
    /// Count what would come, by kind; store nothing.
    public var dryRun: Bool

    public init(_ source: Source, dryRun: Bool = false) {
        self.source = source
        self.dryRun = dryRun
    }
}

/// What an import did, item by item where something went wrong.
public struct ImportReport: Sendable, Hashable {
    /// Items stored (or, in a dry run, that would be), by class code ("genp", "inet").
    public var added: [String: Int]
    /// Items that were there already (the same primary key): an import run twice adds nothing the second time.
    public var alreadyThere: Int
    /// Items that could not be stored, each with what stopped it; the others went on.
    public var failures: [Failure]

    public struct Failure: Sendable, Hashable {
        public var name: String
        public var status: KeychainStatus
        public var message: String

        public init(name: String, status: KeychainStatus, message: String) {
            self.name = name
            self.status = status
            self.message = message
        }
    }

    public init(added: [String: Int] = [:], alreadyThere: Int = 0, failures: [Failure] = []) {
        self.added = added
        self.alreadyThere = alreadyThere
        self.failures = failures
    }

    public var addedCount: Int { added.values.reduce(0, +) }

    public mutating func merge(_ other: ImportReport) {
        added.merge(other.added, uniquingKeysWith: +)
        alreadyThere += other.alreadyThere
        failures += other.failures
    }
}
