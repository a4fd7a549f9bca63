import Foundation
import KeychainClient
import KeychainCore
import KeychainStorage

// The peer workload through the native API, in-process, on the user's default keychain (the same `login` keychain
// the `security` command uses, under the XDG directories of the environment).
//   PeerWorkload prefill N    adds N items ("fill-account-i", service "bench-fill") in one process
//   PeerWorkload run N        adds, finds, updates and deletes N items, printing one line per operation:
//                             "native-api <TAB> op <TAB> microseconds"
//   PeerWorkload unlock N     creates a keychain with a password beside it and times N unlocks of it (lock, then
//                             unlock: scrypt and the keybag), printed the same way

//   PeerWorkload fill N       adds N items in transactions of 10,000 (a large keychain, quickly)
//   PeerWorkload backup PATH  backs the default keychain up into PATH; restore PATH restores it (the service's
//                             calls, as `security backup-keychain` / `restore-keychain` make them), printing the
//                             time, the item count and the peak resident memory

let usage = "usage: PeerWorkload prefill|run|unlock|fill N | backup|restore PATH\n"
let arguments = CommandLine.arguments.dropFirst()
if arguments.count == 2, ["backup", "restore"].contains(arguments.first!) {
    let service = EmbeddedKeychainService(caller: Caller(accessGroups: [Caller.wildcardGroup]))
    let path = arguments.last!
    let start = ContinuousClock.now
    do {
        let keychain = service.defaultKeychain()
        let report = arguments.first == "backup"
            ? try service.backUp(keychain, to: path, password: SecretBytes(utf8: "backup password"))
            : try service.restore(from: path, password: SecretBytes(utf8: "backup password"), into: keychain)
        let elapsed = ContinuousClock.now - start
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        print("\(arguments.first!)\titems \(report.items)\tseconds \(elapsed)\tpeak RSS MiB \(usage.ru_maxrss / 1024)")
    } catch {
        FileHandle.standardError.write(Data("\(arguments.first!): \(error.message)\n".utf8))
        exit(1)
    }
    service.close()
    exit(0)
}
guard arguments.count == 2, let count = Int(arguments.last!) else {
    FileHandle.standardError.write(Data(usage.utf8))
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
case "fill", "fill-sync":
    // fill-sync: synchronizable items (docs/SYNC.md), for the sync benchmark.
    let synchronizable = arguments.first == "fill-sync"
    do {
        let locations = KeychainLocations.current()
        let url = locations.url(forKeychain: "login")
        let configuration = KeychainFile.Configuration(stateDirectory: locations.stateDirectory)
        let file = FileManager.default.fileExists(atPath: url.path)
            ? try KeychainFile.open(at: url, configuration: configuration)
            : try KeychainFile.create(at: url, password: nil, settings: .never, configuration: configuration)
        for start in stride(from: 0, to: count, by: 10_000) {
            try file.addAll((start..<min(count, start + 10_000)).map { i throws(KeychainError) in
                try QueryParser.parse(
                    ["class": "genp", "svce": "bench-fill", "acct": .string("fill-account-\(i)"),
                     "labl": .string("label \(i)"), "v_Data": .data(Data("fill-password-\(i)".utf8)),
                     "sync": .bool(synchronizable)], for: .add)
            }, caller: Caller(accessGroups: ["bench"]))
        }
        file.close()
    } catch {
        FileHandle.standardError.write(Data("fill: \(error.message)\n".utf8))
        exit(1)
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
case "unlock":
    let locations = KeychainLocations.current()
    let password = SecretBytes(utf8: "bench-password")
    do {
        let file = try KeychainFile.create(
            at: locations.url(forKeychain: "bench-unlock"), password: password,
            configuration: KeychainFile.Configuration(stateDirectory: locations.stateDirectory))
        for _ in 1...count {
            file.lock()
            timed("unlock") { try file.unlock(password: password) }
        }
        file.close()
    } catch {
        FileHandle.standardError.write(Data("unlock: \(error.message)\n".utf8))
        exit(1)
    }
default:
    FileHandle.standardError.write(Data(usage.utf8))
    exit(2)
}
OpenKeychains.shared.closeAll()
