import KeychainDBus

/// Reads fuzzer bytes as D-Bus messages, as keychaind's Secret Service reads what every process of the user sends:
/// the frame length first, then the message. Either it is refused with an error, or it decodes and then encodes
/// again to bytes that decode to the same message.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDBus(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if bytes.count >= 16 { _ = DBusMessage.frameLength(bytes[..<16]) }
    guard let message = try? DBusMessage.decode(bytes) else { return 0 }
    // What we accept we can write back (names and paths were checked on the way in) and read again unchanged.
    if let again = try? message.encoded(serial: message.serial) {
        guard var decoded = try? DBusMessage.decode(again) else { preconditionFailure("re-encoded message does not decode") }
        decoded.unixFDs = message.unixFDs
        precondition(decoded.body == message.body, "the body changed in a round trip")
    }
    return 0
}
