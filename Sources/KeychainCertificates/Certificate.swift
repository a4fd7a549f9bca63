import Crypto
import Foundation
import KeychainCore
import KeychainKeys
import SwiftASN1

/// An X.509 certificate read from its DER: what the keychain derives from it (Apple's SecCertificate accessors and
/// the attributes of a `cert` item). Parsing is bounded by swift-asn1's DER parser (depth and lengths checked); any
/// input that is not a certificate is refused with nil, never a crash.
public struct Certificate: Sendable, Hashable {
    public let der: Data
    /// The serial number's INTEGER content bytes, as Apple returns them.
    public let serialNumber: Data
    /// The issuer and subject Names, their DER (SEQUENCE included).
    public let issuer: Data
    public let subject: Data
    /// Attribute type and value pairs of the subject, in order (OID content bytes, decoded string or nil).
    let subjectAttributes: [(type: [UInt8], value: String?)]
    public let subjectKeyIdentifier: Data?
    /// The validity period (nil when a time cannot be read).
    public let notBefore: Date?
    public let notAfter: Date?
    /// X.509 version as written (0 for v1 … 2 for v3).
    public let version: Int
    /// Apple's normalized Names (the content of the SEQUENCE): PrintableString values upper-cased, with runs of
    /// blanks folded to one space and leading and trailing blanks dropped, so that Names differing only there match.
    public let normalizedSubject: Data
    public let normalizedIssuer: Data
    /// rfc822Name and dNSName entries of the subject alternative name extension, in order.
    let alternativeEmails: [String]
    let alternativeDNSNames: [String]
    /// The public key, when it is an EC (P-256/384/521) or RSA key.
    public let publicKey: AsymmetricKey?
    /// The subjectPublicKey BIT STRING's bytes (what Apple hashes for `pkhh`... see ``publicKeyHash``).
    let publicKeyBits: Data

    public init?(der: Data) {
        guard der.count <= 1 << 20, let root = try? DER.parse(Array(der)),
              root.identifier == .sequence, root.encodedBytes.count == der.count,
              let certificate = Self.children(root), certificate.count == 3,
              let tbs = Self.children(certificate[0]), certificate[0].identifier == .sequence
        else { return nil }
        var index = 0
        var version = 0
        // [0] EXPLICIT version, optional.
        if tbs.indices.contains(index), tbs[index].identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) {
            guard let inner = Self.children(tbs[index])?.first, inner.identifier == .integer,
                  case .primitive(let bytes) = inner.content, bytes.count == 1, bytes.first! <= 2
            else { return nil }
            version = Int(bytes.first!)
            index += 1
        }
        self.version = version
        guard tbs.count >= index + 6,
              tbs[index].identifier == .integer, case .primitive(let serial) = tbs[index].content, !serial.isEmpty,
              tbs[index + 2].identifier == .sequence, tbs[index + 4].identifier == .sequence,
              tbs[index + 5].identifier == .sequence
        else { return nil }
        self.der = der
        serialNumber = Data(serial)
        let validity = Self.children(tbs[index + 3]) ?? []
        notBefore = validity.first.flatMap(Self.time)
        notAfter = validity.dropFirst().first.flatMap(Self.time)
        issuer = Data(tbs[index + 2].encodedBytes)
        subject = Data(tbs[index + 4].encodedBytes)
        guard let attributes = Self.nameAttributes(tbs[index + 4]), Self.nameAttributes(tbs[index + 2]) != nil,
              let normalizedSubject = Self.normalizedNameContent(tbs[index + 4]),
              let normalizedIssuer = Self.normalizedNameContent(tbs[index + 2])
        else { return nil }
        subjectAttributes = attributes
        self.normalizedSubject = normalizedSubject
        self.normalizedIssuer = normalizedIssuer
        // SubjectPublicKeyInfo: algorithm (OID, parameters), subjectPublicKey BIT STRING.
        guard let spki = Self.children(tbs[index + 5]), spki.count == 2, let algorithm = Self.children(spki[0]),
              let algorithmOID = algorithm.first.flatMap(Self.oid),
              spki[1].identifier == .bitString, case .primitive(let bitString) = spki[1].content, bitString.first == 0
        else { return nil }
        let keyBits = Data(bitString.dropFirst())
        publicKeyBits = keyBits
        publicKey = Self.key(algorithm: algorithmOID, parameters: algorithm.dropFirst().first, bits: keyBits)
        // Extensions: [3] EXPLICIT SEQUENCE OF Extension.
        var skid: Data?
        var emails: [String] = []
        var dnsNames: [String] = []
        for node in tbs[(index + 6)...] where node.identifier == ASN1Identifier(tagWithNumber: 3, tagClass: .contextSpecific) {
            guard let wrapped = Self.children(node), let list = wrapped.first.flatMap(Self.children) else { return nil }
            for extensionNode in list {
                guard let fields = Self.children(extensionNode), let id = fields.first.flatMap(Self.oid),
                      let valueNode = fields.last, valueNode.identifier == .octetString,
                      case .primitive(let value) = valueNode.content
                else { return nil }
                if id == OID.subjectKeyIdentifier, let inner = try? DER.parse(value), case .primitive(let bytes) = inner.content {
                    skid = Data(bytes)
                } else if id == OID.subjectAlternativeName, let inner = try? DER.parse(value), let names = Self.children(inner) {
                    for name in names where name.identifier.tagClass == .contextSpecific {
                        guard case .primitive(let bytes) = name.content else { continue }
                        let text = String(decoding: bytes, as: UTF8.self)
                        if name.identifier.tagNumber == 1 { emails.append(text) }
                        if name.identifier.tagNumber == 2 { dnsNames.append(text) }
                    }
                }
            }
        }
        subjectKeyIdentifier = skid
        alternativeEmails = emails
        alternativeDNSNames = dnsNames
    }

    public static func == (a: Self, b: Self) -> Bool { a.der == b.der }
    public func hash(into hasher: inout Hasher) { hasher.combine(der) }

    /// Every common name of the subject, in order (SecCertificateCopyCommonName gives the last).
    public var commonNames: [String] { subjectAttributes.filter { $0.type == OID.commonName }.compactMap(\.value) }

    /// E-mail addresses: the subject alternative name's rfc822Names, then the subject's emailAddress attributes.
    public var emailAddresses: [String] {
        alternativeEmails + subjectAttributes.filter { $0.type == OID.emailAddress }.compactMap(\.value)
    }

    /// Apple's SecCertificateCopySubjectSummary: the subject's most telling component type (common name over
    /// organizational unit over organization over the rest), every instance of it listed last-first with ", ",
    /// "CN (description)" when there is a description; without a common name the first e-mail address, else the
    /// first DNS name, is preferred.
    public var subjectSummary: String? {
        func rank(_ type: [UInt8]) -> Int {
            switch type {
            case OID.commonName: 4
            case OID.organizationalUnitName: 3
            case OID.organizationName: 2
            default: 1
            }
        }
        var best = 0
        var summary: String?
        var description: String?
        for (type, value) in subjectAttributes {
            guard let value else { continue }
            if type == OID.description { description = description.map { "\(value), \($0)" } ?? value }
            let kind = rank(type)
            if best < kind {
                best = kind
                summary = value
            } else if best == kind {
                summary = summary.map { "\(value), \($0)" } ?? value
            }
        }
        if best == 4, let description, let common = summary { summary = "\(common) (\(description))" }
        if best != 4, let alternative = emailAddresses.first ?? alternativeDNSNames.first { summary = alternative }
        return summary
    }

    /// `pkhh` and an identity's join key: SHA-1 of the public key as Apple represents it (X9.63 point, PKCS#1 for
    /// RSA: the subjectPublicKey bytes), which is the private key's `klbl`.
    public var publicKeyHash: Data { publicKey?.applicationLabel ?? Data(Self.sha1(publicKeyBits)) }

    // MARK: - DER walking

    static func children(_ node: ASN1Node) -> [ASN1Node]? {
        guard case .constructed(let nodes) = node.content else { return nil }
        return Array(nodes)
    }

    static func oid(_ node: ASN1Node) -> [UInt8]? {
        guard node.identifier == .objectIdentifier, case .primitive(let bytes) = node.content else { return nil }
        return Array(bytes)
    }

    /// A Name's attributes in order; nil when it is not a SEQUENCE OF SET OF (type, value).
    static func nameAttributes(_ name: ASN1Node) -> [(type: [UInt8], value: String?)]? {
        guard name.identifier == .sequence, let sets = children(name) else { return nil }
        var out: [(type: [UInt8], value: String?)] = []
        for set in sets {
            guard set.identifier == .set, let pairs = children(set) else { return nil }
            for pair in pairs {
                guard let fields = children(pair), fields.count == 2, let type = oid(fields[0]) else { return nil }
                out.append((type, string(fields[1])))
            }
        }
        return out
    }

    /// The text of a directory string (UTF8, Printable, IA5, Teletex as Latin-1, BMP, Universal).
    static func string(_ node: ASN1Node) -> String? {
        guard case .primitive(let bytes) = node.content else { return nil }
        switch node.identifier {
        case .utf8String, .printableString, .ia5String, .visibleString, .numericString:
            return String(validating: bytes, as: UTF8.self)
        case .teletexString:
            return String(bytes.map { Character(Unicode.Scalar($0)) })
        case .bmpString:
            guard bytes.count % 2 == 0 else { return nil }
            let units = stride(from: bytes.startIndex, to: bytes.endIndex, by: 2).map { UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]) }
            return String(decoding: units, as: UTF16.self)
        case .universalString:
            guard bytes.count % 4 == 0 else { return nil }
            var text = ""
            for i in stride(from: bytes.startIndex, to: bytes.endIndex, by: 4) {
                let value = UInt32(bytes[i]) << 24 | UInt32(bytes[i + 1]) << 16 | UInt32(bytes[i + 2]) << 8 | UInt32(bytes[i + 3])
                guard let scalar = Unicode.Scalar(value) else { return nil }
                text.unicodeScalars.append(scalar)
            }
            return text
        default:
            return nil
        }
    }

    /// A Name's content re-encoded with its PrintableString values normalized (Apple's createNormalizedX501Name).
    static func normalizedNameContent(_ name: ASN1Node) -> Data? {
        guard let sets = children(name) else { return nil }
        var content: [UInt8] = []
        for set in sets {
            guard let pairs = children(set) else { return nil }
            var setContent: [UInt8] = []
            for pair in pairs {
                guard let fields = children(pair), fields.count == 2 else { return nil }
                var value = Array(fields[1].encodedBytes)
                if fields[1].identifier == .printableString, case .primitive(let bytes) = fields[1].content {
                    var folded: [UInt8] = []
                    var lastWasBlank = false
                    for byte in bytes {
                        if byte == 0x20 || byte == 0x09 {
                            if !lastWasBlank && !folded.isEmpty { folded.append(0x20) }
                            lastWasBlank = true
                        } else {
                            lastWasBlank = false
                            folded.append((0x61...0x7A).contains(byte) ? byte - 0x20 : byte)
                        }
                    }
                    if lastWasBlank, folded.last == 0x20 { folded.removeLast() }
                    value = DEREncoding.element(0x13, folded)
                }
                setContent += DEREncoding.element(0x30, Array(fields[0].encodedBytes) + value)
            }
            content += DEREncoding.element(0x31, setContent)
        }
        return Data(content)
    }

    static func key(algorithm: [UInt8], parameters: ASN1Node?, bits: Data) -> AsymmetricKey? {
        switch algorithm {
        case OID.ecPublicKey:
            guard let curve = parameters.flatMap(oid), [OID.p256, OID.p384, OID.p521].contains(curve) else { return nil }
            return try? AsymmetricKey(externalRepresentation: bits, type: .ec, keyClass: .public)
        case OID.rsaEncryption:
            return try? AsymmetricKey(externalRepresentation: bits, type: .rsa, keyClass: .public)
        default:
            return nil
        }
    }

    static func sha1(_ data: Data) -> [UInt8] { Array(AsymmetricKey.sha1(data)) }
}

/// The object identifiers this file reads, as their DER content bytes.
enum OID {
    static let commonName: [UInt8] = [0x55, 0x04, 0x03]
    static let organizationName: [UInt8] = [0x55, 0x04, 0x0A]
    static let organizationalUnitName: [UInt8] = [0x55, 0x04, 0x0B]
    static let description: [UInt8] = [0x55, 0x04, 0x0D]
    static let emailAddress: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x01]
    static let subjectKeyIdentifier: [UInt8] = [0x55, 0x1D, 0x0E]
    static let subjectAlternativeName: [UInt8] = [0x55, 0x1D, 0x11]
    static let ecPublicKey: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]
    static let rsaEncryption: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]
    static let p256: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
    static let p384: [UInt8] = [0x2B, 0x81, 0x04, 0x00, 0x22]
    static let p521: [UInt8] = [0x2B, 0x81, 0x04, 0x00, 0x23]
}

/// DER's definite lengths, for re-encoding normalized Names.
enum DEREncoding {
    static func element(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        [tag] + length(content.count) + content
    }

    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var rest = count
        while rest > 0 {
            bytes.insert(UInt8(rest & 0xFF), at: 0)
            rest >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    /// A SEQUENCE around `content`.
    static func sequence(_ content: Data) -> Data { Data(element(0x30, Array(content))) }
}

extension Certificate {
    /// The `cert` item's attributes Apple derives from the certificate (SecCertificateCopyAttributeDictionary):
    /// type (version + 1), encoding (DER = 3), normalized subject and issuer, serial number, subject key id, public
    /// key hash, the DER as data; the label is the subject summary unless the caller gives one. The caller's values
    /// for the derived attributes are replaced: they cannot contradict the certificate.
    public func itemAttributes(_ attributes: [String: QueryValue]) -> [String: QueryValue] {
        var entries = attributes.filter { !$0.key.hasPrefix("v_") }
        entries["class"] = .string("cert")
        entries["ctyp"] = .int(Int64(version + 1))
        entries["cenc"] = .int(3)
        entries["subj"] = .data(normalizedSubject)
        entries["issr"] = .data(normalizedIssuer)
        entries["slnr"] = .data(serialNumber)
        entries["pkhh"] = .data(publicKeyHash)
        if let subjectKeyIdentifier { entries["skid"] = .data(subjectKeyIdentifier) } else { entries.removeValue(forKey: "skid") }
        if entries["labl"] == nil, let subjectSummary { entries["labl"] = .string(subjectSummary) }
        entries["v_Data"] = .data(der)
        return entries
    }
}

extension Certificate {
    public var normalizedIssuerSequence: Data { DEREncoding.sequence(normalizedIssuer) }
    public var normalizedSubjectSequence: Data { DEREncoding.sequence(normalizedSubject) }
}

extension Certificate {
    /// SHA-1 of the DER: the fingerprint `find-identity` lists and `-Z` names.
    public var sha1Fingerprint: Data { Data(Insecure.SHA1.hash(data: der)) }
    public var sha256Fingerprint: Data { Data(SHA256.hash(data: der)) }
}

extension Certificate {
    /// UTCTime (YYMMDDHHMMSSZ, years 1950–2049) or GeneralizedTime (YYYYMMDDHHMMSSZ), as RFC 5280 requires them.
    static func time(_ node: ASN1Node) -> Date? {
        guard case .primitive(let bytes) = node.content, bytes.last == UInt8(ascii: "Z") else { return nil }
        let digits = bytes.dropLast().map { Int($0) - 48 }
        guard digits.allSatisfy({ (0...9).contains($0) }) else { return nil }
        func number(_ range: Range<Int>) -> Int { range.reduce(0) { $0 * 10 + digits[$1] } }
        let year: Int
        let rest: Int
        switch (node.identifier, digits.count) {
        case (.utcTime, 12):
            let yy = number(0..<2)
            year = yy < 50 ? 2000 + yy : 1900 + yy
            rest = 2
        case (.generalizedTime, 14):
            year = number(0..<4)
            rest = 4
        default:
            return nil
        }
        let month = number(rest..<rest + 2), day = number(rest + 2..<rest + 4)
        let hour = number(rest + 4..<rest + 6), minute = number(rest + 6..<rest + 8), second = number(rest + 8..<rest + 10)
        guard (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }
}
