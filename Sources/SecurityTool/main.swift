import KeychainCore
import KeychainInterface
import KeychainTools

#if canImport(Glibc)
import Glibc
#endif

// `security` over the client interface only: through keychaind it never loads the engine. When the keychain is to be
// opened in this process, it becomes its engine-linked twin (`keychain-embedded security …`) before reading anything.

let arguments = Array(CommandLine.arguments.dropFirst())

func service() throws(KeychainError) -> any KeychainService {
    try EmbeddedTwin.remoteOrBecomeEmbedded(tool: "security")
}

// The service first, while keychaind can still read /proc/PID/exe to know this program (a process that is not
// dumpable cannot be identified by a daemon of its own user); then no core file and not dumpable, before any
// password is read (SecurityProgram.run hardens again, for commands that needed no service here).
var chosen: (any KeychainService)?
if SecurityProgram.needsKeychain(arguments) {
    do { chosen = try service() } catch {
        writeError("security: \(error.message)\n")
        exit(Int32(truncatingIfNeeded: error.status.rawValue) & 0xff)
    }
}
ProcessHardening.disableCoreDumps()
let program = SecurityProgram { [chosen] () throws(KeychainError) -> any KeychainService in
    if let chosen { return chosen }
    return try service()
}
exit(program.run(arguments))

func writeError(_ text: String) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}
