import KeychainWire

/// Decodes fuzzer bytes as a daemon request and as a response. Either it is refused with a WireError, or it decodes
/// to a message whose encoding decodes to the same encoding again (never a trap, never an allocation past the frame).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWire(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let request = try? Request.decode(bytes), let encoded = try? request.encode() {
        guard let again = try? Request.decode(encoded), let reencoded = try? again.encode() else {
            fatalError("a decoded request does not survive its own encoding")
        }
        precondition(reencoded == encoded, "request encoding is not stable")
    }
    if let response = try? Response.decode(bytes) {
        let encoded = response.encode()
        guard let again = try? Response.decode(encoded) else { fatalError("a decoded response does not decode again") }
        precondition(again.encode() == encoded, "response encoding is not stable")
    }
    return 0
}
