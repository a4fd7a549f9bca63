import KeychainCore

/// The Apple status a call ends with: 0 for success, the KeychainError's code, 1 for any other error.
public func status(_ body: () throws -> Void) -> Int32 {
    do {
        try body()
        return 0
    } catch {
        return (error as? KeychainError)?.status.rawValue ?? 1
    }
}
