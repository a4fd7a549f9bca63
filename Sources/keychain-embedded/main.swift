import Foundation
import KeychainClient
import KeychainCore
import KeychainTools
import Logging

#if canImport(Glibc)
import Glibc
#endif

// The command-line tools linked with the engine: what `security` (and the credential helpers) become when the keychain
// is opened in-process (EmbeddedTwin). Not meant to be run by hand: `keychain-embedded TOOL ARGUMENTS…`.

var arguments = Array(CommandLine.arguments.dropFirst())
let tool = arguments.isEmpty ? "" : arguments.removeFirst()
// The engine's own warnings (a wrong password, a keychain it repaired) would otherwise go to standard output, the
// tool's answer; its failures already reach the user as Apple's messages.
ProcessLogHandler.bootstrap(program: tool, environment: ProcessInfo.processInfo.environment, defaultLevel: .error)

// Embedded, each tool sees every access group (as macOS's tools see the file keychain); what it adds lands in its
// own group.
func embedded(_ group: String) -> EmbeddedKeychainService {
    EmbeddedKeychainService(caller: Caller(accessGroups: [group, Caller.wildcardGroup]))
}

switch tool {
case "security":
    EmbeddedTwin.adoptName(of: tool)
    let program = SecurityProgram { () throws(KeychainError) in embedded("security") }
    exit(program.run(arguments))
case "git-credential-keychain":
    EmbeddedTwin.adoptName(of: tool)
    GitCredentialHelper.main(arguments: arguments) { () throws(KeychainError) in
        KeychainClient(service: embedded(tool))
    }
case "docker-credential-keychain":
    EmbeddedTwin.adoptName(of: tool)
    DockerCredentialHelper.main(arguments: arguments) { () throws(KeychainError) in
        KeychainClient(service: embedded(tool))
    }
case "--version":
    print(BuildInfo.versionLine(for: "keychain-embedded"), terminator: "")
    exit(0)
default:
    writeError("keychain-embedded: runs the keychain's command-line tools with the engine in-process; "
        + "use security, git-credential-keychain or docker-credential-keychain\n")
    exit(2)
}

func writeError(_ text: String) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}
