/// Micro-benchmarks of the allocation maths (SPEC 13, "Speed"), for `allot bench allocation`.
///
/// The workloads are synthetic and deterministic (a fixed-seed generator): tenants with weights
/// from 1 to 8, a third with floors, a quarter with ceilings, demand spread over three orders of
/// magnitude and total demand well above capacity, so water-filling does real work in both
/// dimensions. The clock is passed in: it is the only clock this module ever touches, and only here.
public enum AllocationBenchmark {
    /// One measurement.
    public struct Result: Sendable, Hashable {
        /// Tenants allocated.
        public var tenants: Int
        /// The median of the runs, milliseconds.
        public var medianMilliseconds: Double
        /// Every run, milliseconds, in the order taken.
        public var runsMilliseconds: [Double]
    }

    /// Times one allocation of one pool in both dimensions (`PoolAllocation.compute` for RPM and
    /// TPM) for each tenant count: the median of `repetitions` runs after one warm-up.
    public static func run(
        tenantCounts: [Int] = [1_000, 10_000, 100_000], repetitions: Int = 7,
        clock: some Clock<Duration> = ContinuousClock()
    ) -> [Result] {
        tenantCounts.map { count in
            let workload = Workload(tenants: count)
            return measure(tenants: count, repetitions: repetitions, clock: clock) {
                var total = 0.0
                for dimension in RateDimension.allCases {
                    let allocation = PoolAllocation.compute(
                        capacityEstimate: workload.capacity[dimension], settings: workload.settings,
                        claims: workload.claims[dimension])
                    total += allocation.allocatedTotal
                }
                return total
            }
        }
    }

    /// Times a whole engine tick (`PolicyEngine.decide`, steady state: every tenant already has
    /// dampers) for each tenant count on one pool, the engine's share of SPEC 13's tick budget.
    public static func runDecision(
        tenantCounts: [Int] = [1_000, 10_000], repetitions: Int = 7, clock: some Clock<Duration> = ContinuousClock()
    ) -> [Result] {
        tenantCounts.map { count in
            let workload = Workload(tenants: count)
            var policy = Policy(tiers: [
                Tier(name: "premium", priority: 1, weight: 4, floor: PerDimension(.absolute(1))),
                Tier(name: "standard", priority: 2, weight: 2),
            ])
            policy.setUpstream(
                UpstreamPolicy(
                    id: "bench/pool", capacity: PerDimension(rpm: workload.capacity.rpm, tpm: workload.capacity.tpm),
                    price: Price(inputPerMillionTokens: 1, outputPerMillionTokens: 4)))
            for index in stride(from: 0, to: count, by: 10) {
                policy.setTenant(TenantPolicy(id: "tenant-\(index)", tier: "premium"))
            }
            let observations = (0..<count).map { index in
                TenantObservation(
                    tenant: "tenant-\(index)", upstream: "bench/pool",
                    demand: PerDimension(rpm: workload.claims.rpm[index].demand, tpm: workload.claims.tpm[index].demand)
                )
            }
            var state = EngineState()
            var now = 1_800_000_000.0
            func tick() -> Double {
                now += 5
                let input = DecisionInput(now: now, policy: policy, tenants: observations)
                return PolicyEngine.decide(input, state: &state).pools.first?.allocated.rpm ?? 0
            }
            _ = tick()
            return measure(tenants: count, repetitions: repetitions, clock: clock, tick)
        }
    }

    private static func measure(
        tenants: Int, repetitions: Int, clock: some Clock<Duration>, _ body: () -> Double
    ) -> Result {
        var sink = body()  // warm-up
        var runs: [Double] = []
        for _ in 0..<max(1, repetitions) {
            let start = clock.now
            sink += body()
            let elapsed = start.duration(to: clock.now)
            runs.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        }
        precondition(sink.isFinite, "benchmark result must be finite")
        let sorted = runs.sorted()
        let median =
            sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        return Result(tenants: tenants, medianMilliseconds: median, runsMilliseconds: runs)
    }

    /// A deterministic pool of `tenants` claims per dimension.
    struct Workload {
        var capacity: PerDimension<Double>
        var settings = AllocationSettings(
            safetyMargin: 0.05, demandHeadroom: 0.2, surplus: .distribute, burstReserve: 0.1)
        var claims: PerDimension<[AllocationClaim]>

        init(tenants: Int) {
            var generator = SplitMix64(seed: 0xA110_7BE9 &+ UInt64(tenants))
            let rpm = Double(tenants) * 5
            capacity = PerDimension(rpm: rpm, tpm: rpm * 200)
            var rpmClaims: [AllocationClaim] = []
            var tpmClaims: [AllocationClaim] = []
            rpmClaims.reserveCapacity(tenants)
            tpmClaims.reserveCapacity(tenants)
            for _ in 0..<tenants {
                let weight = Double(1 + generator.next() % 8)
                let demand = 0.5 * pow10(generator.unit() * 3)  // 0.5 to 500 requests per minute
                let tokensPerRequest = 200 + generator.unit() * 1800
                let floor = generator.unit() < 0.33 ? 0.5 : 0
                let ceiling = generator.unit() < 0.25 ? 100 + generator.unit() * 300 : .infinity
                rpmClaims.append(
                    AllocationClaim(
                        weight: weight, floor: floor, ceiling: ceiling, demand: demand, starvationGuard: 0.1))
                tpmClaims.append(
                    AllocationClaim(
                        weight: weight, floor: floor * tokensPerRequest, ceiling: ceiling * tokensPerRequest,
                        demand: demand * tokensPerRequest, starvationGuard: 20))
            }
            claims = PerDimension(rpm: rpmClaims, tpm: tpmClaims)
        }
    }
}

/// `10^x` by repeated squaring on the integer part and a short series on the fraction; precise
/// enough for synthetic workloads, and keeps this module free of Foundation.
private func pow10(_ x: Double) -> Double {
    var result = 1.0
    var whole = Int(x.rounded(.down))
    var fraction = x - Double(whole)
    while whole > 0 {
        result *= 10
        whole -= 1
    }
    // 10^f = e^(f ln 10)
    fraction *= 2.302_585_092_994_046
    var term = 1.0
    var sum = 1.0
    for n in 1...20 {
        term *= fraction / Double(n)
        sum += term
    }
    return result * sum
}

/// SplitMix64: a small, fast, deterministic generator for synthetic workloads.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform value in `[0, 1)`.
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
