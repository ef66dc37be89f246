import Testing

@testable import AllotCore

/// A clock that advances by a fixed step every time it is read: benchmark maths without timing.
struct SteppingClock: Clock {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    final class Ticks: @unchecked Sendable {
        // Only read from the single test that owns this clock, on one task.
        var reads = 0
    }

    let ticks = Ticks()
    let step: Duration

    var now: Instant {
        ticks.reads += 1
        return Instant(offset: step * ticks.reads)
    }

    var minimumResolution: Duration { .nanoseconds(1) }
    func sleep(until deadline: Instant, tolerance: Duration?) async throws {}
}

@Suite("Allocation benchmark")
struct AllocationBenchmarkTests {
    @Test func reportsTheMedianOfItsRunsWithAnInjectedClock() {
        let results = AllocationBenchmark.run(
            tenantCounts: [50, 200], repetitions: 3, clock: SteppingClock(step: .milliseconds(2)))
        #expect(results.map(\.tenants) == [50, 200])
        // Each run reads the clock twice, 2 ms apart.
        #expect(results.allSatisfy { $0.runsMilliseconds == [2, 2, 2] && $0.medianMilliseconds == 2 })
        let decisions = AllocationBenchmark.runDecision(
            tenantCounts: [100], repetitions: 2, clock: SteppingClock(step: .milliseconds(1)))
        #expect(decisions.map(\.medianMilliseconds) == [1])
    }

    @Test func theWorkloadIsDeterministicAndContended() {
        let a = AllocationBenchmark.Workload(tenants: 1000)
        let b = AllocationBenchmark.Workload(tenants: 1000)
        #expect(a.claims == b.claims)
        let demand = a.claims.rpm.reduce(0) { $0 + $1.demand }
        #expect(demand > 2 * a.capacity.rpm)
        let allocation = PoolAllocation.compute(
            capacityEstimate: a.capacity.rpm, settings: a.settings, claims: a.claims.rpm)
        #expect(!allocation.degraded)
        #expect(abs(allocation.allocatedTotal - allocation.capacity) < 1e-6 * allocation.capacity)
    }
}
