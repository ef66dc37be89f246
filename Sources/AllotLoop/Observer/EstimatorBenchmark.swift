import AllotCore
import AllotSignals
import AllotStore

/// Micro-benchmarks of the Observer's and the Classifier's tick (SPEC 13 "Speed": a tick over 10,000
/// active tenants must fit in 250 ms, of which these two take their share), for the loop's benchmark
/// command and for `ALLOT_BENCH=1` runs of the tests.
///
/// The workload is synthetic and deterministic (a fixed-seed generator): tenants spread over three
/// pools and four gateways, a realistic outcome mix (mostly served, some denied, queued, 429s,
/// overloads and errors), rate-limit headers on half the answers, task ids on a third. The state is
/// warmed by two ticks first (every tenant known), then each measured tick gets a fresh delta whose
/// generation is not timed. The clock is passed in.
public enum EstimatorBenchmark {
    /// One measurement.
    public struct Result: Sendable, Hashable {
        public var tenants: Int
        public var eventsPerTick: Int
        /// Medians of the runs, milliseconds.
        public var observerMedianMilliseconds: Double
        public var classifierMedianMilliseconds: Double
        /// Every run, milliseconds, in the order taken.
        public var observerRunsMilliseconds: [Double]
        public var classifierRunsMilliseconds: [Double]
    }

    /// Times `CapacityEstimation.observe` and `ConsumptionClassification.classify` over deltas of
    /// `eventsPerTick` events from `tenants` tenants: the median of `repetitions` ticks.
    public static func run(
        tenants: Int = 10_000, eventsPerTick: Int = 300_000, repetitions: Int = 7,
        clock: some Clock<Duration> = ContinuousClock()
    ) -> Result {
        var workload = Workload(tenants: tenants)
        var policy = Policy()
        for pool in Workload.pools {
            policy.setUpstream(
                UpstreamPolicy(
                    id: pool, capacity: PerDimension(rpm: 100_000, tpm: 50_000_000),
                    price: Price(inputPerMillionTokens: 2.5, outputPerMillionTokens: 10)))
        }
        policy.taskBudgets = [.batch: TaskBudgetPolicy(maxCalls: 500, maxTokens: 5_000_000)]
        var observer = CapacityEstimation(policy: policy)
        var classifier = ConsumptionClassification(policy: policy)
        let allocations = workload.allocations
        var now = 1_800_000_000.0

        var observerRuns: [Double] = []
        var classifierRuns: [Double] = []
        for round in 0..<(max(1, repetitions) + 2) {
            now += 5
            let delta = workload.delta(events: eventsPerTick, from: now - 5, to: now)
            let start = clock.now
            let report = observer.observe(delta, now: now)
            let middle = clock.now
            let classified = classifier.classify(delta, allocations: allocations, now: now)
            let end = clock.now
            workload.sink &+= report.upstreams.count &+ classified.statuses.count
            guard round >= 2 else { continue }  // warm-up: tracks created, buffers grown
            observerRuns.append(milliseconds(start.duration(to: middle)))
            classifierRuns.append(milliseconds(middle.duration(to: end)))
        }
        return Result(
            tenants: tenants, eventsPerTick: eventsPerTick, observerMedianMilliseconds: median(observerRuns),
            classifierMedianMilliseconds: median(classifierRuns), observerRunsMilliseconds: observerRuns,
            classifierRunsMilliseconds: classifierRuns)
    }

    /// One delta of the benchmark's workload (for measuring other consumers of the same telemetry).
    public static func sampleDelta(tenants: Int, events: Int) -> TelemetryDelta {
        var workload = Workload(tenants: tenants)
        return workload.delta(events: events, from: 1_800_000_000, to: 1_800_000_005)
    }

    private static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// The synthetic telemetry.
    struct Workload {
        static let pools = ["openai/gpt-4o", "anthropic/claude-sonnet", "google/gemini-pro"]
        static let gateways = ["gw-a", "gw-b", "gw-c", "gw-d"]
        let tenants: Int
        let names: TelemetryNames
        var random = SplitMix64(seed: 0x5EED_A110)
        var row: Int64 = 0
        var sink = 0

        /// Refs as a database assigns them: each name table counts from 1.
        init(tenants: Int) {
            self.tenants = tenants
            var names = TelemetryNames()
            for index in 0..<tenants {
                let ref = Int64(index + 1)
                names.tenants[ref] = TenantRecord(
                    ref: ref, id: "tenant-\(index)", tier: "standard", firstSeenMs: 0, lastSeenMs: 0)
            }
            for (index, pool) in Self.pools.enumerated() {
                let ref = Int64(1 + index)
                names.upstreams[ref] = NamedRecord(ref: ref, id: pool, firstSeenMs: 0, lastSeenMs: 0)
            }
            for (index, gateway) in Self.gateways.enumerated() {
                let ref = Int64(1 + index)
                names.gateways[ref] = NamedRecord(ref: ref, id: gateway, firstSeenMs: 0, lastSeenMs: 0)
            }
            names.modelVersions[1] = NamedRecord(ref: 1, id: "v1", firstSeenMs: 0, lastSeenMs: nil)
            self.names = names
        }

        /// Each tenant on one pool (tenant i on pool i mod 3), allocated generously.
        var allocations: [AllocationKey: PerDimension<Double>] {
            var result: [AllocationKey: PerDimension<Double>] = [:]
            result.reserveCapacity(tenants)
            for index in 0..<tenants {
                result[AllocationKey(tenant: "tenant-\(index)", upstream: Self.pools[index % Self.pools.count])] =
                    PerDimension(rpm: 120, tpm: 40_000)
            }
            return result
        }

        mutating func delta(events count: Int, from: Double, to: Double) -> TelemetryDelta {
            var events: [StoredEvent] = []
            events.reserveCapacity(count)
            let headers = EventSignals(
                family: .openai, limitRequests: 100_000, remainingRequests: 90_000, resetRequestsMs: 60,
                limitTokens: 50_000_000, remainingTokens: 45_000_000, resetTokensMs: 60)
            for _ in 0..<count {
                row += 1
                let tenant = Int(random.next() % UInt64(tenants))
                let roll = random.next() % 1000
                let outcome: Outcome =
                    switch roll {
                    case 0..<850: .ok
                    case 850..<930: .deniedLocal
                    case 930..<960: .queued
                    case 960..<980: .quotaExhausted
                    case 980..<990: .overloaded
                    default: .serverError
                    }
                let at = from + (to - from) * Double(random.next() % 10_000) / 10_000
                let prompt = Int64(200 + random.next() % 4000)
                let completion = Int64(20 + random.next() % 800)
                let served = outcome == .ok
                events.append(
                    StoredEvent(
                        id: row, timestampMs: Int64(at * 1000), tenant: Int64(tenant + 1),
                        upstream: Int64(1 + tenant % Self.pools.count),
                        gateway: Int64(1 + Int(random.next() % UInt64(Self.gateways.count))),
                        outcome: outcome, taskClass: tenant % 3 == 0 ? .batch : .interactive,
                        status: served ? 200 : 429, latencyMs: served ? Double(300 + random.next() % 2000) : nil,
                        queueMs: outcome == .queued ? Double(random.next() % 3000) : nil,
                        promptTokens: served ? prompt : nil, completionTokens: served ? completion : nil,
                        estimatedTokens: served ? nil : prompt + 400, retry: roll % 7 == 0 ? 1 : 0,
                        taskID: tenant % 3 == 0 ? "task-\(tenant)-\(random.next() % 20)" : nil,
                        modelVersion: 1, signals: served && roll % 2 == 0 ? headers : EventSignals()))
            }
            return TelemetryDelta(events: events, names: names, lastEventID: row)
        }
    }
}

/// SplitMix64: a tiny deterministic generator for the benchmark's workload.
struct SplitMix64 {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
