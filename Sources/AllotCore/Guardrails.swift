/// Checks operator overrides against tier guardrails (SPEC 6.7, 6.8).
public enum Guardrails {
    /// One way an override would push a tenant across a guardrail.
    public struct Crossing: Sendable, Hashable, Codable {
        /// The kind of crossing.
        public enum Kind: String, Sendable, Hashable, Codable {
            /// The override's floor is above the tier's `guard_max`: the tenant would be held above it.
            case floorAboveGuardMax = "floor_above_guard_max"
            /// The override's ceiling is below the tier's `guard_min`: the tenant would be held below it.
            case ceilingBelowGuardMin = "ceiling_below_guard_min"
        }

        public var kind: Kind
        /// The pool where it crosses.
        public var upstream: String
        public var dimension: RateDimension
        /// The override's resolved value (per minute).
        public var value: Double
        /// The guardrail it crosses (per minute).
        public var guardrail: Double
    }

    /// Every guardrail the override would cross, per pool and dimension, against the strictest guardrails of
    /// the tier the tenant is in *without* the override and the tier the override moves it to: the lower
    /// `guard_max` and the higher `guard_min`. The tenant's own tier, so that a tier change cannot launder a
    /// floor past a guardrail; the new tier, so that a tenant moved to `critical` with a ceiling below
    /// critical's `guard_min` is not applied unseen (checked against its old tier alone, it was "applied"
    /// and held below the guardrail with nobody's approval). Percentages are resolved against
    /// `capacities[upstream]` (the effective capacity after the safety margin), falling back to the
    /// policy's declared capacity; pools with neither are skipped. An empty result means the override can
    /// apply directly; otherwise the server files it as a proposal for an SRE (`Proposal.forOverride`).
    public static func crossings(
        of override: Override, policy: Policy, capacities: [String: PerDimension<Double?>] = [:]
    ) -> [Crossing] {
        let baseTier =
            policy.tier(named: policy.tierName(ofTenant: override.tenant))
            ?? policy.tier(named: policy.defaultTier)
        let tiers = [baseTier, override.tier.flatMap { policy.tier(named: $0) }].compactMap { $0 }
        guard !tiers.isEmpty else { return [] }
        var crossings: [Crossing] = []
        for upstream in pools(of: override, policy: policy, capacities: capacities) {
            let terms = policy.terms(
                ofTenant: override.tenant, upstream: upstream, overrides: [override],
                now: override.createdAt)
            for dimension in RateDimension.allCases {
                guard let capacity = capacity(of: upstream, dimension, policy: policy, capacities: capacities) else {
                    // No capacity: the dimension is not allocated, but an absolute ceiling is published as the
                    // tenant's rate (``Policy/absoluteCeiling(ofTenant:terms:_:)``): below an absolute guard_min it
                    // crosses too.
                    let setsCeiling = override.ceiling[dimension] != nil || override.tier != nil
                    let guardMin = tiers.compactMap { tier -> Double? in
                        if case .absolute(let value) = tier.guardMin[dimension] { return value }
                        return nil
                    }.max() ?? 0
                    if setsCeiling,
                        let ceiling = policy.absoluteCeiling(ofTenant: override.tenant, terms: terms, dimension)?.value,
                        ceiling < guardMin
                    {
                        crossings.append(
                            Crossing(
                                kind: .ceilingBelowGuardMin, upstream: upstream, dimension: dimension,
                                value: ceiling, guardrail: guardMin))
                    }
                    continue
                }
                let floor = terms.floor[dimension].resolved(capacity: capacity)
                let ceiling = terms.ceiling[dimension].resolved(capacity: capacity)
                let guardMin = tiers.map { $0.guardMin[dimension].resolved(capacity: capacity) }.max() ?? 0
                let guardMax = tiers.map { $0.guardMax[dimension].resolved(capacity: capacity) }.min() ?? .infinity
                let setsFloor = override.floor[dimension] != nil || override.tier != nil
                let setsCeiling = override.ceiling[dimension] != nil || override.tier != nil
                if setsFloor, floor > guardMax {
                    crossings.append(
                        Crossing(
                            kind: .floorAboveGuardMax, upstream: upstream, dimension: dimension,
                            value: floor, guardrail: guardMax))
                }
                if setsCeiling, ceiling < guardMin {
                    crossings.append(
                        Crossing(
                            kind: .ceilingBelowGuardMin, upstream: upstream, dimension: dimension,
                            value: ceiling, guardrail: guardMin))
                }
            }
        }
        return crossings
    }

    /// What the override leaves contradictory or out of reach on a pool, combined with the tenant's other
    /// overrides (`others`; the one of the same scope is replaced), the policy's entry for it and its tier: a
    /// floor above the ceiling (the floor wins: policies/README.md, *Floor above ceiling*) and a floor above the
    /// pool's capacity, which cannot be met (said when the override sets the floor or the tier). In words, for
    /// the `warning` of `PUT /v1/tenants/{id}/override` (round 20: a tenant-wide ceiling under a pool's floor,
    /// and a pool floor over the pool, were applied without a word). Only the dimensions the override sets a
    /// floor, a ceiling or the tier for; pools and percentages as in ``crossings(of:policy:capacities:)``, a
    /// tenant-wide override's only those of `tenantPools` when given (the pools the tenant uses: every pool the
    /// policy declares buried the one that mattered, round 21).
    public static func conflicts(
        of override: Override, alongside others: [Override], policy: Policy,
        capacities: [String: PerDimension<Double?>] = [:], tenantPools: Set<String>? = nil
    ) -> [String] {
        var pools = pools(of: override, policy: policy, capacities: capacities)
        if override.upstream == nil, let tenantPools { pools.removeAll { !tenantPools.contains($0) } }
        let overrides =
            others.filter { $0.tenant == override.tenant && $0.upstream != override.upstream } + [override]
        var conflicts: [String] = []
        for upstream in pools {
            let terms = policy.terms(
                ofTenant: override.tenant, upstream: upstream, overrides: overrides, now: override.createdAt)
            for dimension in RateDimension.allCases
            where override.floor[dimension] != nil || override.ceiling[dimension] != nil || override.tier != nil {
                guard let capacity = capacity(of: upstream, dimension, policy: policy, capacities: capacities) else {
                    // No capacity declared or estimated: the dimension is not allocated (every tenant unlimited);
                    // an absolute ceiling still limits the tenant there, a percentage has nothing to resolve against.
                    if case .percent(let percent) = override.ceiling[dimension],
                        terms.ceiling[dimension] == .percent(percent)
                    {
                        let fallback = policy.absoluteCeiling(ofTenant: override.tenant, terms: terms, dimension).map {
                            "its absolute ceiling \(Quantity.formatMeasured($0.value)) (tenant or tier) applies there"
                        }
                        conflicts.append(
                            "on \(upstream) the \(dimension.rawValue) ceiling \(Quantity.percent(percent).jsonText) "
                                + "has no capacity to resolve against (none declared or estimated) and limits nothing "
                                + "there until there is one: " + (fallback ?? "the tenant is unlimited there"))
                    }
                    continue
                }
                let floor = terms.floor[dimension].resolved(capacity: capacity)
                let ceiling = terms.ceiling[dimension].resolved(capacity: capacity)
                let unit = dimension.rawValue
                if floor > ceiling * (1 + 1e-9) {
                    conflicts.append(
                        "on \(upstream) the \(unit) floor \(Quantity.formatMeasured(floor)) is above the ceiling "
                            + "\(Quantity.formatMeasured(ceiling)): the floor wins")
                }
                if override.floor[dimension] != nil || override.tier != nil, floor > capacity * (1 + 1e-9) {
                    conflicts.append(
                        "on \(upstream) the \(unit) floor \(Quantity.formatMeasured(floor)) is above the pool's "
                            + "capacity \(Quantity.formatMeasured(capacity)) (after the safety margin): "
                            + "it cannot be met")
                }
            }
        }
        return conflicts
    }

    /// The pools an override is checked on, sorted: its own, or (tenant-wide) every pool the loop tracks or the
    /// policy declares.
    private static func pools(
        of override: Override, policy: Policy, capacities: [String: PerDimension<Double?>]
    ) -> [String] {
        if let only = override.upstream {
            return capacities[only] != nil || policy.upstream(only) != nil ? [only] : []
        }
        var pools = Set(capacities.keys)
        for upstream in policy.upstreams { pools.insert(upstream.id) }
        return pools.sorted()
    }

    /// `C` of a pool in a dimension: the loop's effective capacity, else the declared one less the safety margin;
    /// nil with neither (the pool is not checked there).
    private static func capacity(
        of upstream: String, _ dimension: RateDimension, policy: Policy, capacities: [String: PerDimension<Double?>]
    ) -> Double? {
        capacities[upstream]?[dimension]
            ?? policy.upstream(upstream)?.capacity[dimension].map { $0 * (1 - policy.allocation.safetyMargin) }
    }
}
