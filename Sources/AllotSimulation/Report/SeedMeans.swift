/// Means over several seeds (`allot simulate --seeds`): one seed's run is one Poisson draw of the
/// world, and a change of the maths or the settings is judged on the mean over several.
extension RunMetrics {
    /// The mean of `runs` (one strategy, one run per seed) by these rules:
    /// - utilisation, starvation, total variation, 429 rate, time to first allocation, SLO attainment
    ///   and Jain's index: the mean over the seeds that have a value (nil when none has one);
    /// - convergence and latency percentiles: nil ("never") when any seed's is nil — a run that never
    ///   settled must not be averaged away — else the mean;
    /// - attempts, 429s and tasks: the sums;
    /// - each tenant's starvation: the mean over all the seeds (a seed in which it did not starve counts as 0).
    ///
    /// Per tier and per pool by the same rules, over the seeds in which the tier or pool is present.
    public static func mean(of runs: [RunMetrics]) -> RunMetrics {
        precondition(!runs.isEmpty, "at least one run")
        func average(_ values: [Double?]) -> Double? {
            let present = values.compactMap { $0 }
            return present.isEmpty ? nil : present.reduce(0, +) / Double(present.count)
        }
        func strict(_ values: [Double?]) -> Double? {
            values.contains { $0 == nil } ? nil : average(values)
        }
        var tiers: [String: TierMetrics] = [:]
        for name in Set(runs.flatMap { $0.tiers.keys }) {
            let present = runs.compactMap { $0.tiers[name] }
            tiers[name] = TierMetrics(
                sloAttainment: average(present.map(\.sloAttainment)), latencyP50: strict(present.map(\.latencyP50)),
                latencyP95: strict(present.map(\.latencyP95)), latencyP99: strict(present.map(\.latencyP99)),
                jain: average(present.map(\.jain)), tasks: present.reduce(0) { $0 + $1.tasks },
                allocatedShare: average(present.map(\.allocatedShare)), servedShare: average(present.map(\.servedShare))
            )
        }
        var pools: [String: PoolMetrics] = [:]
        for id in Set(runs.flatMap { $0.pools.keys }) {
            let present = runs.compactMap { $0.pools[id] }
            pools[id] = PoolMetrics(
                utilisation: average(present.map(\.utilisation)),
                upstream429Rate: average(present.map(\.upstream429Rate)) ?? 0,
                upstreamAttempts: present.reduce(0) { $0 + $1.upstreamAttempts },
                upstream429s: present.reduce(0) { $0 + $1.upstream429s })
        }
        let changes = runs.contains { $0.hasCapacityChange }
        return RunMetrics(
            strategy: runs[0].strategy, utilisation: average(runs.map(\.utilisation)),
            upstream429Rate: average(runs.map(\.upstream429Rate)) ?? 0,
            upstreamAttempts: runs.reduce(0) { $0 + $1.upstreamAttempts },
            upstream429s: runs.reduce(0) { $0 + $1.upstream429s },
            starvationTenantMinutes: average(runs.map(\.starvationTenantMinutes)) ?? 0,
            totalVariation: average(runs.map(\.totalVariation)),
            convergenceSeconds: changes ? strict(runs.map(\.convergenceSeconds)) : nil, hasCapacityChange: changes,
            timeToFirstAllocation: average(runs.map(\.timeToFirstAllocation)), tiers: tiers,
            sustainedStarvationTenantMinutes: average(runs.map(\.sustainedStarvationTenantMinutes)) ?? 0, pools: pools,
            starvedTenants: runs.reduce(into: [:]) { sums, run in
                for (id, minutes) in run.starvedTenants { sums[id, default: 0] += minutes / Double(runs.count) }
            })
    }
}

extension SimulationReport {
    /// A report of the means over several seeds: `perSeed[k]` holds the strategies' metrics for
    /// `seeds[k]`, in the same strategy order for every seed.
    public init(scenario: Scenario, seeds: [UInt64], perSeed: [[RunMetrics]]) {
        precondition(!seeds.isEmpty && seeds.count == perSeed.count, "one metrics list per seed")
        self.scenario = scenario.name
        self.seed = seeds[0]
        self.seeds = seeds
        self.headline = scenario.headline
        self.traces = []
        self.perSeed = perSeed
        self.metrics = perSeed[0].indices.map { index in RunMetrics.mean(of: perSeed.map { $0[index] }) }
    }

    /// Parses a `--seeds` list: comma-separated seeds and inclusive ranges (`1-8`, `1,4,9-12`), each at
    /// most `Int.max` (as `--seed`), at most `limit` seeds, no repeats; nil with the reason otherwise.
    public static func parseSeeds(_ text: String, limit: Int = 1000) -> Result<[UInt64], SeedListError> {
        var seeds: [UInt64] = []
        var seen = Set<UInt64>()
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
            guard (1...2).contains(bounds.count),
                let low = bounds.first.flatMap({ UInt64($0) }), let high = bounds.last.flatMap({ UInt64($0) }),
                low <= high
            else {
                return .failure(SeedListError(message: "\"\(part)\" is not a seed or a range A-B of seeds (A <= B)"))
            }
            guard high <= UInt64(Int.max) else {
                return .failure(SeedListError(message: "\"\(part)\": a seed is at most \(Int.max), as for --seed"))
            }
            guard high - low < UInt64(limit), seeds.count + Int(high - low) + 1 <= limit else {
                return .failure(SeedListError(message: "more than \(limit) seeds"))
            }
            for seed in low...high {
                guard seen.insert(seed).inserted else {
                    return .failure(SeedListError(message: "seed \(seed) is listed twice"))
                }
                seeds.append(seed)
            }
        }
        return .success(seeds)
    }
}

public struct SeedListError: Error, Sendable, Equatable {
    public var message: String
}
