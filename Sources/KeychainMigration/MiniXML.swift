#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KeychainCore

/// The XML that KeePassXC's export writes, read into elements: start and end tags with attributes, text, the five
/// predefined entities and character references, CDATA, comments and the declaration. No DTD, namespaces or
/// external anything: enough for a data export, and nothing that reaches outside the file.
enum MiniXML {
    final class Element {
        let name: String
        var attributes: [String: String]
        var children: [Element] = []
        var text = ""

        init(name: String, attributes: [String: String]) {
            self.name = name
            self.attributes = attributes
        }

        func child(_ name: String) -> Element? { children.first { $0.name == name } }
    }

    static let maximumDepth = 256

    static func parse(_ source: String) throws(KeychainError) -> Element {
        let s = Array(source.unicodeScalars)
        var i = 0
        var stack: [Element] = []
        var root: Element?
        func fail(_ what: String) -> KeychainError { KeychainError(.decode, "not well-formed XML: \(what)") }
        func starts(_ text: String) -> Bool {
            let t = Array(text.unicodeScalars)
            return i + t.count <= s.count && Array(s[i..<i + t.count]) == t
        }
        func skip(past text: String) throws(KeychainError) {
            let t = Array(text.unicodeScalars)
            while i + t.count <= s.count {
                if Array(s[i..<i + t.count]) == t { i += t.count; return }
                i += 1
            }
            throw fail("unterminated \(text)")
        }
        func isSpace(_ c: Unicode.Scalar) -> Bool { c == " " || c == "\n" || c == "\t" || c == "\r" }
        func name() -> String {
            var n = ""
            while i < s.count, !isSpace(s[i]), !["/", ">", "=", "<"].contains(s[i]) { n.unicodeScalars.append(s[i]); i += 1 }
            return n
        }
        while i < s.count {
            if starts("<?") { try skip(past: "?>"); continue }
            if starts("<!--") { try skip(past: "-->"); continue }
            if starts("<![CDATA[") {
                i += 9
                let start = i
                try skip(past: "]]>")
                guard let open = stack.last else { throw fail("text outside the root") }
                open.text.unicodeScalars.append(contentsOf: s[start..<(i - 3)])
                continue
            }
            if starts("<!") { throw fail("a DTD or declaration (not read, on purpose)") }
            if starts("</") {
                i += 2
                let closing = name()
                while i < s.count, isSpace(s[i]) { i += 1 }
                guard i < s.count, s[i] == ">", let open = stack.popLast(), open.name == closing else {
                    throw fail("a mismatched end tag </\(closing)>")
                }
                i += 1
                if stack.isEmpty { root = open }
                continue
            }
            if s[i] == "<" {
                i += 1
                let element = Element(name: name(), attributes: [:])
                guard !element.name.isEmpty else { throw fail("an empty tag name") }
                while true {
                    while i < s.count, isSpace(s[i]) { i += 1 }
                    guard i < s.count else { throw fail("an unterminated tag") }
                    if s[i] == ">" || s[i] == "/" { break }
                    let attribute = name()
                    guard !attribute.isEmpty, i < s.count, s[i] == "=", i + 1 < s.count,
                        s[i + 1] == "\"" || s[i + 1] == "'"
                    else { throw fail("an attribute of <\(element.name)>") }
                    let quote = s[i + 1]
                    i += 2
                    var raw = ""
                    while i < s.count, s[i] != quote { raw.unicodeScalars.append(s[i]); i += 1 }
                    guard i < s.count else { throw fail("an unterminated attribute") }
                    i += 1
                    element.attributes[attribute] = try decodeEntities(raw)
                }
                let selfClosing = s[i] == "/"
                if selfClosing {
                    i += 1
                    guard i < s.count, s[i] == ">" else { throw fail("a broken empty tag") }
                }
                i += 1
                if let parent = stack.last { parent.children.append(element) } else if root != nil || !stack.isEmpty {
                    throw fail("a second root element")
                }
                if selfClosing {
                    if stack.isEmpty { root = element }
                } else {
                    // Deeper than any export nests; a hostile file's depth would exhaust the stack when released.
                    guard stack.count < maximumDepth else { throw fail("elements nested deeper than \(maximumDepth)") }
                    stack.append(element)
                }
                continue
            }
            let start = i
            while i < s.count, s[i] != "<" { i += 1 }
            var text = ""
            text.unicodeScalars.append(contentsOf: s[start..<i])
            if let open = stack.last {
                open.text += try decodeEntities(text)
            } else if !text.unicodeScalars.allSatisfy(isSpace) {
                throw fail("text outside the root")
            }
        }
        guard stack.isEmpty, let root else { throw fail("the document ends before its root element does") }
        return root
    }

    static func decodeEntities(_ text: String) throws(KeychainError) -> String {
        guard text.contains("&") else { return text }
        var out = ""
        var rest = Substring(text)
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            guard let semicolon = rest[amp...].firstIndex(of: ";") else {
                throw KeychainError(.decode, "not well-formed XML: a bare &")
            }
            let entity = rest[rest.index(after: amp)..<semicolon]
            switch entity {
            case "lt": out += "<"
            case "gt": out += ">"
            case "amp": out += "&"
            case "quot": out += "\""
            case "apos": out += "'"
            default:
                let number: UInt32?
                if entity.hasPrefix("#x") || entity.hasPrefix("#X") {
                    number = UInt32(entity.dropFirst(2), radix: 16)
                } else if entity.hasPrefix("#") {
                    number = UInt32(entity.dropFirst())
                } else {
                    number = nil
                }
                guard let number, let scalar = Unicode.Scalar(number) else {
                    throw KeychainError(.decode, "not well-formed XML: the entity &\(entity);")
                }
                out.unicodeScalars.append(scalar)
            }
            rest = rest[rest.index(after: semicolon)...]
        }
        return out + rest
    }
}
