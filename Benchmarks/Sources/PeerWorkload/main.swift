import Foundation
import KeychainClient
import KeychainCore

// The peer workload through the native API, in-process, on the user's default keychain (the same `login` keychain
// the `security` command uses, under the XDG directories of the environment).
//   PeerWorkload prefill N    adds N items ("fill-account-i", service "bench-fill") in one process
//   PeerWorkload run N        adds, finds, updates and deletes N items, printing one line per operation:
//                             "native-api <TAB> op <TAB> microseconds"

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count == 2, let count = Int(arguments.last!) else {
    FileHandle.standardError.write(Data("usage: PeerWorkload prefill|run N\n".utf8))
    exit(2)
}
let client: KeychainClient
do { client = try KeychainClient.openDefault(caller: Caller(accessGroups: ["bench"])) } catch {
    FileHandle.standardError.write(Data("PeerWorkload: \(error.message)\n".utf8))
    exit(1)
}

func item(_ service: String, _ account: String) -> [String: QueryValue] {
    ["class": "genp", "svce": .string(service), "acct": .string(account)]
}

func timed(_ op: String, _ body: () throws -> Void) {
    let start = ContinuousClock.now
    do { try body() } catch {
        FileHandle.standardError.write(Data("failed: \(op): \((error as? KeychainError)?.message ?? "\(error)")\n".utf8))
    }
    let elapsed = ContinuousClock.now - start
    let micros = elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
    print("native-api\t\(op)\t\(micros)")
}

switch arguments.first {
case "prefill":
    for i in 0..<count {
        do {
            var attributes = item("bench-fill", "fill-account-\(i)")
            attributes["v_Data"] = .data(Data("fill-password-\(i)".utf8))
            try client.add(attributes)
        } catch {
            FileHandle.standardError.write(Data("prefill \(i): \(error.message)\n".utf8))
            exit(1)
        }
    }
case "run":
    for i in 1...count {
        timed("add") {
            var attributes = item("bench-service", "native-account-\(i)")
            attributes["v_Data"] = .data(Data("password-\(i)".utf8))
            try client.add(attributes)
        }
    }
    for i in 1...count {
        timed("find") {
            var query = item("bench-service", "native-account-\(i)")
            query["r_Data"] = true
            guard try client.search(query).first?.secret != nil else { throw KeychainError.itemNotFound() }
        }
    }
    for i in 1...count {
        timed("update") {
            try client.update(item("bench-service", "native-account-\(i)"),
                              with: ["v_Data": .data(Data("changed-\(i)".utf8))])
        }
    }
    for i in 1...count {
        timed("delete") { try client.delete(item("bench-service", "native-account-\(i)")) }
    }
default:
    FileHandle.standardError.write(Data("usage: PeerWorkload prefill|run N\n".utf8))
    exit(2)
}
OpenKeychains.shared.closeAll()
