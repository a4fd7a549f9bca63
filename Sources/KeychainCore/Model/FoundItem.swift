/// An item found by a search, with its secret when the query asked for data.
public struct FoundItem: Sendable {
    public var item: Item
    public var secret: SecretBytes?

    public init(item: Item, secret: SecretBytes?) {
        self.item = item
        self.secret = secret
    }
}
