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
            for i in 0..<count where upper[i] > lower[i] {
                level = max(level, upper[i] / weights[i])
            }
            return Result(allocations: upper, level: level)
        }
        let target = capacity  // = min(C, Σ hi) here
        if sumLower >= target {
            return Result(allocations: lower, level: 0)
        }

        // Breakpoints of g(f). Only tenants with room contribute slope.
        var events: [Breakpoint] = []
        events.reserveCapacity(2 * count)
        for i in 0..<count where upper[i] > lower[i] {
            let weight = weights[i]
            events.append(Breakpoint(position: lower[i] / weight, slopeChange: weight))
            events.append(Breakpoint(position: upper[i] / weight, slopeChange: -weight))
        }
        events.sort { $0.position < $1.position }

        // Scan for the segment [start, end] on which g crosses the target.
        var value = sumLower  // g(start)
        var slope = 0.0
        var start = 0.0
        var end = Double.infinity
        var index = 0
        while index < events.count {
            let position = events[index].position
            let valueAtPosition = slope > 0 ? value + slope * (position - start) : value
            if valueAtPosition >= target {
                end = position
                break
            }
            value = valueAtPosition
            start = position
            while index < events.count, events[index].position == position {
                slope += events[index].slopeChange
                index += 1
            }
        }

        // Solve exactly on the segment: every breakpoint lies at or below `start` or at or above
        // `end`, so the tenants split into pinned-high, pinned-low and rising ones.
        var pinned = 0.0
        var risingWeight = 0.0
        for i in 0..<count {
            if upper[i] <= lower[i] {
                pinned += lower[i]
                continue
            }
            let weight = weights[i]
            if upper[i] / weight <= start {
                pinned += upper[i]
            } else if lower[i] / weight >= end {
                pinned += lower[i]
            } else {
                risingWeight += weight
            }
        }
        var level = risingWeight > 0 ? (target - pinned) / risingWeight : start
        level = min(max(level, start), end)
        if !level.isFinite { level = start }

        var allocations = [Double](repeating: 0, count: count)
        for i in 0..<count {
            allocations[i] = min(max(level * weights[i], lower[i]), upper[i])
        }
        trim(&allocations, lower: lower, limit: capacity)
        return Result(allocations: allocations, level: level)
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

    private struct Breakpoint {
        var position: Double
        var slopeChange: Double
    }
}
