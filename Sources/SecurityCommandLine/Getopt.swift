/// POSIX getopt, as the macOS tool parses each subcommand's flags: `spec` lists option letters, a `:` after a
/// letter means it takes a value. Parsing stops at the first operand or `--`.
public struct Getopt: Sendable {
    public private(set) var options: [(Character, String?)] = []
    public private(set) var operands: [String] = []

    public enum Failure: Error { case usage }

    public init(_ arguments: [String], spec: String) throws(Failure) {
        // The letters in a list, not a dictionary: a spec is a few letters, and the first dictionary of Character
        // in a process costs its start a scan of every protocol conformance linked in (the runtime checks Hashable).
        var takesValue: [(letter: Character, hasValue: Bool)] = []
        let letters = Array(spec)
        var i = 0
        while i < letters.count {
            let hasValue = i + 1 < letters.count && letters[i + 1] == ":"
            takesValue.append((letters[i], hasValue))
            i += hasValue ? 2 : 1
        }
        var index = 0
        while index < arguments.count {
            let arg = arguments[index]
            if arg == "--" { index += 1; break }
            guard arg.hasPrefix("-"), arg.count > 1 else { break }
            var chars = Array(arg.dropFirst())
            while !chars.isEmpty {
                let c = chars.removeFirst()
                guard let hasValue = takesValue.last(where: { $0.letter == c })?.hasValue else { throw .usage }
                if hasValue {
                    if !chars.isEmpty {
                        options.append((c, String(chars)))
                        chars = []
                    } else if index + 1 < arguments.count {
                        index += 1
                        options.append((c, arguments[index]))
                    } else {
                        throw .usage
                    }
                } else {
                    options.append((c, nil))
                }
            }
            index += 1
        }
        operands = Array(arguments[index...])
    }

    public func has(_ c: Character) -> Bool { options.contains { $0.0 == c } }
    public func value(_ c: Character) -> String? { options.last { $0.0 == c }?.1 }
}
