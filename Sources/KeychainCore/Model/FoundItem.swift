/// An item found by a search, with its secret when the query asked for data.
public struct FoundItem: Sendable {
    public var item: Item
    public var secret: SecretBytes?

    public init(item: Item, secret: SecretBytes?) {
        self.item = item
        self.secret = secret
    }
}

/// What a search along the search list found (`KeychainService.firstMatch`).
public enum SearchListMatch: Sendable {
    /// What the first keychain in list order that had a match found there.
    case found(KeychainReference, [FoundItem])
    /// The walk reached a keychain locked behind a password before any match, or the list names no keychain that
    /// exists: asking for that password, or making the login keychain, is the caller's, which walks the list itself.
    case callerWalks
}
