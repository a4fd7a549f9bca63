import SecurityCommandLine

/// Builds `security` argument lists from fuzzer bytes (every subcommand's flag spec, its flag words, `--`, bundles,
/// values and operands) and checks getopt's contract: it throws `.usage` or returns options that the spec allows,
/// with a value exactly for the letters that take one, and operands that are the tail of the arguments.
let commands = CommandFlags.byCommand.sorted { $0.key < $1.key }
let pieces = ["--", "-", "--json", "", " ", "-:", "-\u{0}", "value", "é", "-aa", "-wU"]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCommandLine(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let first = bytes.first else { return 0 }
    let (_, spec) = commands[Int(first) % commands.count]
    let letters = Array(spec.filter { $0 != ":" })
    var arguments: [String] = []
    var i = 1
    while i < bytes.count {
        let b = bytes[i]
        switch b % 4 {
        case 0 where !letters.isEmpty: arguments.append("-" + String(letters[Int(b / 4) % letters.count]))
        case 1 where !letters.isEmpty:  // a bundle of two letters
            arguments.append("-" + String(letters[Int(b / 4) % letters.count]) + String(letters[Int(b / 16) % letters.count]))
        case 2: arguments.append(pieces[Int(b / 4) % pieces.count])
        default:
            let end = min(bytes.count, i + 1 + Int(b / 32))
            arguments.append(String(decoding: bytes[min(i + 1, end)..<end], as: UTF8.self))
            i = end - 1
        }
        i += 1
    }
    guard let parsed = try? Getopt(arguments, spec: spec) else { return 0 }
    for (letter, value) in parsed.options {
        guard let at = spec.firstIndex(of: letter), letter != ":" else { fatalError("option -\(letter) not in \(spec)") }
        let takesValue = spec.index(after: at) < spec.endIndex && spec[spec.index(after: at)] == ":"
        precondition(takesValue == (value != nil), "-\(letter) value \(String(describing: value)) against \(spec)")
    }
    precondition(parsed.operands.count <= arguments.count && Array(arguments.suffix(parsed.operands.count)) == parsed.operands)
    return 0
}
