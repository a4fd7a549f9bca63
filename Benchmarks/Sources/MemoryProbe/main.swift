import BenchmarkFixtures
import Foundation
import KeychainCore
import KeychainStorage

// Opens a keychain with N items (built by the StorageBenchmarks store cache, or here if missing), unlocks it,
// runs finds, and prints the process's resident memory: now (VmRSS) and at its peak (VmHWM, which includes the
// 128 MiB scrypt scratch of the unlock).
//   swift run -c release MemoryProbe 100000

func status(_ field: String) -> String {
    let text = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    return text.split(separator: "\n").first { $0.hasPrefix(field + ":") }.map {
        $0.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces)
    } ?? "?"
}

let size = Int(CommandLine.arguments.dropFirst().first ?? "100000") ?? 100_000
let url = try BenchmarkStore.url(size: size)
let configuration = BenchmarkStore.configuration()
let password = BenchmarkStore.password
let caller = BenchmarkStore.caller
print("before open: VmRSS \(status("VmRSS"))")
let start = Date()
let file = try KeychainFile.open(at: url, configuration: configuration)
let opened = Date()
try file.unlock(password: password)
let unlocked = Date()
for i in 0..<1000 {
    _ = try file.search(
        QueryParser.parse(["class": "genp", "svce": "bench", "acct": .string("account-\((i * 7919) % size)"),
                           "r_Data": true], for: .search), caller: caller)
}
print("items: \(size)")
print("open (manifest check over every row): \(String(format: "%.3f", opened.timeIntervalSince(start))) s")
print("unlock (scrypt): \(String(format: "%.3f", unlocked.timeIntervalSince(opened))) s")
print("after open, unlock and 1000 finds: VmRSS \(status("VmRSS")), peak VmHWM \(status("VmHWM"))")
