/// One D-Bus message: a fixed header, header fields and a body of values.
public struct DBusMessage: Sendable, Hashable {
    public enum Kind: UInt8, Sendable {
        case methodCall = 1, methodReturn = 2, error = 3, signal = 4
    }

    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let noReplyExpected = Flags(rawValue: 0x1)
        public static let noAutoStart = Flags(rawValue: 0x2)
        public static let allowInteractiveAuthorization = Flags(rawValue: 0x4)
    }

    /// The largest message we read or write (the specification allows 128 MiB; nothing the keychain exchanges
    /// comes near this).
    public static let maximumSize = 32 << 20

    public var kind: Kind
    public var flags: Flags = []
    public var serial: UInt32 = 0
    public var path: String?
    public var interface: String?
    public var member: String?
    public var errorName: String?
    public var replySerial: UInt32?
    public var destination: String?
    public var sender: String?
    public var body: [DBusValue] = []
    /// Set on a message whose body was larger than the connection accepts: its header was read, its body skipped
    /// unread (the receiver answers it with an error; the connection stays up).
    public var bodyTooLarge = false
    /// The number of file descriptors the header says came with the message (its UNIX_FDS field).
    public var unixFDs: UInt32 = 0
    /// The file descriptors that came with the message (an `h` value is an index into them), or go with it: only on
    /// a connection that negotiated them (``DBusConnection/passesFileDescriptors``).
    public var fileDescriptors: [UnixFileDescriptor] = []

    public init(kind: Kind) { self.kind = kind }

    /// The descriptor an `h` value names, nil when the message carries no such one.
    public func fileDescriptor(_ value: DBusValue) -> UnixFileDescriptor? {
        guard case .unixFD(let index) = value, Int(index) < fileDescriptors.count else { return nil }
        return fileDescriptors[Int(index)]
    }

    public static func methodCall(destination: String?, path: String, interface: String?, member: String,
                                  body: [DBusValue] = []) -> DBusMessage {
        var message = DBusMessage(kind: .methodCall)
        message.destination = destination
        message.path = path
        message.interface = interface
        message.member = member
        message.body = body
        return message
    }

    public static func signal(path: String, interface: String, member: String, body: [DBusValue] = [],
                              destination: String? = nil) -> DBusMessage {
        var message = DBusMessage(kind: .signal)
        message.path = path
        message.interface = interface
        message.member = member
        message.body = body
        message.destination = destination
        return message
    }

    /// The reply to this call.
    public func methodReturn(_ body: [DBusValue] = []) -> DBusMessage {
        var reply = DBusMessage(kind: .methodReturn)
        reply.replySerial = serial
        reply.destination = sender
        reply.body = body
        return reply
    }

    /// An error reply to this call: `name` (org.freedesktop.Secret.Error.IsLocked, …) and a message for people.
    public func errorReply(_ name: String, _ text: String) -> DBusMessage {
        var reply = DBusMessage(kind: .error)
        reply.replySerial = serial
        reply.destination = sender
        reply.errorName = name
        reply.body = [.string(text)]
        return reply
    }

    public var bodySignature: String { body.map(\.signature).joined() }

    public enum EncodingError: Error, Sendable, Equatable {
        case invalid(String)
    }

    // MARK: - Writing

    /// The message's bytes (little-endian), with `serial` as its serial. Checks the required header fields and
    /// every name, path and signature, so that what we send is never malformed.
    public func encoded(serial: UInt32) throws(EncodingError) -> [UInt8] {
        guard serial != 0 else { throw .invalid("serial 0") }
        switch kind {
        case .methodCall: guard path != nil, member != nil else { throw .invalid("a method call needs a path and a member") }
        case .signal: guard path != nil, interface != nil, member != nil else { throw .invalid("a signal needs a path, an interface and a member") }
        case .error: guard errorName != nil, replySerial != nil else { throw .invalid("an error needs a name and a reply serial") }
        case .methodReturn: guard replySerial != nil else { throw .invalid("a reply needs a reply serial") }
        }
        if let path, !DBusNames.isValidObjectPath(path) { throw .invalid("object path") }
        if let interface, !DBusNames.isValidInterface(interface) { throw .invalid("interface name") }
        if let errorName, !DBusNames.isValidInterface(errorName) { throw .invalid("error name") }
        if let member, !DBusNames.isValidMember(member) { throw .invalid("member name") }
        if let destination, !DBusNames.isValidBusName(destination) { throw .invalid("destination") }
        let signature = bodySignature
        do { _ = try DBusSignature.completeTypes(signature) } catch { throw .invalid("body signature: \(error.reason)") }

        var body = DBusWriter()
        for value in self.body { body.write(value) }
        var fields: [DBusValue] = []
        func field(_ code: UInt8, _ value: DBusValue) { fields.append(.structure([.byte(code), .variant(value)])) }
        if let path { field(1, .objectPath(path)) }
        if let interface { field(2, .string(interface)) }
        if let member { field(3, .string(member)) }
        if let errorName { field(4, .string(errorName)) }
        if let replySerial { field(5, .uint32(replySerial)) }
        if let destination { field(6, .string(destination)) }
        if let sender { field(7, .string(sender)) }
        if !signature.isEmpty { field(8, .signature(signature)) }
        if !fileDescriptors.isEmpty { field(9, .uint32(UInt32(fileDescriptors.count))) }

        var writer = DBusWriter()
        writer.write(.byte(UInt8(ascii: "l")))
        writer.write(.byte(kind.rawValue))
        writer.write(.byte(flags.rawValue))
        writer.write(.byte(1))
        writer.write(.uint32(UInt32(body.bytes.count)))
        writer.write(.uint32(serial))
        writer.write(.array(elementSignature: "(yv)", fields))
        writer.pad(to: 8)
        let out = writer.bytes + body.bytes
        guard out.count <= Self.maximumSize else { throw .invalid("message larger than \(Self.maximumSize) bytes") }
        return out
    }

    // MARK: - Reading

    /// The total size of the message whose first 16 bytes are `prefix`, or nil when those bytes cannot start a
    /// message we accept (bad byte order mark, version, or a size over the limit): the connection is then dropped.
    public static func frameLength(_ prefix: ArraySlice<UInt8>) -> Int? {
        guard let (header, body) = lengths(prefix), header + body <= maximumSize else { return nil }
        return header + body
    }

    /// The length of the header (fixed part and fields, padded to 8) and of the body that `prefix` announces, up to
    /// the specification's limit of 128 MiB; nil for what cannot start a message.
    public static func lengths(_ prefix: ArraySlice<UInt8>) -> (header: Int, body: Int)? {
        guard prefix.count >= 16 else { return nil }
        let start = prefix.startIndex
        let bigEndian: Bool
        switch prefix[start] {
        case UInt8(ascii: "l"): bigEndian = false
        case UInt8(ascii: "B"): bigEndian = true
        default: return nil
        }
        guard prefix[start + 3] == 1 else { return nil }
        func word(_ at: Int) -> Int {
            let b = prefix[(start + at)..<(start + at + 4)].map(Int.init)
            return bigEndian ? b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3] : b[3] << 24 | b[2] << 16 | b[1] << 8 | b[0]
        }
        let body = word(4), fields = word(12)
        let header = (16 + fields + 7) / 8 * 8
        guard header + body <= 128 << 20 else { return nil }
        return (header, body)
    }

    /// The header of a message whose body is not kept (`header` is its first ``lengths(_:)``.header bytes): kind,
    /// flags, serial and fields, with an empty body, marked ``bodyTooLarge``.
    public static func decodeHeader(_ header: [UInt8]) throws(DBusReader.Malformed) -> DBusMessage {
        var message = try decode(header, headerOnly: true)
        message.bodyTooLarge = true
        return message
    }

    /// Decodes one complete message (exactly `bytes`). Anything malformed throws; nothing traps.
    public static func decode(_ bytes: [UInt8]) throws(DBusReader.Malformed) -> DBusMessage {
        try decode(bytes, headerOnly: false)
    }

    private static func decode(_ bytes: [UInt8], headerOnly: Bool) throws(DBusReader.Malformed) -> DBusMessage {
        if headerOnly {
            guard let (header, _) = lengths(bytes[...]), header == bytes.count else {
                throw DBusReader.Malformed(reason: "bad message header")
            }
        } else {
            guard let length = frameLength(bytes[...]), length == bytes.count else {
                throw DBusReader.Malformed(reason: "bad message header or length")
            }
        }
        let bigEndian = bytes[0] == UInt8(ascii: "B")
        guard let kind = Kind(rawValue: bytes[1]) else { throw DBusReader.Malformed(reason: "unknown message type") }
        var message = DBusMessage(kind: kind)
        message.flags = Flags(rawValue: bytes[2])
        var reader = DBusReader(bytes, bigEndian: bigEndian, offset: 4)
        let bodyLength = Int(try reader.integer(UInt32.self))
        message.serial = try reader.integer(UInt32.self)
        guard message.serial != 0 else { throw DBusReader.Malformed(reason: "serial 0") }
        guard case .array(_, let fields) = try reader.read("a(yv)") else { throw DBusReader.Malformed(reason: "header fields") }
        var signature = ""
        for field in fields {
            guard case .structure(let pair) = field, pair.count == 2, case .byte(let code) = pair[0],
                  case .variant(let value) = pair[1]
            else { throw DBusReader.Malformed(reason: "header field") }
            switch (code, value) {
            case (1, .objectPath(let v)): message.path = v
            case (2, .string(let v)) where DBusNames.isValidInterface(v): message.interface = v
            case (3, .string(let v)) where DBusNames.isValidMember(v): message.member = v
            case (4, .string(let v)) where DBusNames.isValidInterface(v): message.errorName = v
            case (5, .uint32(let v)): message.replySerial = v
            case (6, .string(let v)) where DBusNames.isValidBusName(v): message.destination = v
            case (7, .string(let v)) where DBusNames.isValidBusName(v): message.sender = v
            case (8, .signature(let v)): signature = v
            case (9, .uint32(let v)): message.unixFDs = v
            case (1...9, _): throw DBusReader.Malformed(reason: "header field \(code) of the wrong type")
            default: continue  // unknown fields are ignored, as the specification says
            }
        }
        switch kind {
        case .methodCall: guard message.path != nil, message.member != nil else { throw DBusReader.Malformed(reason: "method call without path or member") }
        case .signal: guard message.path != nil, message.interface != nil, message.member != nil else { throw DBusReader.Malformed(reason: "signal without path, interface or member") }
        case .error: guard message.errorName != nil, message.replySerial != nil else { throw DBusReader.Malformed(reason: "error without name or reply serial") }
        case .methodReturn: guard message.replySerial != nil else { throw DBusReader.Malformed(reason: "reply without reply serial") }
        }
        try reader.align(8)
        if headerOnly { return message }
        guard reader.offset + bodyLength == bytes.count else { throw DBusReader.Malformed(reason: "body length") }
        var body = DBusReader(bytes, bigEndian: bigEndian, offset: reader.offset, origin: reader.offset)
        let types: [String]
        do { types = try DBusSignature.completeTypes(signature) } catch { throw DBusReader.Malformed(reason: "body signature") }
        for type in types { message.body.append(try body.read(type)) }
        guard body.atEnd else { throw DBusReader.Malformed(reason: "bytes after the body") }
        return message
    }
}
