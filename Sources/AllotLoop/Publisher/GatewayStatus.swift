import AllotCore
import Foundation

/// One gateway as `GET /v1/gateways` shows it (SPEC 7, 9): the version it enforces, how far
/// behind it is, when it was last heard from, and the tenants it receives slices of.
public struct GatewayStatus: Sendable, Hashable {
    /// `current` (enforces the newest version), `lagging` (behind by the alert threshold for at
    /// least one refresh), `behind` (behind, within the threshold), `silent` (no poll for
    /// `gateway_lag_s`), `unknown` (never said which version it enforces).
    public enum State: String, Sendable, Hashable, CaseIterable {
        case current, behind, lagging, silent, unknown
    }

    public var id: String
    public var state: State
    public var enforcedVersion: Int64?
    /// Versions published after the one it enforces.
    public var lagVersions: Int64?
    /// Seconds since the version it enforces was superseded (0 when it is current).
    public var lagSeconds: Double?
    public var firstContact: Double
    public var lastContact: Double
    /// Seconds since its last poll.
    public var sinceContactSeconds: Double
    public var polls: Int64
    /// Tenant ids (sorted, unique) it receives a slice of in the current version.
    public var tenants: [String]
    /// The instance its last poll named (one run of the gateway process), nil when it named none.
    public var instance: String?

    public init(
        id: String, state: State, enforcedVersion: Int64?, lagVersions: Int64?, lagSeconds: Double?,
        firstContact: Double, lastContact: Double, sinceContactSeconds: Double, polls: Int64, tenants: [String],
        instance: String? = nil
    ) {
        self.instance = instance
        self.id = id
        self.state = state
        self.enforcedVersion = enforcedVersion
        self.lagVersions = lagVersions
        self.lagSeconds = lagSeconds
        self.firstContact = firstContact
        self.lastContact = lastContact
        self.sinceContactSeconds = sinceContactSeconds
        self.polls = polls
        self.tenants = tenants
    }
}

/// Drift (SPEC 7): what all gateways together admitted for a tenant against its allocation. A
/// tenant admitted above `allocation × (1 + drift_ratio)` continuously for `drift_window_s`
/// raises a `drift` alert — gateways enforcing stale versions, slices summing wrong, or a gateway
/// that does not enforce at all.
///
/// Gateways lend allocation one tenant leaves idle to another on the same upstream (work
/// conservation, `AllotEnforcement.IdleCapacity`), so a tenant above its own allocation is drift
/// only while the upstream as a whole is too: everything admitted on the upstream above the sum of
/// its tenants' allowances × (1 + `drift_ratio`) in that dimension. Borrowing alone never gets
/// there; a gateway that over-admits does as soon as the idle allocation is used up.
///
/// What was admitted is the Classifier's short-window rate (an EWMA over `window`), so it is compared with the
/// allowance averaged the same way: the allowances in force tick by tick, folded with the same time constant.
/// Against the allowance of the moment, a tenant that stopped sending (its allocation falling to its idle
/// allocation at once, its measured rate decaying over a minute) or whose burst credit ended read as drift:
/// "5091% over" for a tenant that sent nothing (outside evaluation round 21).
struct DriftMonitor {
    private var since: [AllocationKey: Double] = [:]
    /// Per tenant, the allowance averaged over the measuring window, and the allowance in force since `at`.
    private var averaged: [AllocationKey: (mean: PerDimension<Double?>, current: PerDimension<Double?>, at: Double)] =
        [:]

    /// Reviews one tick. `allowance` is each tenant's published rate plus its burst credit rate,
    /// per minute (nil for a dimension that is not allocated); `window` the time constant of the admitted rates
    /// (the Classifier's `short_window_s`).
    ///
    /// Speed: one pass over the statuses finds each tenant's allowance and total once; the sums per
    /// upstream (a handful) live in arrays found by the last upstream used, not in dictionaries
    /// hashed twice per tenant. Every sum adds the same values in the same order as before.
    mutating func review(
        statuses: [TenantStatus], allowance current: [AllocationKey: PerDimension<Double?>],
        thresholds: AlertThresholds, window: Double, now: Double
    ) -> [LoopAlert] {
        // What all gateways admitted per tenant (the Classifier's short-window rates, summed over gateways).
        var admitted = [AllocationKey: PerDimension<Double>](minimumCapacity: statuses.count)
        for status in statuses where !status.gatewayServed.isEmpty {
            var served = PerDimension<Double>(0)
            for value in status.gatewayServed.values {
                served.rpm += value.rpm.isFinite ? value.rpm : 0
                served.tpm += value.tpm.isFinite ? value.tpm : 0
            }
            admitted[status.key] = served
        }
        let allowance = average(current, admitted: admitted, window: window, now: now)
        var alerts: [LoopAlert] = []
        var next: [AllocationKey: Double] = [:]
        // Per upstream and dimension: admitted above the summed allowances (nil: not allocated).
        var sums = UpstreamSums()
        for (key, limit) in allowance {
            let upstream = sums.slot(key.upstream)
            sums.allowed[upstream] = PerDimension(
                rpm: sums.allowed[upstream].rpm.flatMap { total in limit.rpm.map { total + $0 } },
                tpm: sums.allowed[upstream].tpm.flatMap { total in limit.tpm.map { total + $0 } })
        }
        // The tenants some gateway admitted for that have an allowance: what all gateways admitted.
        var reviewed: [(status: Int, limit: PerDimension<Double?>, served: PerDimension<Double>, upstream: Int)] = []
        for index in statuses.indices {
            guard let served = admitted[statuses[index].key], let limit = allowance[statuses[index].key] else {
                continue
            }
            let upstream = sums.slot(statuses[index].key.upstream)
            sums.served[upstream].rpm += served.rpm
            sums.served[upstream].tpm += served.tpm
            reviewed.append((index, limit, served, upstream))
        }
        let upstreamOver = sums.allowed.indices.map { upstream in
            func over(_ dimension: RateDimension) -> Bool {
                guard let allowed = sums.allowed[upstream][dimension] else { return true }
                return sums.served[upstream][dimension] > allowed * (1 + thresholds.driftRatio)
            }
            return PerDimension(rpm: over(.rpm), tpm: over(.tpm))
        }
        for (index, limit, served, upstream) in reviewed {
            var worst: (dimension: RateDimension, served: Double, allowed: Double)?
            let key = statuses[index].key
            for dimension in RateDimension.allCases {
                // Over the allowance averaged like the admitted rate, and over the one in force now (an allowance
                // just raised is not drift, and the message's percentage is never negative).
                guard let allowed = limit[dimension], served[dimension] > allowed * (1 + thresholds.driftRatio),
                    served[dimension] > (current[key]?[dimension] ?? allowed) * (1 + thresholds.driftRatio),
                    upstreamOver[upstream][dimension]
                else {
                    continue
                }
                let ratio = allowed > 0 ? served[dimension] / allowed : .infinity
                if worst.map({ ratio > ($0.allowed > 0 ? $0.served / $0.allowed : .infinity) }) ?? true {
                    worst = (dimension, served[dimension], allowed)
                }
            }
            guard let worst else { continue }
            let start = since[key] ?? now
            next[key] = start
            guard now - start >= thresholds.driftWindowSeconds else { continue }
            // An allocation of a sliver (a tenant at its idle allocation, a tiny pool) makes the ratio huge:
            // beyond a thousandfold the percentage says nothing (and past Int.max would trap).
            // Judged against the averaged allowance; told against the allowance in force now.
            let allowedNow = current[key]?[worst.dimension] ?? worst.allowed
            let percent = (worst.served / allowedNow - 1) * 100
            let over = percent.isFinite && percent < 100_000 ? "\(Int(percent.rounded()))% over" : "over"
            alerts.append(
                LoopAlert(
                    kind: "drift", severity: .warning, upstream: key.upstream, tenant: key.tenant,
                    message: "gateways admitted \(formatted(worst.served)) \(worst.dimension.rawValue) for "
                        + "\(key.tenant) on \(key.upstream) against an allocation of "
                        + "\(formatted(allowedNow)) (\(over))",
                    since: start))
        }
        since = next
        return alerts
    }

    /// Each tenant's allowance averaged over `window` like the admitted rate: the allowance in force over the
    /// interval since the last review folded in with weight `1 − e^(−Δ/window)`. Without a past (a tenant first
    /// allowed now, a dimension turning limited, the first review after a restart, which restores the admitted
    /// rates but not this) it starts at the larger of its allowance and what was admitted: a tenant that stopped
    /// just before a restart is not drift, and an over-admitting gateway shows once the start has decayed, within
    /// about a window.
    private mutating func average(
        _ current: [AllocationKey: PerDimension<Double?>], admitted: [AllocationKey: PerDimension<Double>],
        window: Double, now: Double
    ) -> [AllocationKey: PerDimension<Double?>] {
        var result = [AllocationKey: PerDimension<Double?>](minimumCapacity: current.count)
        var next = [AllocationKey: (mean: PerDimension<Double?>, current: PerDimension<Double?>, at: Double)](
            minimumCapacity: current.count)
        for (key, value) in current {
            let last = averaged[key]
            let weight = last.map {
                now > $0.at && window > 0 && window.isFinite ? 1 - exp(-(now - $0.at) / window) : 0
            }
            var mean = value
            for dimension in RateDimension.allCases {
                guard let allowed = value[dimension] else { continue }
                if let last, let weight, let held = last.current[dimension], let before = last.mean[dimension] {
                    mean[dimension] = before + (held - before) * weight
                } else {
                    mean[dimension] = max(allowed, admitted[key]?[dimension] ?? 0)
                }
            }
            result[key] = mean
            next[key] = (mean, value, now)
        }
        averaged = next
        return result
    }
}

/// What was admitted and allowed per upstream during a review, by slot.
private struct UpstreamSums {
    var served: [PerDimension<Double>] = []
    var allowed: [PerDimension<Double?>] = []
    private var slots: [String: Int] = [:]
    private var last: (upstream: String, slot: Int)?

    /// The slot of `upstream`, added on first sight: the last one used is compared before hashing
    /// (tenants come sorted, and most pools hold many).
    mutating func slot(_ upstream: String) -> Int {
        if let last, last.upstream == upstream { return last.slot }
        let slot: Int
        if let known = slots[upstream] {
            slot = known
        } else {
            slot = served.count
            slots[upstream] = slot
            served.append(PerDimension(0))
            allowed.append(PerDimension(rpm: 0, tpm: 0))
        }
        last = (upstream, slot)
        return slot
    }
}
