/// What to do with capacity left over once every active tenant's demand is met (SPEC 6.3).
public enum SurplusMode: String, Sendable, Hashable, Codable, CaseIterable {
    /// Hand the surplus out as growth headroom, by the same water-filling with `lo = x_i`, `hi = ce_i`.
    case distribute
    /// Keep it unallocated (what-if plans that show bare demand, cautious roll-outs).
    case hold
}

/// Pool-wide settings for one allocation (SPEC 6.1–6.3); the policy's `allocation` section.
public struct AllocationSettings: Sendable, Hashable, Codable {
    /// Fraction of the capacity estimate kept back: `C = C_est · (1 − safety_margin)`. In `[0, 1)`.
    public var safetyMargin: Double
    /// Slack on top of demand: `hi_i = max(lo_i, min(ce_i, D_i · (1 + demand_headroom)))`. `>= 0`.
    public var demandHeadroom: Double
    /// Standard deviations of a tenant's minute-to-minute swing (``AllocationClaim/spread``) its upper bound
    /// covers beyond `demand_headroom`, pooled: `hi_i` grows by `s · max(0, z·σ_i − D_i · demand_headroom)`,
    /// where `s ≤ 1` keeps the growth summed over the pool's tenants within `z · √(Σ σ_i²)`, the swing of
    /// their total. `>= 0`; 0 leaves SPEC 6.1's formula exactly.
    public var demandDeviations: Double
    /// Whether leftover capacity is distributed or held.
    public var surplus: SurplusMode
    /// Fraction of the surplus kept back to fund burst credits (SPEC 6.3, 6.5). In `[0, 1]`.
    /// What-if plans use 0: they have no live lending.
    public var burstReserve: Double
    /// The most of `C` the idle tenants' `idle_allocation`s may take together; beyond it they are scaled
    /// down in proportion. In `[0, 1]`; 1 scales them only when they exceed `C` itself.
    public var idleShare: Double

    public init(
        safetyMargin: Double = 0.02, demandHeadroom: Double = 0.2, surplus: SurplusMode = .distribute,
        burstReserve: Double = 0.1, demandDeviations: Double = 2, idleShare: Double = 0.1
    ) {
        self.safetyMargin = safetyMargin
        self.demandHeadroom = demandHeadroom
        self.surplus = surplus
        self.burstReserve = burstReserve
        self.demandDeviations = demandDeviations
        self.idleShare = idleShare
    }

    private enum CodingKeys: String, CodingKey {
        case safetyMargin, demandHeadroom, surplus, burstReserve, demandDeviations, idleShare
    }

    /// Settings stored before `demandDeviations` existed decode with it off (their allocations were computed so),
    /// and before `idleShare` existed with 1.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        safetyMargin = try container.decode(Double.self, forKey: .safetyMargin)
        demandHeadroom = try container.decode(Double.self, forKey: .demandHeadroom)
        surplus = try container.decode(SurplusMode.self, forKey: .surplus)
        burstReserve = try container.decode(Double.self, forKey: .burstReserve)
        demandDeviations = try container.decodeIfPresent(Double.self, forKey: .demandDeviations) ?? 0
        idleShare = try container.decodeIfPresent(Double.self, forKey: .idleShare) ?? 1
    }
}

/// One tenant's resolved inputs for one pool and one dimension: absolute per-minute values, with
/// percentages already resolved against `C` and tier, tenant and override values already combined.
public struct AllocationClaim: Sendable, Hashable {
    /// `w_i` = tier weight × tenant weight; `> 0`.
    public var weight: Double
    /// `lo_i`, the guaranteed floor.
    public var floor: Double
    /// `ce_i`, the ceiling; `.infinity` when unbounded.
    public var ceiling: Double
    /// `D_i`, the smoothed demand; `.infinity` when unbounded (what-if plans).
    public var demand: Double
    /// The minimum every active tenant keeps in degraded mode (SPEC 6.4).
    public var starvationGuard: Double
    /// Degraded-mode order: lower ranks have their floors honoured first (tier priority order).
    public var rank: Int
    /// Idle tenants receive only `idleAllocation`, taken from `C` first (SPEC 6.1).
    public var isIdle: Bool
    /// What an idle tenant holds (within its ceiling and budget cap: ``idleHolding``).
    public var idleAllocation: Double
    /// The engine never allocates below this on its own, outside degraded mode (SPEC 6.7).
    public var guardMin: Double
    /// The engine never allocates above this on its own (SPEC 6.7).
    public var guardMax: Double
    /// A spend-budget cap (SPEC 6, cost governance); `.infinity` when none applies. Binds over the
    /// floor, the guardrails and the starvation guard: a budget protects the bill.
    public var budgetCap: Double
    /// Whether the tenant may receive surplus growth headroom; false while it owes burst debt (SPEC 6.10).
    public var receivesSurplus: Bool
    /// `σ_i`, the standard deviation of the tenant's rate from one minute to the next (per minute, like
    /// `demand`): how far its traffic swings around `D_i`. 0 when unknown (what-if plans).
    public var spread: Double

    public init(
        weight: Double = 1, floor: Double = 0, ceiling: Double = .infinity, demand: Double = .infinity,
        starvationGuard: Double = 0, rank: Int = 0, isIdle: Bool = false, idleAllocation: Double = 0,
        guardMin: Double = 0, guardMax: Double = .infinity, budgetCap: Double = .infinity,
        receivesSurplus: Bool = true, spread: Double = 0
    ) {
        self.weight = weight
        self.floor = floor
        self.ceiling = ceiling
        self.demand = demand
        self.starvationGuard = starvationGuard
        self.rank = rank
        self.isIdle = isIdle
        self.idleAllocation = idleAllocation
        self.guardMin = guardMin
        self.guardMax = guardMax
        self.budgetCap = budgetCap
        self.receivesSurplus = receivesSurplus
        self.spread = spread
    }

    /// What an idle tenant is given before any scaling: its idle allocation, but never above its ceiling, its
    /// `guard_max` or its budget cap — a ceiling is the most a tenant holds, idle or not (outside evaluation round 34:
    /// an idle free tenant was published at its tier's 30-rpm idle allocation under a 10-rpm ceiling).
    var idleHolding: Double { min(idleAllocation, ceiling, guardMax, budgetCap) }
}

/// The allocation of one pool in one dimension (SPEC 6.1–6.4, 6.9), before dampening.
///
/// `compute` runs, in order:
/// 1. `C = C_est · (1 − safety_margin)`; idle tenants take their `idle_allocation` from `C` first
///    (scaled down proportionally if together they exceed `idle_share` of `C`: absolute idle allocations sized
///    for large pools took two thirds of a 60-rpm pool shared by 40 tenants, 14 of them critical);
/// 2. for active tenants `hi_i = max(lo_i, min(ce_i, D_i · (1 + demand_headroom) + s · extra_i))`, with the
///    budget cap applied to `ce_i` and `lo_i` (`extra_i`, `s`: the pooled swing allowance, ``swingAllowance``;
///    0 for a claim without a `spread`, so a what-if plan uses SPEC 6.1's formula exactly);
/// 3. if `Σ lo_i > C` → degraded mode (below); otherwise water-filling (`WaterFilling`) without
///    guardrails, then — if any tenant lands outside `[min(guard_min, hi_i), guard_max]` — again
///    with the guardrails as bounds (`guard_min` only when all of them fit: otherwise it is capacity,
///    not choice), keeping the unclamped values as the evidence for proposals. `guard_min` is capped
///    at `hi_i` because giving back capacity a tenant does not want is not a squeeze (SPEC 6.7 guards
///    against the engine squeezing a tenant; redistributing unused quota is the safe, automatic case);
/// 4. the surplus `C − Σ x_i` (unless `hold`), minus the burst reserve, by the same water-filling
///    with `lo = x_i` and `hi = min(ce_i, guard_max, budget cap)` (`hi = x_i` for tenants in debt).
///
/// Degraded mode (SPEC 6.4): every active tenant first gets its starvation guard (scaled down
/// proportionally if those exceed `C`); the rest honours floors rank by rank (tier priority order),
/// each floor up to the tenant's demand bound `min(ce_i, D_i · (1 + demand_headroom) + …)`, and the
/// rank where capacity runs out shares what is left in proportion to its floors above the guard. If
/// capacity is left (the floors exceed `C` but the demand under them does not), it goes by weight up to
/// each tenant's demand, and only then to the floors' remainder above demand, rank by rank. Nobody with
/// a positive guard drops to zero and relative priority is kept.
public struct PoolAllocation: Sendable {
    /// `C_est`, the capacity estimate before the safety margin.
    public var capacityEstimate: Double
    /// `C = C_est · (1 − safety_margin)`.
    public var capacity: Double
    /// The settings used.
    public var settings: AllocationSettings
    /// `x_i` per claim, in input order. Never sums above `capacity`.
    public var allocations: [Double]
    /// Per claim, what it was given before the surplus (step 4): the demand, floor or fair-share value
    /// the water-filling settled on (the idle allocation for an idle tenant; in degraded mode, the
    /// allocation itself). What lies between it and `allocations` is growth headroom, which dampening may
    /// leave where it is (``DampeningSettings/holdSurplus``).
    public var needs: [Double]
    /// Why each tenant got its value (the allocator's reasons: `idle`, `degraded`, `budget`,
    /// `guardrail_clamped`, `surplus`, `ceiling`, `demand`, `floor`, `fair_share`).
    public var reasons: [AllocationReason]
    /// `lo_i` as used (budget-capped floor).
    public var lowerBounds: [Double]
    /// `hi_i` as used.
    public var upperBounds: [Double]
    /// The water-filling result without guardrails (the "unclamped value" of a proposal).
    public var unclamped: [Double]
    /// Tenants whose value a guardrail moved; each of these warrants a proposal.
    public var guardClamped: [Bool]
    /// The fair-share level `f` of the main fill (0 in degraded mode).
    public var level: Double
    /// The level of the surplus fill, if one ran.
    public var surplusLevel: Double?
    /// `Σ lo_i > C` for the active tenants.
    public var degraded: Bool
    /// Capacity held back to back burst credits: `burst_reserve × surplus`.
    public var burstReserve: Double
    /// Capacity taken by idle tenants.
    public var idleTotal: Double

    /// `Σ x_i`.
    public var allocatedTotal: Double { allocations.reduce(0, +) }
    /// `C − Σ x_i` (includes the burst reserve), never negative.
    public var unallocated: Double { max(0, capacity - allocatedTotal) }

    /// The growth of the active tenants' upper bounds for their swing (``AllocationSettings/demandDeviations``):
    /// each asks `extra = max(0, z·σ_i − D_i · demand_headroom)`, and all are scaled by one `scale ≤ 1` so
    /// that together they stay within `z · √(Σ σ_i²)`. Tenants swing independently: their total swings by
    /// the root of their summed variances, far less than the sum of their swings. Each given its own full
    /// swing, 450 small tenants on one pool (300 of them at 2 rpm, whose swing is twice their rate) held a
    /// third of it idle and the tenants above their fair share starved; scaled, what one tenant leaves
    /// unused is the slack another's swing takes, and the gateways lend it.
    static func swingAllowance(
        claims: [AllocationClaim], settings: AllocationSettings
    ) -> (scale: Double, extra: (AllocationClaim) -> Double) {
        let deviations = settings.demandDeviations
        let headroom = settings.demandHeadroom
        func extra(_ claim: AllocationClaim) -> Double {
            guard claim.spread > 0, claim.demand.isFinite, claim.spread.isFinite else { return 0 }
            return max(0, deviations * claim.spread - claim.demand * headroom)
        }
        guard deviations > 0 else { return (0, { _ in 0 }) }
        var asked = 0.0
        var variance = 0.0
        for claim in claims where !claim.isIdle && claim.spread > 0 && claim.spread.isFinite {
            asked += extra(claim)
            variance += claim.spread * claim.spread
        }
        guard asked > 0 else { return (0, { _ in 0 }) }
        return (min(1, deviations * variance.squareRoot() / asked), extra)
    }

    /// Computes the allocation of capacity estimate `capacityEstimate` among `claims`.
    public static func compute(
        capacityEstimate: Double, settings: AllocationSettings, claims: [AllocationClaim]
    ) -> PoolAllocation {
        compute(capacityEstimate: capacityEstimate, settings: settings, claims: claims, reweigh: nil)
    }

    /// One of `compute`'s fills after the first: the refill with the guardrails as bounds (step 3), the surplus
    /// (step 4).
    enum Refill { case guarded, surplus }

    /// Weights for a refill in place of those it would use: given the refill, the active claims (indices into
    /// `claims`) and the weights, lower and upper bounds (parallel to them) and capacity it is about to fill with,
    /// the weights to use instead, or nil to keep them. Weights given for the guarded refill are also the surplus'.
    /// `PolicyEngine.allocate` shares a group's part in two levels through it.
    typealias Reweighing = (
        _ refill: Refill, _ active: [Int], _ weights: [Double], _ lower: [Double], _ upper: [Double],
        _ capacity: Double
    ) -> [Double]?

    /// ``compute(capacityEstimate:settings:claims:)``, the refills weighted by `reweigh` (nil: the claims' weights).
    static func compute(
        capacityEstimate: Double, settings: AllocationSettings, claims: [AllocationClaim], reweigh: Reweighing?
    ) -> PoolAllocation {
        let capacity = max(0, capacityEstimate * (1 - settings.safetyMargin))
        let count = claims.count
        let headroom = 1 + settings.demandHeadroom

        // Gather the active tenants' bounds in one pass; idle tenants are settled once their total
        // is known. Working on local arrays (not through `result`) keeps the hot loops tight.
        var active: [Int] = []
        var weights: [Double] = []
        var lower: [Double] = []
        var upper: [Double] = []
        var ceilings: [Double] = []
        var wants: [Double] = []  // D · (1 + demand_headroom) plus the swing allowance, before floor and ceiling
        active.reserveCapacity(count)
        weights.reserveCapacity(count)
        lower.reserveCapacity(count)
        upper.reserveCapacity(count)
        ceilings.reserveCapacity(count)
        wants.reserveCapacity(count)
        var idleWanted = 0.0
        var sumLower = 0.0
        var guarded = false
        let swing = Self.swingAllowance(claims: claims, settings: settings)
        claims.withUnsafeBufferPointer { claims in
            for i in 0..<count {
                let claim = claims[i]
                if claim.isIdle {
                    idleWanted += claim.idleHolding
                    continue
                }
                if claim.guardMin > 0 || claim.guardMax < .infinity { guarded = true }
                let ceiling = min(claim.ceiling, claim.budgetCap)
                let floor = min(claim.floor, claim.budgetCap)
                let wanted = claim.demand * headroom + swing.scale * swing.extra(claim)
                active.append(i)
                weights.append(claim.weight)
                lower.append(floor)
                upper.append(max(floor, min(ceiling, wanted.isNaN ? .infinity : wanted)))
                ceilings.append(max(floor, ceiling))
                wants.append(wanted)
                sumLower += floor
            }
        }
        let activeCount = active.count

        var allocations = [Double](repeating: 0, count: count)
        var needs = [Double](repeating: 0, count: count)
        var reasons = [AllocationReason](repeating: .fairShare, count: count)
        var lowerBounds = [Double](repeating: 0, count: count)
        var upperBounds = [Double](repeating: 0, count: count)
        var unclamped = [Double](repeating: 0, count: count)
        var guardClamped = [Bool](repeating: false, count: count)

        // 1. Idle tenants take their idle allocation first (scaled down if they exceed `idle_share` of C).
        var idleTotal = 0.0
        if idleWanted > 0 {
            let idleCap = capacity * min(1, max(0, settings.idleShare.isFinite ? settings.idleShare : 1))
            let idleScale = idleWanted > idleCap ? idleCap / idleWanted : 1
            for i in 0..<count where claims[i].isIdle {
                let value = claims[i].idleHolding * idleScale
                allocations[i] = value
                needs[i] = value
                lowerBounds[i] = value
                upperBounds[i] = value
                unclamped[i] = value
                reasons[i] = .idle
                idleTotal += value
            }
        }
        let remaining = max(0, capacity - idleTotal)

        var level = 0.0
        var surplusLevel: Double?
        var burstReserve = 0.0
        let degraded = sumLower > remaining
        var values: [Double]
        if degraded {
            // 2'. Degraded mode (SPEC 6.4).
            var demanded = [Double](repeating: 0, count: activeCount)
            for k in 0..<activeCount {
                let claim = claims[active[k]]
                let wanted = wants[k]
                demanded[k] = min(claim.ceiling, claim.budgetCap, wanted.isNaN ? .infinity : wanted)
            }
            values = degradedShares(
                claims: claims, active: active, weights: weights, lower: lower, demanded: demanded, capacity: remaining)
            for k in 0..<activeCount {
                let i = active[k]
                unclamped[i] = values[k]
                needs[i] = values[k]
                reasons[i] = values[k] >= claims[i].budgetCap ? .budget : .degraded
            }
        } else {
            // 2. Water-filling without guardrails.
            let free = WaterFilling.fill(capacity: remaining, weights: weights, lower: lower, upper: upper)
            values = free.allocations
            level = free.level
            for k in 0..<activeCount { unclamped[active[k]] = values[k] }

            // 3. Guardrails. guard_min protects a tenant from being squeezed by contention; handing
            // back capacity a tenant does not want is not a squeeze, so the effective guard is
            // min(guard_min, hi_i).
            var crosses = false
            for k in 0..<activeCount where guarded {
                let claim = claims[active[k]]
                if values[k] < min(claim.guardMin, upper[k]) || values[k] > claim.guardMax {
                    crosses = true
                    break
                }
            }
            if crosses {
                var guardedLower = lower
                var guardedSum = 0.0
                for k in 0..<activeCount {
                    guardedLower[k] = max(lower[k], min(claims[active[k]].guardMin, upper[k]))
                    guardedSum += guardedLower[k]
                }
                // guard_min is honoured only when all of them fit: otherwise capacity, not choice.
                let minFits = guardedSum <= remaining
                if !minFits { guardedLower = lower }
                var guardedUpper = upper
                for k in 0..<activeCount {
                    let claim = claims[active[k]]
                    // guard_max bounds even a floor: an unapproved override cannot hold a tenant above it.
                    guardedLower[k] = min(guardedLower[k], claim.guardMax)
                    guardedUpper[k] = max(guardedLower[k], min(upper[k], claim.guardMax))
                    let raw = values[k]
                    guardClamped[active[k]] = raw > claim.guardMax || (minFits && raw < min(claim.guardMin, upper[k]))
                }
                if let reweigh,
                    let regrouped = reweigh(.guarded, active, weights, guardedLower, guardedUpper, remaining)
                {
                    weights = regrouped
                }
                let guarded = WaterFilling.fill(
                    capacity: remaining, weights: weights, lower: guardedLower, upper: guardedUpper)
                values = guarded.allocations
                level = guarded.level
                lower = guardedLower
                upper = guardedUpper
            }

            // Floating-point dust (1e-13 of a water level found by bisection) is no reason: a tenant at its
            // ceiling to within it is at its ceiling, a surplus of it is none (round 13: a tenant with no demand
            // on a full pool was given 1.1e-13 with the reason `surplus`).
            let dust = Self.dust(remaining)
            claims.withUnsafeBufferPointer { claims in
                for k in 0..<activeCount {
                    let i = active[k]
                    reasons[i] = baseReason(
                        claim: claims[i], value: values[k], lower: lower[k], upper: upper[k], wanted: wants[k],
                        clamped: guardClamped[i], dust: dust)
                }
            }

            // 4. Surplus: a burst reserve is kept back; the rest is handed out (unless `hold`).
            for k in 0..<activeCount { needs[active[k]] = values[k] }
            var used = 0.0
            for value in values { used += value }
            let surplus = max(0, remaining - used)
            burstReserve = surplus * min(max(settings.burstReserve, 0), 1)
            if settings.surplus == .distribute, surplus > dust, activeCount > 0 {
                var surplusUpper = [Double](repeating: 0, count: activeCount)
                for k in 0..<activeCount {
                    let claim = claims[active[k]]
                    surplusUpper[k] =
                        claim.receivesSurplus ? max(values[k], min(ceilings[k], claim.guardMax)) : values[k]
                }
                let grownCapacity = used + surplus - burstReserve
                let grown = WaterFilling.fill(
                    capacity: grownCapacity,
                    weights: reweigh?(.surplus, active, weights, values, surplusUpper, grownCapacity) ?? weights,
                    lower: values, upper: surplusUpper)
                surplusLevel = grown.level
                var grownUsed = 0.0
                for k in 0..<activeCount {
                    grownUsed += grown.allocations[k]
                    let i = active[k]
                    if grown.allocations[k] > values[k] + dust, reasons[i] != .guardrailClamped {
                        reasons[i] = .surplus
                    }
                }
                values = grown.allocations
                burstReserve = max(0, min(burstReserve, remaining - grownUsed))
            }
        }

        for k in 0..<activeCount {
            let i = active[k]
            allocations[i] = values[k]
            lowerBounds[i] = lower[k]
            upperBounds[i] = upper[k]
        }
        WaterFilling.trim(&allocations, limit: capacity)
        for i in 0..<count where needs[i] > allocations[i] { needs[i] = allocations[i] }
        return PoolAllocation(
            capacityEstimate: capacityEstimate, capacity: capacity, settings: settings, allocations: allocations,
            needs: needs,
            reasons: reasons, lowerBounds: lowerBounds, upperBounds: upperBounds, unclamped: unclamped,
            guardClamped: guardClamped, level: level, surplusLevel: surplusLevel, degraded: degraded,
            burstReserve: burstReserve, idleTotal: idleTotal)
    }

    /// What a comparison of allocations on a pool of `capacity` ignores: a billionth of it (at least 1e-9).
    static func dust(_ capacity: Double) -> Double { 1e-9 * max(1, capacity.isFinite ? capacity : 1) }

    /// The reason for an active tenant outside degraded mode, from which bound (if any) binds, to within `dust`.
    private static func baseReason(
        claim: AllocationClaim, value: Double, lower: Double, upper: Double, wanted: Double, clamped: Bool,
        dust: Double
    ) -> AllocationReason {
        if claim.budgetCap.isFinite, value >= claim.budgetCap - dust { return .budget }
        if clamped { return .guardrailClamped }
        if value >= upper - dust {
            if upper <= lower, lower > 0, lower > min(claim.ceiling, wanted) { return .floor }
            return claim.ceiling <= wanted + dust ? .ceiling : .demand
        }
        if value <= lower + dust, lower > 0 { return .floor }
        return .fairShare
    }

    /// Degraded mode (SPEC 6.4) for the active tenants `active` (indices into `claims`). `demanded[k]` is
    /// `min(ce_k, wanted_k)`: the tenant's upper bound without its floor.
    ///
    /// 1. Every tenant's starvation guard (scaled down proportionally if those exceed `capacity`).
    /// 2. Floors rank by rank in priority order, each up to what the tenant asks for (`demanded`, at least
    ///    its guard); the rank where capacity runs out shares what is left in proportion to its floors, each
    ///    tenant up to what it still lacks (a water-filling of the increments weighted by the floors).
    /// 3. What is left, by weight, up to each tenant's demand (the same water-filling as outside degraded
    ///    mode, with the values so far as lower bounds).
    /// 4. What is still left, the floors' remainder above demand, rank by rank again.
    ///
    /// Steps 3 and 4 run only when floors exceed capacity although the demand they cover does not (many
    /// upper-tier tenants with percent floors, each asking for less than its floor): a floor reserves
    /// capacity for its tenant while capacity allows, but once the floors do not fit, capacity nobody asks
    /// for is not held back from tenants that are left at their starvation guard.
    private static func degradedShares(
        claims: [AllocationClaim], active: [Int], weights: [Double], lower: [Double], demanded: [Double],
        capacity: Double
    ) -> [Double] {
        let count = active.count
        var guards = [Double](repeating: 0, count: count)
        var guardSum = 0.0
        for (k, i) in active.enumerated() {
            let claim = claims[i]
            guards[k] = max(0, min(claim.starvationGuard, claim.ceiling, claim.budgetCap))
            guardSum += guards[k]
        }
        if guardSum >= capacity {
            let scale = guardSum > 0 ? capacity / guardSum : 0
            return guards.map { $0 * scale }
        }
        var values = guards
        var left = capacity - guardSum
        // Ranks in priority order; within a rank, indices in input order.
        let order = (0..<count).sorted { a, b in
            let rankA = claims[active[a]].rank
            let rankB = claims[active[b]].rank
            return rankA != rankB ? rankA < rankB : a < b
        }
        /// Raises every tenant towards `target[k]` rank by rank; the rank where `left` runs out shares it in
        /// proportion to its tenants' floors (SPEC 6.4), none beyond what it still lacks, what one cannot take
        /// going to the others by the same proportion. (Shared in proportion to what each still lacked, a tenant
        /// asking for less than its floor, or holding a larger guard, got less than its share: floors of 80 and
        /// 80, one asking for 30, split 80 left as 62 and 18 instead of 60 and 20.)
        func honour(_ target: (Int) -> Double) {
            var start = 0
            while start < count, left > 0 {
                let rank = claims[active[order[start]]].rank
                var end = start
                while end < count, claims[active[order[end]]].rank == rank { end += 1 }
                let members = order[start..<end]
                let lacks = members.map { max(0, target($0) - values[$0]) }
                // Everything each lacks when it fits (the fill returns the upper bounds then), else by floor.
                let shares = WaterFilling.fill(
                    capacity: left, weights: members.map { max(lower[$0], .leastNormalMagnitude) },
                    lower: lacks.map { _ in 0 }, upper: lacks
                ).allocations
                for (k, share) in zip(members, shares) {
                    values[k] += share
                    left -= share
                }
                left = max(0, left)
                start = end
            }
        }
        honour { k in min(lower[k], max(guards[k], demanded[k])) }
        if left > 0 {
            var upper = values
            for k in 0..<count { upper[k] = max(values[k], demanded[k]) }
            values = WaterFilling.fill(capacity: capacity, weights: weights, lower: values, upper: upper).allocations
            var used = 0.0
            for value in values { used += value }
            left = max(0, capacity - used)
            honour { k in lower[k] }
        }
        return values
    }
}
