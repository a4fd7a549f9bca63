import KeychainCore
import KeychainInterface
import KeychainTools

// docker-credential-keychain over the client interface only: through keychaind it never loads the engine; to open
// the keychain in this process it becomes `keychain-embedded docker-credential-keychain …` before reading its input.

DockerCredentialHelper.main(arguments: Array(CommandLine.arguments.dropFirst())) { () throws(KeychainError) in
    KeychainClient(service: try EmbeddedTwin.remoteOrBecomeEmbedded(tool: "docker-credential-keychain"))
}
