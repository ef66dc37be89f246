/// Weighted max-min fair sharing by water-filling (SPEC 6.2).
///
/// Given capacity `C` and, per tenant, a weight `w_i > 0` and bounds `lo_i <= hi_i`, find the level
/// `f >= 0` with
///
///     Σ clamp(f · w_i, lo_i, hi_i) = min(C, Σ hi_i)
///
/// and allocate `x_i = clamp(f · w_i, lo_i, hi_i)`. The left-hand side `g(f)` is continuous,
/// non-decreasing and piecewise linear with breakpoints at `lo_i / w_i` (tenant i starts rising,
/// slope `+w_i`) and `hi_i / w_i` (it stops, slope `-w_i`), so sorting the breakpoints and scanning
/// them finds the segment that contains the solution in O(n log n); `f` is then solved exactly on
/// that segment from sums recomputed over the tenants it pins (no drift from incremental sums).
///
/// Edge cases, each exact:
/// - everyone's upper bound fits (`Σ hi <= C`): `x = hi` and `f` is the smallest level that
///   satisfies everyone, `max(hi_i / w_i)` over tenants with room (`hi_i > lo_i`), or 0;
/// - the lower bounds use all of it (`Σ lo >= min(C, Σ hi)`, including `C = 0`): `x = lo`, `f = 0`
///   (the caller treats `Σ lo > C` as degraded mode, SPEC 6.4, before getting here);
/// - equal breakpoints, infinite upper bounds and extreme weights are handled without NaN
///   (`0 · ∞` never occurs: an empty slope is never multiplied by a segment length).
///
/// The result never sums above `C`: rounding residue of the last ulp is trimmed (see `trim`).
public enum WaterFilling {
    /// The outcome of one fill.
    public struct Result: Sendable, Equatable {
        /// `x_i`, in input order.
        public var allocations: [Double]
        /// The fair-share level `f` (allocation per unit of weight for tenants between their bounds).
        public var level: Double

        public init(allocations: [Double], level: Double) {
            self.allocations = allocations
            self.level = level
        }
    }

    /// Fills `capacity` among tenants with the given weights and bounds (parallel arrays).
    ///
    /// - Parameters:
    ///   - capacity: `C >= 0`, finite.
    ///   - weights: `w_i > 0`, finite.
    ///   - lower: `lo_i >= 0`, finite.
    ///   - upper: `hi_i >= lo_i`; may be `.infinity`.
    /// - Returns: the allocations and the level `f`.
    public static func fill(capacity: Double, weights: [Double], lower: [Double], upper: [Double]) -> Result {
        let count = weights.count
        precondition(lower.count == count && upper.count == count, "parallel arrays of equal length")
        if count == 0 { return Result(allocations: [], level: 0) }

        var sumLower = 0.0
        var sumUpper = 0.0
        for i in 0..<count {
            sumLower += lower[i]
            sumUpper += upper[i]
        }

        // Everyone's upper bound fits: the smallest level that satisfies everyone.
        if sumUpper <= capacity {
            var level = 0.0
            for i in 0..<count where upper[i] > lower[i] && weights[i] > 0 {
                level = max(level, upper[i] / weights[i])
            }
            return Result(allocations: upper, level: level)
        }
        let target = capacity  // = min(C, Σ hi) here
        if sumLower >= target {
            return Result(allocations: lower, level: 0)
        }

        // Every clamp(f·w, lo, hi) is at most lo + f·w, so g(f) ≤ Σ lo + f·Σ w and the solution is at
        // least (target − Σ lo) / Σ w: a free first cut that already settles tenants wanting little.
        var totalWeight = 0.0
        var pinnedLower = 0.0
        for i in 0..<count {
            if upper[i] > lower[i], weights[i] > 0 { totalWeight += weights[i] } else { pinnedLower += lower[i] }
        }
        var low = totalWeight > 0 ? max(0, (target - sumLower) / totalWeight) : 0
        if !low.isFinite { low = 0 }
        var high = Double.infinity

        // Bracket the solution between breakpoints. Invariant: g(low) <= target <= g(high), and every
        // tenant still `open` has a breakpoint strictly inside (low, high); every other tenant is
        // decided for the whole bracket: pinned at a bound (its value is in `pinned`) or rising
        // with slope `w_i` (its weight is in `risingWeight`). Each round evaluates g at one open
        // breakpoint, keeps the half that contains the solution and retires the tenants that are
        // decided for the narrower bracket — like quickselect, O(n) expected and no sorting.
        var open: [OpenTenant] = []
        open.reserveCapacity(count)
        var pinned = pinnedLower
        for i in 0..<count {
            let weight = weights[i]
            // A tenant without room, or without a positive weight (never passed by the engine),
            // stays at its lower bound (already in `pinnedLower`).
            guard upper[i] > lower[i], weight > 0 else { continue }
            let end = upper[i] / weight
            if end <= low {
                pinned += upper[i]
            } else {
                open.append(
                    OpenTenant(
                        start: lower[i] / weight, end: end, weight: weight, lower: lower[i],
                        upper: upper[i]))
            }
        }
        var risingWeight = 0.0
        open.withUnsafeMutableBufferPointer { open in
            var remaining = open.count
            while true {
                // Retire the tenants decided for (low, high), compacting the rest to the front.
                var kept = 0
                for position in 0..<remaining {
                    let tenant = open[position]
                    if tenant.end <= low {
                        pinned += tenant.upper
                    } else if tenant.start >= high {
                        pinned += tenant.lower
                    } else if tenant.start <= low, tenant.end >= high {
                        risingWeight += tenant.weight
                    } else {
                        open[kept] = tenant
                        kept += 1
                    }
                }
                remaining = kept
                if remaining == 0 { break }

                // Pivot on the median of a few breakpoints inside the bracket, taken at evenly spaced
                // positions: deterministic, and close to halving the bracket's breakpoints each round.
                var sample: [Double] = []
                let step = max(1, remaining / 9)
                for position in stride(from: step / 2, to: remaining, by: step) {
                    let tenant = open[position]
                    sample.append(tenant.start > low && tenant.start < high ? tenant.start : tenant.end)
                }
                sample.sort()
                let pivot = sample[sample.count / 2]
                var value = pinned + risingWeight * pivot
                for position in 0..<remaining {
                    let tenant = open[position]
                    value += min(max(pivot * tenant.weight, tenant.lower), tenant.upper)
                }
                if value >= target { high = pivot } else { low = pivot }
            }
        }

        // No breakpoint is left inside (low, high): g is linear there, so solve it exactly.
        var level = risingWeight > 0 ? (target - pinned) / risingWeight : low
        level = min(max(level, low), high)
        if !level.isFinite { level = low }

        var allocations = [Double](repeating: 0, count: count)
        for i in 0..<count {
            allocations[i] = min(max(level * weights[i], lower[i]), upper[i])
        }
        trim(&allocations, lower: lower, limit: capacity)
        return Result(allocations: allocations, level: level)
    }

    /// A tenant whose position relative to the level is not decided yet: its breakpoints
    /// `lo / w` and `hi / w`, computed once, next to what evaluating `g` needs.
    private struct OpenTenant {
        var start: Double
        var end: Double
        var weight: Double
        var lower: Double
        var upper: Double
    }

    /// Makes `Σ allocations <= limit` (summed in index order, as every consumer sums) by taking the
    /// rounding residue from the tenants with the most room above their lower bound. Only ever moves
    /// values by a few ulps of the total; callers rely on the sum invariant being exact (SPEC 6.6:
    /// "the sum of published allocations never exceeds C").
    static func trim(_ allocations: inout [Double], lower: [Double]? = nil, limit: Double) {
        for _ in 0..<8 {
            var sum = 0.0
            for value in allocations { sum += value }
            if sum <= limit { return }
            var excess = sum - limit
            // Take from the largest slack first (deterministic: lowest index wins ties).
            var best = -1
            var bestSlack = 0.0
            for i in allocations.indices {
                let slack = allocations[i] - (lower?[i] ?? 0)
                if slack > bestSlack {
                    bestSlack = slack
                    best = i
                }
            }
            if best < 0 { return }
            excess = min(excess, bestSlack)
            allocations[best] = (allocations[best] - excess).nextDown
            if let lower, allocations[best] < lower[best] { allocations[best] = lower[best] }
            if allocations[best] < 0 { allocations[best] = 0 }
        }
    }
}
