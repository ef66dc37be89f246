/// Why a tenant received the allocation it did, one per tenant per dimension (SPEC 6.9).
///
/// The raw values are a public contract: they appear in snapshots, plan output and the API.
public enum AllocationReason: String, CaseIterable, Sendable, Hashable, Codable {
    /// Capacity is short: the tenant got the weighted max-min fair share `f · w`.
    case fairShare = "fair_share"
    /// The tenant got all it wants: its demand (plus the demand headroom) is below its fair share.
    case demand
    /// The tenant's floor binds: its fair share (or its demand) is below its guaranteed floor.
    case floor
    /// The tenant's ceiling binds: it would get more without it.
    case ceiling
    /// Demand was met and the tenant received part of the leftover capacity as growth headroom.
    case surplus
    /// A time-limited burst credit is included on top of the allocation.
    case burstCredit = "burst_credit"
    /// The pool is in degraded mode (floors exceed capacity): starvation guard and floors by tier.
    case degraded
    /// A tier guardrail (`guard_min`/`guard_max`) clamped the engine's value; a proposal was filed.
    case guardrailClamped = "guardrail_clamped"
    /// An operator override (tier, weight, floor or ceiling) is in force for this tenant.
    case override
    /// The tenant is new: its demand is the classifier's blend of the tier prior and observations.
    case coldStart = "cold_start"
    /// The tenant is idle and holds only its tier's `idle_allocation`.
    case idle
    /// A spend budget caps the tenant (throttle: the rate that lands the window on budget; hard: cut).
    case budget
}
