import AllotAssets
import AllotCore

/// The policy a simulated `allot` runs with: the default policies built into the binary (or the
/// policy of `allot simulate --policy DIR`), with the scenario's pools (declared capacity) in place of
/// its upstreams, the scenario's tenants with their tier assignments (a tenant the base policy also
/// names keeps its weight, floor and ceiling) and, if given, the scenario's tick interval. Spend budgets are left out: the simulator measures capacity sharing, not costs, and a
/// month budget projected from one simulated hour would throttle tenants for reasons the story is
/// not about.
public enum SimulationPolicy {
    /// The default policies (`policies/*.json`, embedded).
    public static func defaultPolicy() throws(PolicyError) -> Policy {
        try Policy.load(files: AllotAssets.defaultPolicies.map { (name: $0.name, bytes: $0.bytes) })
    }

    public static func policy(for scenario: Scenario, base given: Policy? = nil) throws(PolicyError) -> Policy {
        let base: Policy
        if let given { base = given } else { base = try defaultPolicy() }
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
            // A tenant on several pools has one entry per pool and one tier: `Policy` keeps one per id.
            tenants: scenario.tenants.map { tenant -> TenantPolicy in
                guard let known = base.tenant(tenant.id) else {
                    return TenantPolicy(id: tenant.id, tier: tenant.tier, group: tenant.group)
                }
                return TenantPolicy(
                    id: tenant.id, tier: tenant.tier, weight: known.weight, floor: known.floor, ceiling: known.ceiling,
                    group: tenant.group ?? known.group)
            }, costs: base.costs,
            taskBudgets: base.taskBudgets, alerts: base.alerts, proposals: base.proposals,
            classifier: base.classifier, observer: base.observer)
    }
}
