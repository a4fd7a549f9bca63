import Testing

@testable import KeychainDaemon

/// Suspend is seen as boot time (which counts sleep) running ahead of monotonic time (which does not).
@Suite("Sleep detection")
struct SleepDetectorTests {
    typealias Reading = SleepDetector.Reading

    func look(_ detector: inout SleepDetector, _ reading: Reading) -> Bool { detector.sleptSinceLastLook(reading) }

    @Test("the first look never reports sleep; equal progress of both clocks is being awake")
    func awake() {
        var detector = SleepDetector()
        #expect(!look(&detector, Reading(monotonic: 100, boottime: 500)))
        #expect(!look(&detector, Reading(monotonic: 101, boottime: 501)))
        // A daemon thread delayed for a minute (a loaded machine) is not asleep: both clocks moved.
        #expect(!look(&detector, Reading(monotonic: 161, boottime: 561)))
    }

    @Test("boot time ahead of monotonic time by more than the threshold is a suspend, reported once")
    func suspended() {
        var detector = SleepDetector(threshold: 2)
        _ = detector.sleptSinceLastLook(Reading(monotonic: 100, boottime: 500))
        #expect(look(&detector, Reading(monotonic: 101, boottime: 3_601)))
        #expect(!look(&detector, Reading(monotonic: 102, boottime: 3_602)))
        // Clock jitter under the threshold is not.
        #expect(!look(&detector, Reading(monotonic: 103, boottime: 3_604.5)))
    }

    @Test("the real clocks, read twice a moment apart, show no sleep")
    func realClocks() {
        var detector = SleepDetector()
        _ = detector.sleptSinceLastLook()
        #expect(!look(&detector, .now))
        let now = Reading.now
        #expect(now.boottime >= now.monotonic)
    }
}
