import Foundation
@testable import KeychainDaemon
import Synchronization
import Testing

@Suite("Secret Service call lanes")
struct CallLanesTests {
    @Test("one client's calls run in the order sent; a client whose call waits holds up nobody else; idle lanes go")
    func orderAndIndependence() {
        let lanes = CallLanes()
        let order = Mutex<[Int]>([])
        let stuck = DispatchSemaphore(value: 0)
        let others = DispatchGroup()
        // Client "slow": its first call waits until released; its later calls queue behind it.
        lanes.submit(":1.1") { stuck.wait() }
        for n in 0..<50 { lanes.submit(":1.1") { order.withLock { $0.append(n) } } }
        // Client "quick" is served meanwhile.
        others.enter()
        lanes.submit(":1.2") { others.leave() }
        #expect(others.wait(timeout: .now() + 10) == .success)
        #expect(order.withLock { $0 }.isEmpty)
        stuck.signal()
        let done = DispatchSemaphore(value: 0)
        lanes.submit(":1.1") { done.signal() }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(order.withLock { $0 } == Array(0..<50))
        for _ in 0..<100 where lanes.busyClients > 0 { usleep(10_000) }
        #expect(lanes.busyClients == 0)
    }
}
