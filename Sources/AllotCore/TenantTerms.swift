/// A tenant's effective terms on one upstream pool: its tier and the policy's tenant entry, with
/// the active override (if any) applied on top. Values are still quantities; they are resolved
/// against the pool's capacity per dimension.
public struct TenantTerms: Sendable, Hashable {
    /// The tier in force (the override's, else the policy assignment, else the default tier).
    public var tier: Tier
    /// `w` = tier weight × (override weight, else the tenant's weight, else 1), held within ``weightBounds``.
    public var weight: Double

    /// The effective weight's range: never 0 or infinite, whatever a policy built in code holds.
    public static let weightBounds = 1e-9...1e9
    /// Floor per dimension (override, else tenant, else tier).
    public var floor: PerDimension<Quantity>
    /// Ceiling per dimension (override, else tenant, else tier).
    public var ceiling: PerDimension<Quantity>
    /// The override applied, if any.
    public var override: Override?
    /// The policy entry's `group`, if any.
    public var group: String?
    /// How many active tenants of ``group`` share its weight on this pool (``PolicyEngine``, which divides their
    /// weights by it and shares the group's part max-min among them; ``weight`` is the undivided one); 1 outside a
    /// group, or alone in it.
    public var groupMembers = 1

    /// Whether an approved override suspends the tier's guardrails.
    public var guardrailsSuspended: Bool { override?.approved ?? false }
}

extension Policy {
    /// The terms of `tenant` on `upstream` at `now`, given the overrides in force.
    ///
    /// Only overrides active at `now` and applying to `upstream` count. A tenant-wide override and one for
    /// this upstream combine field by field, the upstream's winning where both set a field (the most specific
    /// wins): a fleet-wide ceiling and a pool's floor both hold there (outside evaluation round 20: whichever was
    /// written last replaced the other). Of several of one scope the most recently created counts (then the later
    /// actor name), so the result never depends on input order. An override naming a tier the policy no longer
    /// has keeps the tenant's own tier.
    public func terms(ofTenant tenant: String, upstream: String, overrides: [Override], now: Double) -> TenantTerms {
        var wide: Override?
        var specific: Override?
        for candidate in overrides
        where candidate.tenant == tenant && candidate.isActive(at: now)
            && candidate.applies(to: upstream)
        {
            func newer(_ current: Override?) -> Bool {
                guard let current else { return true }
                return (candidate.createdAt, candidate.actor) > (current.createdAt, current.actor)
            }
            if candidate.upstream == nil {
                if newer(wide) { wide = candidate }
            } else if newer(specific) {
                specific = candidate
            }
        }
        let chosen = Override.combined(wide: wide, specific: specific)
        let entry = self.tenant(tenant)
        let tierName = chosen?.tier.flatMap { self.tier(named: $0) != nil ? $0 : nil } ?? entry?.tier ?? defaultTier
        let tier =
            self.tier(named: tierName) ?? self.tier(named: defaultTier) ?? tiers.first
            ?? Tier(name: defaultTier, priority: 0)
        var floor = tier.floor
        var ceiling = tier.ceiling
        for dimension in RateDimension.allCases {
            if let value = chosen?.floor[dimension] ?? entry?.floor[dimension] { floor[dimension] = value }
            if let value = chosen?.ceiling[dimension] ?? entry?.ceiling[dimension] { ceiling[dimension] = value }
        }
        // Loaded weights are bounded (``FieldReader/NumberRule/weight``), so their product is within 1e-6…1e6; a
        // policy built in code is not, and an infinite or zero weight breaks the water-filling: held finite here.
        let product = tier.weight * (chosen?.weight ?? entry?.weight ?? 1)
        let bounds = TenantTerms.weightBounds
        let weight = product.isNaN ? 1 : min(max(product, bounds.lowerBound), bounds.upperBound)
        return TenantTerms(
            tier: tier, weight: weight, floor: floor, ceiling: ceiling, override: chosen, group: entry?.group)
    }

    /// The ceiling that limits `tenant` (with `terms`, from ``terms(ofTenant:upstream:overrides:now:)``) in a
    /// dimension of a pool with no capacity to resolve a percentage against: the first absolute one of its override's,
    /// its own and its tier's — a percentage is passed over, not read as no ceiling (an override's "5 %" meant to
    /// tighten a tier's 30,000 would otherwise lift it) — and whether the override set it; nil where none is
    /// absolute.
    public func absoluteCeiling(
        ofTenant tenant: String, terms: TenantTerms, _ dimension: RateDimension
    ) -> (value: Double, byOverride: Bool)? {
        let layers = [
            terms.override?.ceiling[dimension], self.tenant(tenant)?.ceiling[dimension], terms.tier.ceiling[dimension],
        ]
        for (index, layer) in layers.enumerated() {
            if case .absolute(let value) = layer, value.isFinite, value < FieldReader.maxRate {
                return (value, index == 0)
            }
        }
        return nil
    }
}
