import Foundation
import Testing

@testable import AllotLoop

/// A clock that advances by a fixed step every time it is read: the benchmark's bookkeeping without timing.
struct EstimatorSteppingClock: Clock {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    final class Reads: @unchecked Sendable {
        // Only read by the single test that owns this clock, on one task.
        var count = 0
    }

    let reads = Reads()
    let step: Duration

    var now: Instant {
        reads.count += 1
        return Instant(offset: step * reads.count)
    }

    var minimumResolution: Duration { .nanoseconds(1) }
    func sleep(until deadline: Instant, tolerance: Duration?) async throws {}
}

@Suite("Estimator benchmark (SPEC 13)")
struct ObserverBenchmarkTests {
    @Test func reportsMediansWithAnInjectedClock() {
        let result = EstimatorBenchmark.run(
            tenants: 50, eventsPerTick: 500, repetitions: 3, clock: EstimatorSteppingClock(step: .milliseconds(2)))
        #expect(result.tenants == 50)
        #expect(result.observerRunsMilliseconds == [2, 2, 2])
        #expect(result.classifierRunsMilliseconds == [2, 2, 2])
        #expect(result.observerMedianMilliseconds == 2)
    }

    /// `ALLOT_BENCH=1 swift test -c release --filter ObserverBenchmarkTests` prints the real figures.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["ALLOT_BENCH"] == "1"))
    func measuresTenThousandTenantsAndThreeHundredThousandEvents() {
        let result = EstimatorBenchmark.run(tenants: 10_000, eventsPerTick: 300_000, repetitions: 7)
        print(
            "estimators: \(result.tenants) tenants, \(result.eventsPerTick) events per tick: observer median "
                + "\(result.observerMedianMilliseconds) ms \(result.observerRunsMilliseconds), classifier median "
                + "\(result.classifierMedianMilliseconds) ms \(result.classifierRunsMilliseconds)")
        #expect(result.classifierRunsMilliseconds.count == 7)
    }
}
