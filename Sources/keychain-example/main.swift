import Foundation
import KeychainClient
import KeychainCore

// A small program that stores and reads a secret through the native API, in the user's login keychain.
//   echo -n s3cret | keychain-example set SERVICE ACCOUNT
//   keychain-example get SERVICE ACCOUNT
//   keychain-example delete SERVICE ACCOUNT
//   keychain-example --synchronizable set|get|delete SERVICE ACCOUNT   (an item that syncs: docs/SYNC.md)
// The secret comes on standard input, never as an argument (it would show in `ps` and shell history).

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("keychain-example: \(message)\n".utf8))
    exit(code)
}

var arguments = CommandLine.arguments.dropFirst()
let synchronizable = arguments.first == "--synchronizable"
if synchronizable { arguments = arguments.dropFirst() }
guard arguments.count == 3, let command = arguments.first else {
    fail("usage: keychain-example [--synchronizable] set|get|delete SERVICE ACCOUNT (the secret on stdin for set)",
         code: 2)
}
let service = arguments[arguments.startIndex + 1]
let account = arguments[arguments.startIndex + 2]

do {
    let keychain = try Keychain(service: service).synchronizable(synchronizable)
    switch command {
    case "set":
        var bytes = [UInt8](FileHandle.standardInput.readDataToEndOfFile())
        if bytes.last == 0x0a { bytes.removeLast() }
        try keychain.set(SecretBytes(consuming: &bytes), for: account)
    case "get":
        guard let secret = try keychain.secret(for: account) else {
            throw KeychainError(.itemNotFound)
        }
        secret.withUnsafeBytes { FileHandle.standardOutput.write(Data($0)) }
        FileHandle.standardOutput.write(Data("\n".utf8))
    case "delete":
        var query = ItemQuery.matching(.genericPassword, [.service: .string(service), .account: .string(account)],
                                       for: .delete)
        query.setSynchronizable(synchronizable)
        try keychain.client.delete(query)
    default:
        fail("unknown command \(command)", code: 2)
    }
} catch let error as KeychainError {
    fail("\(error.message) (\(error.status.rawValue))", code: error.status.exitCode)
} catch {
    fail("\(error)", code: 1)
}
