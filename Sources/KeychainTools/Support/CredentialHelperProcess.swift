import KeychainCore
import KeychainInterface

#if canImport(Glibc)
import Glibc
#endif

/// How both credential helpers run: connect first, while keychaind can still read /proc/PID/exe to know this program
/// (a process that is not dumpable cannot be identified by a daemon of its own user), then harden before any secret
/// is read, then serve the one request and exit. `fail` reports an error in the helper's own protocol.
enum CredentialHelperProcess {
    static func run(client makeClient: () throws(KeychainError) -> KeychainClient,
                    _ body: (KeychainClient) throws(KeychainError) -> Void,
                    fail: (String) -> Never) -> Never
    {
        do throws(KeychainError) {
            let client = try makeClient()
            ProcessHardening.disableCoreDumps()
            try body(client)
            client.close()
            exit(0)
        } catch {
            fail(error.message)
        }
    }
}
