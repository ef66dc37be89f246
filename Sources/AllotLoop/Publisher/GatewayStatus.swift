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
    /// Seconds since its last poll (0 while a long-poll of it waits), on the steady clock when the Publisher has one
    /// (a step of Allot's wall clock does not move it: it may then differ from `now - lastContact`).
    public var sinceContactSeconds: Double
    public var polls: Int64
    /// Tenant ids (sorted, unique) it receives a slice of in the current version.
    public var tenants: [String]
    /// The instance its last poll named (one run of the gateway process), nil when it named none.
    public var instance: String?
    /// Its clock minus Allot's, seconds, as its last poll said (`Allot-Gateway-Time`, read on arrival: low by the
    /// request's way there), less any step of Allot's own clock since; nil when it said nothing.
    public var clockOffsetSeconds: Double?

    public init(
        id: String, state: State, enforcedVersion: Int64?, lagVersions: Int64?, lagSeconds: Double?,
        firstContact: Double, lastContact: Double, sinceContactSeconds: Double, polls: Int64, tenants: [String],
        instance: String? = nil, clockOffsetSeconds: Double? = nil
    ) {
        self.instance = instance
        self.clockOffsetSeconds = clockOffsetSeconds
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
    private var averaged: [AllocationKey: Averaged] = [:]

    private struct Averaged {
        var mean: PerDimension<Double?>
        var current: PerDimension<Double?>
        var at: Double
        /// The dimensions whose mean started afresh at this review (no past to fold): they start at the larger of
        /// the allowance and what was admitted, which only the statuses tell.
        var fresh = PerDimension<Bool>(false)
    }

    /// Reviews one tick. `allowance` is each tenant's published rate plus its burst credit rate,
    /// per minute (nil for a dimension that is not allocated); `window` the time constant of the admitted rates
    /// (the Classifier's `short_window_s`).
    ///
    /// Speed: two dictionary operations per allowance (the past mean read, the new one stored) and one per tenant
    /// some gateway admitted for; the sums per upstream (a handful) live in arrays found by the last upstream used.
    /// (It built the admitted rates and the averaged allowances as dictionaries of their own first: 15 ms of a
    /// 112-ms tick at 10,000 tenants, against 5 ms on 2026-11-27.)
    mutating func review(
        statuses: [TenantStatus], allowance current: [AllocationKey: PerDimension<Double?>],
        thresholds: AlertThresholds, window: Double, now: Double
    ) -> [LoopAlert] {
        average(current, window: window, now: now)
        var alerts: [LoopAlert] = []
        var next: [AllocationKey: Double] = [:]
        // Per upstream and dimension: admitted above the summed allowances (nil: not allocated).
        var sums = UpstreamSums()
        for (key, entry) in averaged {
            sums.allow(entry.mean, upstream: sums.slot(key.upstream))
        }
        // The tenants some gateway admitted for that have an allowance: what all gateways admitted (the Classifier's
        // short-window rates, summed over gateways).
        var reviewed: [(status: Int, limit: PerDimension<Double?>, served: PerDimension<Double>, upstream: Int)] = []
        for index in statuses.indices where !statuses[index].gatewayServed.isEmpty {
            let key = statuses[index].key
            guard var entry = averaged[key] else { continue }
            var served = PerDimension<Double>(0)
            for value in statuses[index].gatewayServed.values {
                served.rpm += value.rpm.isFinite ? value.rpm : 0
                served.tpm += value.tpm.isFinite ? value.tpm : 0
            }
            let upstream = sums.slot(key.upstream)
            if entry.fresh.rpm || entry.fresh.tpm {
                // A mean without a past starts at the larger of the allowance and what was admitted: a tenant that
                // stopped just before a restart is not drift.
                let before = entry.mean
                for dimension in RateDimension.allCases where entry.fresh[dimension] {
                    entry.mean[dimension] = entry.mean[dimension].map { max($0, served[dimension]) }
                }
                entry.fresh = PerDimension(false)
                averaged[key] = entry
                sums.allow(entry.mean, upstream: upstream, replacing: before)
            }
            sums.served[upstream].rpm += served.rpm
            sums.served[upstream].tpm += served.tpm
            reviewed.append((index, entry.mean, served, upstream))
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
    /// rates but not this) it starts at the larger of its allowance and what was admitted (``review``, which reads
    /// the admitted rates, raises the `fresh` ones): a tenant that stopped just before a restart is not drift, and
    /// an over-admitting gateway shows once the start has decayed, within about a window.
    private mutating func average(_ current: [AllocationKey: PerDimension<Double?>], window: Double, now: Double) {
        var next = [AllocationKey: Averaged](minimumCapacity: current.count)
        for (key, value) in current {
            let last = averaged[key]
            let weight = last.map {
                now > $0.at && window > 0 && window.isFinite ? 1 - exp(-(now - $0.at) / window) : 0
            }
            var entry = Averaged(mean: value, current: value, at: now)
            for dimension in RateDimension.allCases where value[dimension] != nil {
                if let last, let weight, let held = last.current[dimension], let before = last.mean[dimension] {
                    entry.mean[dimension] = before + (held - before) * weight
                } else {
                    entry.fresh[dimension] = true
                }
            }
            next[key] = entry
        }
        averaged = next
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

    /// Adds a tenant's allowance to its upstream's sum (a dimension one tenant leaves unallocated makes the
    /// upstream's unallocated), less `replacing`, an allowance added before that this one replaces.
    mutating func allow(_ limit: PerDimension<Double?>, upstream: Int, replacing: PerDimension<Double?>? = nil) {
        for dimension in RateDimension.allCases {
            allowed[upstream][dimension] = allowed[upstream][dimension].flatMap { total in
                limit[dimension].map { total + $0 - (replacing?[dimension] ?? 0) }
            }
        }
    }
}
