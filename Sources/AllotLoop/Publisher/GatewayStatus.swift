import AllotCore

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

    public init(
        id: String, state: State, enforcedVersion: Int64?, lagVersions: Int64?, lagSeconds: Double?,
        firstContact: Double, lastContact: Double, sinceContactSeconds: Double, polls: Int64, tenants: [String]
    ) {
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
struct DriftMonitor {
    private var since: [AllocationKey: Double] = [:]

    /// Reviews one tick. `allowance` is each tenant's published rate plus its burst credit rate,
    /// per minute (nil for a dimension that is not allocated).
    mutating func review(
        statuses: [TenantStatus], allowance: [AllocationKey: PerDimension<Double?>], thresholds: AlertThresholds,
        now: Double
    ) -> [LoopAlert] {
        var alerts: [LoopAlert] = []
        var next: [AllocationKey: Double] = [:]
        func servedTotal(_ status: TenantStatus) -> PerDimension<Double> {
            var served = PerDimension<Double>(0)
            for value in status.gatewayServed.values {
                served.rpm += value.rpm.isFinite ? value.rpm : 0
                served.tpm += value.tpm.isFinite ? value.tpm : 0
            }
            return served
        }
        // Per upstream and dimension: admitted above the summed allowances (nil: not allocated).
        var upstreamOver: [String: PerDimension<Bool>] = [:]
        var sums: [String: (served: PerDimension<Double>, allowed: PerDimension<Double?>)] = [:]
        for (key, limit) in allowance {
            var sum = sums[key.upstream] ?? (PerDimension(0), PerDimension(rpm: 0, tpm: 0))
            sum.allowed = PerDimension(
                rpm: sum.allowed.rpm.flatMap { total in limit.rpm.map { total + $0 } },
                tpm: sum.allowed.tpm.flatMap { total in limit.tpm.map { total + $0 } })
            sums[key.upstream] = sum
        }
        for status in statuses where !status.gatewayServed.isEmpty && allowance[status.key] != nil {
            let served = servedTotal(status)
            sums[status.key.upstream]?.served.rpm += served.rpm
            sums[status.key.upstream]?.served.tpm += served.tpm
        }
        for (upstream, sum) in sums {
            func over(_ dimension: RateDimension) -> Bool {
                guard let allowed = sum.allowed[dimension] else { return true }
                return sum.served[dimension] > allowed * (1 + thresholds.driftRatio)
            }
            upstreamOver[upstream] = PerDimension(rpm: over(.rpm), tpm: over(.tpm))
        }
        for status in statuses where !status.gatewayServed.isEmpty {
            guard let limit = allowance[status.key] else { continue }
            let served = servedTotal(status)
            var worst: (dimension: RateDimension, served: Double, allowed: Double)?
            for dimension in RateDimension.allCases {
                guard let allowed = limit[dimension], served[dimension] > allowed * (1 + thresholds.driftRatio),
                    upstreamOver[status.key.upstream]?[dimension] ?? true
                else {
                    continue
                }
                let ratio = allowed > 0 ? served[dimension] / allowed : .infinity
                if worst.map({ ratio > ($0.allowed > 0 ? $0.served / $0.allowed : .infinity) }) ?? true {
                    worst = (dimension, served[dimension], allowed)
                }
            }
            guard let worst else { continue }
            let start = since[status.key] ?? now
            next[status.key] = start
            guard now - start >= thresholds.driftWindowSeconds else { continue }
            let over = worst.allowed > 0 ? "\(Int(((worst.served / worst.allowed - 1) * 100).rounded()))% over" : "over"
            alerts.append(
                LoopAlert(
                    kind: "drift", severity: .warning, upstream: status.key.upstream, tenant: status.key.tenant,
                    message: "gateways admitted \(formatted(worst.served)) \(worst.dimension.rawValue) for "
                        + "\(status.key.tenant) on \(status.key.upstream) against an allocation of "
                        + "\(formatted(worst.allowed)) (\(over))",
                    since: start))
        }
        since = next
        return alerts
    }
}
