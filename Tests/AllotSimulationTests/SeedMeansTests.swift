import AllotJSON
import Testing

@testable import AllotSimulation

@Suite struct SeedMeansTests {
    static func run(
        utilisation: Double?, rate: Double, starved: Double, tv: Double?, convergence: Double?, slo: Double?, p95: Double?,
        jain: Double?, tasks: Int
    ) -> RunMetrics {
        RunMetrics(
            strategy: "allot", utilisation: utilisation, upstream429Rate: rate, upstreamAttempts: 100, upstream429s: Int(rate * 100),
            starvationTenantMinutes: starved, totalVariation: tv, convergenceSeconds: convergence, hasCapacityChange: true,
            timeToFirstAllocation: 2, tiers: ["premium": TierMetrics(sloAttainment: slo, latencyP50: 1, latencyP95: p95, latencyP99: p95, jain: jain, tasks: tasks)],
            sustainedStarvationTenantMinutes: starved / 2)
    }

    /// Means over the seeds that have a value; a "never" (nil convergence or latency) in any seed stays
    /// "never"; counts are summed.
    @Test func meansFollowTheDocumentedRules() {
        let a = Self.run(utilisation: 0.9, rate: 0.01, starved: 2, tv: 10, convergence: 30, slo: 0.8, p95: 12, jain: 0.9, tasks: 40)
        let b = Self.run(utilisation: nil, rate: 0.03, starved: 5, tv: 20, convergence: 50, slo: 1.0, p95: 8, jain: nil, tasks: 60)
        let mean = RunMetrics.mean(of: [a, b])
        #expect(mean.utilisation == 0.9)
        #expect(mean.upstream429Rate == 0.02)
        #expect(mean.upstreamAttempts == 200)
        #expect(mean.upstream429s == 4)
        #expect(mean.starvationTenantMinutes == 3.5)
        #expect(mean.sustainedStarvationTenantMinutes == 1.75)
        #expect(mean.totalVariation == 15)
        #expect(mean.convergenceSeconds == 40)
        #expect(mean.tiers["premium"] == TierMetrics(sloAttainment: 0.9, latencyP50: 1, latencyP95: 10, latencyP99: 10, jain: 0.9, tasks: 100))

        let never = Self.run(utilisation: 0.95, rate: 0, starved: 0, tv: 5, convergence: nil, slo: 0.5, p95: nil, jain: 1, tasks: 10)
        let withNever = RunMetrics.mean(of: [a, never])
        #expect(withNever.convergenceSeconds == nil)
        #expect(withNever.tiers["premium"]?.latencyP95 == nil)
        #expect(withNever.tiers["premium"]?.latencyP50 == 1)
        #expect(withNever.utilisation == 0.925)
    }

    /// Per pool by the same rules as the overall figures: utilisation and 429 rate the mean over the seeds that
    /// have a value, attempts and 429s the sums.
    @Test func poolMeansFollowTheOverallRules() {
        let noPool = Self.run(
            utilisation: 0.9, rate: 0.01, starved: 0, tv: 1, convergence: 30, slo: 1, p95: 1, jain: 1, tasks: 1)
        var (a, b) = (noPool, noPool)
        a.pools = [
            "p": PoolMetrics(utilisation: 0.5, upstream429Rate: 0.25, upstreamAttempts: 40, upstream429s: 10),
            "q": PoolMetrics(utilisation: nil, upstream429Rate: 0, upstreamAttempts: 0, upstream429s: 0),
        ]
        b.pools = [
            "p": PoolMetrics(utilisation: 0.75, upstream429Rate: 0.5, upstreamAttempts: 20, upstream429s: 10),
            "q": PoolMetrics(utilisation: 1, upstream429Rate: 0.125, upstreamAttempts: 80, upstream429s: 10),
        ]
        #expect(
            RunMetrics.mean(of: [a, b]).pools == [
                // Not 20 / 60: the mean of the seeds' rates, as overall.
                "p": PoolMetrics(utilisation: 0.625, upstream429Rate: 0.375, upstreamAttempts: 60, upstream429s: 20),
                // The seed in which q was never contended has no utilisation to average; its rate of 0 counts.
                "q": PoolMetrics(utilisation: 1, upstream429Rate: 0.0625, upstreamAttempts: 80, upstream429s: 10),
            ])
        #expect(RunMetrics.mean(of: [noPool, noPool]).pools == [:])
    }

    /// Each tenant's starvation is its mean over every seed, a seed in which it did not starve counting as 0: the
    /// tenants' figures still add up to the overall mean.
    @Test func tenantStarvationMeansCountEverySeed() {
        var (a, b) = (
            Self.run(utilisation: 1, rate: 0, starved: 3, tv: 1, convergence: 1, slo: 1, p95: 1, jain: 1, tasks: 1),
            Self.run(utilisation: 1, rate: 0, starved: 1, tv: 1, convergence: 1, slo: 1, p95: 1, jain: 1, tasks: 1)
        )
        a.starvedTenants = ["x": 2, "y": 1]
        b.starvedTenants = ["x": 1]
        let mean = RunMetrics.mean(of: [a, b])
        #expect(mean.starvedTenants == ["x": 1.5, "y": 0.5])
        #expect(mean.starvedTenants.values.reduce(0, +) == mean.starvationTenantMinutes)
    }

    @Test(arguments: [
        ("1-8", [1, 2, 3, 4, 5, 6, 7, 8]), ("7", [7]), ("1,4,9-11", [1, 4, 9, 10, 11]), ("0-0", [0]),
        // As far as --seed goes (it stopped at 2^32 − 1).
        ("99999999999", [99_999_999_999]),
        ("9223372036854775806-9223372036854775807", [Int64.max.magnitude - 1, Int64.max.magnitude]),
    ])
    func seedListsParse(text: String, seeds: [UInt64]) throws {
        #expect(try SimulationReport.parseSeeds(text).get() == seeds)
    }

    @Test(arguments: [
        ("", #""" is not a seed or a range A-B of seeds (A <= B)"#),
        ("a", #""a" is not a seed or a range A-B of seeds (A <= B)"#),
        ("3-1", #""3-1" is not a seed or a range A-B of seeds (A <= B)"#),
        ("1,,2", #""" is not a seed or a range A-B of seeds (A <= B)"#),
        ("-1", #""-1" is not a seed or a range A-B of seeds (A <= B)"#),
        ("1-2-3", #""1-2-3" is not a seed or a range A-B of seeds (A <= B)"#),
        ("9223372036854775808", #""9223372036854775808": a seed is at most 9223372036854775807, as for --seed"#),
        ("99999999999999999999", #""99999999999999999999" is not a seed or a range A-B of seeds (A <= B)"#),
        ("1-1001", "more than 1000 seeds"), ("0-99999", "more than 1000 seeds"),
        ("0-999,1000", "more than 1000 seeds"),
        ("1-4,3", "seed 3 is listed twice"),
    ])
    func badSeedListsSayWhy(text: String, message: String) {
        #expect(SimulationReport.parseSeeds(text) == .failure(SeedListError(message: message)))
    }

    @Test func aThousandSeedsAreAllowed() throws {
        #expect(try SimulationReport.parseSeeds("1-1000").get().count == 1000)
    }

    /// A report over seeds holds the means under "strategies" and each seed's own metrics, which are
    /// exactly those of a single run with that seed.
    @Test func aReportOverSeedsHoldsTheMeansAndEachSeed() async throws {
        let scenario = try SimRunTests.small()
        var perSeed: [[RunMetrics]] = []
        var singles: [JSON] = []
        for seed: UInt64 in [1, 2] {
            let traces = [
                try await Simulator.run(scenario, strategy: .static, seed: seed),
                try await Simulator.run(scenario, strategy: .equalSplit, seed: seed),
            ]
            perSeed.append(traces.map(RunMetrics.init(trace:)))
            singles.append(try #require(try JSON.parse(SimulationReport(scenario: scenario, seed: seed, traces: traces).json())["strategies"]))
        }
        let report = SimulationReport(scenario: scenario, seeds: [1, 2], perSeed: perSeed)
        #expect(report.metrics == [RunMetrics.mean(of: [perSeed[0][0], perSeed[1][0]]), RunMetrics.mean(of: [perSeed[0][1], perSeed[1][1]])])
        let json = try JSON.parse(report.json())
        #expect(json["seed"] == nil)
        #expect(json["seeds"] == .array([.int(1), .int(2)]))
        #expect(json["per_seed"]?[0]?["seed"]?.intValue == 1)
        #expect(json["per_seed"]?[0]?["strategies"] == singles[0])
        #expect(json["per_seed"]?[1]?["strategies"] == singles[1])
        let starved = (perSeed[0][1].starvationTenantMinutes + perSeed[1][1].starvationTenantMinutes) / 2
        #expect(json["strategies"]?["equal-split"]?["starvation_tenant_minutes"]?.doubleValue == SimulationReport.round6(starved))
        #expect(report.table().hasPrefix("scenario tiny, means over seeds 1, 2; headline"))
    }
}
