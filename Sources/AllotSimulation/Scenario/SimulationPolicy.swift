import AllotAssets
import AllotCore

/// The policy a simulated `allot` runs with: the default policies built into the binary, with the
/// scenario's pools (declared capacity), its tenants' tier assignments and, if given, its tick
/// interval. Spend budgets are left out: the simulator measures capacity sharing, not costs, and a
/// month budget projected from one simulated hour would throttle tenants for reasons the story is
/// not about.
public enum SimulationPolicy {
    /// The default policies (`policies/*.json`, embedded).
    public static func defaultPolicy() throws(PolicyError) -> Policy {
        try Policy.load(files: AllotAssets.defaultPolicies.map { (name: $0.name, bytes: $0.bytes) })
    }

    public static func policy(for scenario: Scenario) throws(PolicyError) -> Policy {
        let base = try defaultPolicy()
        var loop = base.loop
        if let tick = scenario.tickIntervalSeconds { loop.intervalSeconds = tick }
        let tiers = base.tiers.map { tier -> Tier in
            var tier = tier
            tier.budgets = []
            return tier
        }
        return Policy(
            loop: loop, allocation: base.allocation, dampening: base.dampening, defaultTier: base.defaultTier,
            tiers: tiers,
            upstreams: scenario.pools.map {
                UpstreamPolicy(id: $0.id, capacity: PerDimension(rpm: $0.declaredRPM, tpm: $0.declaredTPM))
            },
            tenants: scenario.tenants.map { TenantPolicy(id: $0.id, tier: $0.tier) }, costs: base.costs,
            taskBudgets: base.taskBudgets, alerts: base.alerts, proposals: base.proposals,
            classifier: base.classifier, observer: base.observer)
    }
}
