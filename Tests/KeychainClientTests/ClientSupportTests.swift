import Foundation
import KeychainClient
import KeychainWire
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Client-side support: environment, frames")
struct ClientSupportTests {
    @Test("ProcessEnvironment reads what ProcessInfo reads, including variables set at run time")
    func environment() {
        let name = "KEYCHAIN_TEST_ENV_\(getpid())"
        setenv(name, "a=b c", 1)
        defer { unsetenv(name) }
        let ours = ProcessEnvironment.current()
        #expect(ours[name] == "a=b c")  // only the first "=" separates
        #expect(ours == ProcessInfo.processInfo.environment)
    }

    @Test("frames sent together in one write arrive as separate frames, in order")
    func framesTogether() throws {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        #expect(Framing.send([Framing.hello(), [], Array("second".utf8)], on: pair[0]))
        #expect(try Framing.receive(on: pair[1], limit: 64) == Framing.hello())
        #expect(try Framing.receive(on: pair[1], limit: 64) == [])
        #expect(try Framing.receive(on: pair[1], limit: 64) == Array("second".utf8))
        // A frame over the receiver's limit is refused before anything is allocated for it.
        #expect(Framing.send([[UInt8](repeating: 1, count: 100)], on: pair[0]))
        #expect(throws: WireError.self) { try Framing.receive(on: pair[1], limit: 64) }
    }
}
