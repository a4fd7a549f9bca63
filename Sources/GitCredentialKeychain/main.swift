import KeychainCore
import KeychainInterface
import KeychainTools

// git-credential-keychain over the client interface only: through keychaind it never loads the engine; to open the
// keychain in this process it becomes `keychain-embedded git-credential-keychain …` before reading its request.

GitCredentialHelper.main(arguments: Array(CommandLine.arguments.dropFirst())) { () throws(KeychainError) in
    KeychainClient(service: try EmbeddedTwin.remoteOrBecomeEmbedded(tool: "git-credential-keychain"))
}
