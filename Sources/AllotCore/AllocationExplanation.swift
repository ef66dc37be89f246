import AllotJSON

/// The answer to "why did I get this?" for one tenant, one upstream pool and one dimension
/// (SPEC 6.9, served by `GET /v1/tenants/{id}`): every input of the allocation formula, the
/// fair-share level, the value before and after dampening, and the reasons.
///
/// Unbounded values (no ceiling, unbounded demand, no `guard_max`, no budget cap) are `nil`, so the
/// record is finite and encodes to JSON as-is.
public struct AllocationExplanation: Sendable, Hashable, Codable {
    /// `C_est`, the capacity estimate for this pool and dimension.
    public var capacityEstimate: Double
    /// `C = C_est · (1 − safety_margin)`.
    public var capacity: Double
    /// `w_i` = tier weight × tenant (or override) weight; in a group, its part of the group's weight (the weight that
    /// gives it its share of the group's part at the pool's level, `PolicyEngine.allocate`).
    public var weight: Double
    /// The tenant's `group` (policy `tenants`), if any.
    public var group: String?
    /// The group's active tenants on this pool, who share its weight; nil outside a group.
    public var groupMembers: Int?
    /// `lo_i` as resolved against `C` (before guardrails and budget caps).
    public var floor: Double
    /// `ce_i` as resolved against `C`; nil when unbounded.
    public var ceiling: Double?
    /// `D_i`, the smoothed demand; nil when unbounded.
    public var demand: Double?
    /// The lower bound the water-filling used (floor, raised by `guard_min`, capped by a budget).
    public var lower: Double
    /// The upper bound the water-filling used, `max(lo, min(ce, D · (1 + headroom)))`; nil when unbounded.
    public var upper: Double?
    /// The fair-share level `f` of the pool (0 in degraded mode).
    public var level: Double
    /// The level of the surplus fill, when surplus was distributed.
    public var surplusLevel: Double?
    /// The value water-filling gave before guardrails (the proposal's unclamped value).
    public var unclamped: Double
    /// The tier's `guard_min`, resolved.
    public var guardMin: Double
    /// The tier's `guard_max`, resolved; nil when unbounded.
    public var guardMax: Double?
    /// The TPM cap a spend budget imposes; nil when none applies.
    public var budgetCap: Double?
    /// The burst credit rate included in `target`.
    public var burstCredit: Double
    /// The target before dampening (allocation plus burst credit).
    public var target: Double
    /// The previously published value; nil for a tenant entering now.
    public var previous: Double?
    /// The published value after dampening and the capacity fit.
    public var published: Double
    /// What the damper did this tick (SPEC 6.6).
    public var damping: DampingAction
    /// Whether the pool and dimension are in degraded mode.
    public var degraded: Bool
    /// The allocator's reason (fair share, demand, floor, ceiling, surplus, …).
    public var baseReason: AllocationReason
    /// The reason published (the allocator's reason, or a more specific one such as `override`,
    /// `cold_start` or `burst_credit`).
    public var reason: AllocationReason

    /// The published value minus the previous one: the dampening step taken.
    public var step: Double { published - (previous ?? 0) }

    public init(
        capacityEstimate: Double, capacity: Double, weight: Double, floor: Double, ceiling: Double?,
        demand: Double?, lower: Double, upper: Double?, level: Double, surplusLevel: Double?, unclamped: Double,
        guardMin: Double, guardMax: Double?, budgetCap: Double?, burstCredit: Double, target: Double,
        previous: Double?, published: Double, damping: DampingAction, degraded: Bool,
        baseReason: AllocationReason, reason: AllocationReason
    ) {
        self.capacityEstimate = capacityEstimate
        self.capacity = capacity
        self.weight = weight
        self.floor = floor
        self.ceiling = ceiling
        self.demand = demand
        self.lower = lower
        self.upper = upper
        self.level = level
        self.surplusLevel = surplusLevel
        self.unclamped = unclamped
        self.guardMin = guardMin
        self.guardMax = guardMax
        self.budgetCap = budgetCap
        self.burstCredit = burstCredit
        self.target = target
        self.previous = previous
        self.published = published
        self.damping = damping
        self.degraded = degraded
        self.baseReason = baseReason
        self.reason = reason
    }
}

/// What the damper did to move the published value toward the target (SPEC 6.6).
public enum DampingAction: String, Sendable, Hashable, Codable, CaseIterable {
    /// No dampening: what-if plans, or the value was taken as computed.
    case none
    /// A new (or returning-from-idle) tenant entered directly at its target: no slow ramp from zero.
    case entered
    /// The target moved by less than the deadband; the published value stayed.
    case heldDeadband = "held_deadband"
    /// The value already covers what the tenant needs; only the pool's surplus moved, and it stayed
    /// (`dampening.hold_surplus`).
    case heldSurplus = "held_surplus"
    /// The target reversed direction but has not stayed on the new side for `persist_ticks` yet.
    case heldPersistence = "held_persistence"
    /// The published value moved all the way to the (smoothed) target.
    case followed
    /// The move was limited to `max_up` or `max_down` for this tick.
    case limited
    /// The rise waited for room: the capacity others still hold (make room first, SPEC 6.6).
    case waitedForRoom = "waited_for_room"
    /// Held above its target (deadband, persistence, step limit), it gave way toward the target because
    /// another tenant's rise needed the room.
    case gaveWay = "gave_way"
    /// Cut at once, past `max_down`: a capacity drop, a ceiling or a budget cap (never above C).
    case cut
}

extension PoolAllocation {
    /// The explanation of claim `index` as the allocator sees it: `target` and `published` equal the
    /// allocation and `damping` is `.none` until the engine's dampening fills them in.
    public func explanation(of index: Int, claim: AllocationClaim) -> AllocationExplanation {
        AllocationExplanation(
            capacityEstimate: capacityEstimate, capacity: capacity, weight: claim.weight, floor: claim.floor,
            ceiling: claim.ceiling.finiteOrNil, demand: claim.demand.finiteOrNil, lower: lowerBounds[index],
            upper: upperBounds[index].finiteOrNil, level: level, surplusLevel: surplusLevel,
            unclamped: unclamped[index], guardMin: claim.guardMin, guardMax: claim.guardMax.finiteOrNil,
            budgetCap: claim.budgetCap.finiteOrNil, burstCredit: 0, target: allocations[index], previous: nil,
            published: allocations[index], damping: .none, degraded: degraded, baseReason: reasons[index],
            reason: reasons[index])
    }
}

extension Double {
    /// `self`, or nil when infinite or NaN: how unbounded values travel in records and JSON.
    var finiteOrNil: Double? { isFinite ? self : nil }
}

extension AllocationExplanation {
    /// The record as JSON with snake_case keys, for `GET /v1/tenants/{id}`; unbounded values are `null`.
    public var json: JSON {
        func number(_ value: Double?) -> JSON { value.map { JSON.double($0) } ?? .null }
        return [
            "capacity_estimate": number(capacityEstimate), "capacity": number(capacity), "weight": number(weight),
            "floor": number(floor), "ceiling": number(ceiling), "demand": number(demand), "lower": number(lower),
            "upper": number(upper), "level": number(level), "surplus_level": number(surplusLevel),
            "unclamped": number(unclamped), "guard_min": number(guardMin), "guard_max": number(guardMax),
            "budget_cap": number(budgetCap), "burst_credit": number(burstCredit), "target": number(target),
            "previous": number(previous), "published": number(published), "step": number(step),
            "damping": .string(damping.rawValue), "degraded": .bool(degraded),
            "base_reason": .string(baseReason.rawValue), "reason": .string(reason.rawValue),
            "group": group.map { .string($0) } ?? .null, "group_members": groupMembers.map { .int(Int64($0)) } ?? .null,
        ]
    }
}
