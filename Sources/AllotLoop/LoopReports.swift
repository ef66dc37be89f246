import AllotCore
import AllotStore

// The contracts between the loop's four actors (SPEC section 2). The Observer and the Classifier
// each turn the telemetry read in one tick into a report; the loop hands the reports' engine
// inputs to `PolicyEngine.decide`, and the reports' details to the API (`GET /v1/upstreams`,
// `GET /v1/tenants`), the metrics and the alerts.

/// The telemetry rows one tick read: everything after the previous tick's last row id, read
/// once and shared by the Observer and the Classifier (never the whole table; SPEC section 2).
public struct TelemetryDelta: Sendable {
    /// New events in row-id order.
    public var events: [StoredEvent]
    /// Names of the interned ids the events use.
    public var names: TelemetryNames
    /// The highest row id read (the next tick reads after it).
    public var lastEventID: Int64

    public init(events: [StoredEvent], names: TelemetryNames, lastEventID: Int64) {
        self.events = events
        self.names = names
        self.lastEventID = lastEventID
    }
}

/// A tenant on an upstream pool: the unit the Classifier tracks and the engine allocates.
public struct AllocationKey: Sendable, Hashable, Codable, Comparable {
    public var tenant: String
    public var upstream: String

    public init(tenant: String, upstream: String) {
        self.tenant = tenant
        self.upstream = upstream
    }

    public static func < (lhs: AllocationKey, rhs: AllocationKey) -> Bool {
        (lhs.upstream, lhs.tenant) < (rhs.upstream, rhs.tenant)
    }
}

/// An alert raised by a loop component (starvation, circuit open, gateway lag, drift, runaway
/// task, policy error, tick failure, …). `kind` is a stable snake_case identifier.
public struct LoopAlert: Sendable, Hashable, Codable {
    public enum Severity: String, Sendable, Hashable, Codable {
        case info, warning, critical
    }

    public var kind: String
    public var severity: Severity
    public var upstream: String?
    public var tenant: String?
    public var gateway: String?
    public var message: String
    /// When the condition started (seconds since the epoch).
    public var since: Double

    public init(
        kind: String, severity: Severity, upstream: String? = nil, tenant: String? = nil, gateway: String? = nil,
        message: String, since: Double
    ) {
        self.kind = kind
        self.severity = severity
        self.upstream = upstream
        self.tenant = tenant
        self.gateway = gateway
        self.message = message
        self.since = since
    }

    /// Every kind an alert can have (docs/api-reference.md, *Alerts*): what `GET /v1/alerts?kind=` and
    /// `GET /v1/tenants?alert=` accept.
    public static let kinds = [
        "budget_hard", "budget_soft", "budget_throttle", "burst_default", "checkpoint_failed", "circuit_open",
        "concurrency_bound", "degraded_mode", "drain", "drift", "gateway_clock", "gateway_lag", "loop_stalled",
        "no_capacity",
        "operator_inputs", "override_proposal", "policy_error", "runaway_task", "spend_cap", "starved", "state_restore",
        "suspect_tenant", "tenant_flood", "tick_failed", "tick_slow", "unknown_price", "unpriced_upstream",
        "upstream_degrading",
        "upstream_errors", "upstream_limit_contradicted", "upstream_throttled",
    ]
}

extension LoopAlert {
    /// The alerts of `current` without a tenant that `previous` did not have (same kind, severity, upstream and
    /// gateway), and those of `previous` that `current` has no more: what the log tells (an alert whose severity
    /// changes is logged cleared at the old and raised at the new). Several alerts of one kind on one pool (degraded
    /// mode in two dimensions) count as one.
    public static func transitions(from previous: [LoopAlert], to current: [LoopAlert]) -> (
        raised: [LoopAlert], cleared: [LoopAlert]
    ) {
        struct Key: Hashable {
            var kind: String
            var severity: Severity
            var upstream: String?
            var gateway: String?
        }
        func keyed(_ alerts: [LoopAlert]) -> [(Key, LoopAlert)] {
            var seen = Set<Key>()
            return alerts.compactMap { alert in
                guard alert.tenant == nil else { return nil }
                let key = Key(
                    kind: alert.kind, severity: alert.severity, upstream: alert.upstream, gateway: alert.gateway)
                return seen.insert(key).inserted ? (key, alert) : nil
            }
        }
        let before = keyed(previous)
        let after = keyed(current)
        let beforeKeys = Set(before.map(\.0))
        let afterKeys = Set(after.map(\.0))
        return (
            after.filter { !beforeKeys.contains($0.0) }.map(\.1), before.filter { !afterKeys.contains($0.0) }.map(\.1)
        )
    }
}

/// Latency percentiles over a window, milliseconds; nil when the window has no samples.
public struct LatencyPercentiles: Sendable, Hashable, Codable {
    public var p50: Double?
    public var p95: Double?
    public var p99: Double?
    public var samples: Int

    public init(p50: Double? = nil, p95: Double? = nil, p99: Double? = nil, samples: Int = 0) {
        self.p50 = p50
        self.p95 = p95
        self.p99 = p99
        self.samples = samples
    }
}

/// Everything the Capacity Observer knows about one upstream pool (SPEC section 4).
public struct UpstreamStatus: Sendable, Hashable, Codable {
    public var upstream: String
    public var state: UpstreamState
    /// Human-readable signals behind `state` (e.g. "short-window p95 2100 ms vs long 900 ms").
    public var signals: [String]
    /// Capacity declared by the policy (used until headers are seen).
    public var declared: PerDimension<Double?>
    /// Limit the provider's headers report, normalised per minute.
    public var headerLimit: PerDimension<Double?>
    /// The effective capacity estimate C_est that the engine allocates from.
    public var estimate: PerDimension<Double?>
    /// 0…1: how much the estimate is backed by evidence (headers, probing, model version stability).
    public var confidence: Double
    /// Served rate over the short window, per minute.
    public var served: PerDimension<Double>
    /// served / estimate, when known.
    public var utilisation: PerDimension<Double?>
    public var latencyShort: LatencyPercentiles
    public var latencyLong: LatencyPercentiles
    /// Attempts in the short window by outcome (`ok`, `quota_exhausted`, …).
    public var outcomes: [String: Int]
    /// True when the circuit is open (state `overloaded`).
    public var circuitOpen: Bool
    /// Task classes gateways should fail fast while the circuit is open.
    public var shed: [String]
    public var modelVersion: String?
    public var lastEventAt: Double?

    public init(
        upstream: String, state: UpstreamState, signals: [String] = [], declared: PerDimension<Double?>,
        headerLimit: PerDimension<Double?> = PerDimension(nil), estimate: PerDimension<Double?>,
        confidence: Double, served: PerDimension<Double> = PerDimension(0),
        utilisation: PerDimension<Double?> = PerDimension(nil), latencyShort: LatencyPercentiles = .init(),
        latencyLong: LatencyPercentiles = .init(), outcomes: [String: Int] = [:], circuitOpen: Bool = false,
        shed: [String] = [], modelVersion: String? = nil, lastEventAt: Double? = nil
    ) {
        self.upstream = upstream
        self.state = state
        self.signals = signals
        self.declared = declared
        self.headerLimit = headerLimit
        self.estimate = estimate
        self.confidence = confidence
        self.served = served
        self.utilisation = utilisation
        self.latencyShort = latencyShort
        self.latencyLong = latencyLong
        self.outcomes = outcomes
        self.circuitOpen = circuitOpen
        self.shed = shed
        self.modelVersion = modelVersion
        self.lastEventAt = lastEventAt
    }
}

/// The Observer's output for one tick.
public struct ObserverReport: Sendable {
    /// The engine's input: one per known upstream pool.
    public var pools: [PoolObservation]
    /// Details for the API, metrics and snapshot (`state`, `circuit`, `shed`), sorted by upstream.
    public var upstreams: [UpstreamStatus]
    public var alerts: [LoopAlert]

    public init(pools: [PoolObservation], upstreams: [UpstreamStatus], alerts: [LoopAlert]) {
        self.pools = pools
        self.upstreams = upstreams
        self.alerts = alerts
    }
}

/// Everything the Consumption Classifier knows about one tenant on one upstream (SPEC section 5).
public struct TenantStatus: Sendable, Hashable, Codable {
    public var key: AllocationKey
    public var tenantClass: TenantClass
    public var suspect: Bool
    /// Why the tenant is flagged suspect (empty when not).
    public var suspectReasons: [String]
    /// Smoothed demand (served + denied locally + queued), per minute: what the engine uses.
    public var demand: PerDimension<Double>
    /// Short- and long-window EWMA burn rates of served traffic, per minute.
    public var servedShort: PerDimension<Double>
    public var servedLong: PerDimension<Double>
    /// Requests denied locally and queued by gateways, per minute (short window).
    public var deniedRPM: Double
    public var queuedRPM: Double
    public var peakToAverage: Double
    /// Tokens per request (long-context versus short-call shape).
    public var tokensPerRequest: Double
    /// Relative trend of demand: short / long − 1.
    public var trend: Double
    public var lastActivityAt: Double?
    public var samples: Int
    /// Share of requests that were retries; queue wait p95 in ms.
    public var retryRatio: Double
    public var queueWaitP95Ms: Double?
    /// Learned completion tokens per request (for snapshot `token_estimate`).
    public var completionTokensP50: Double?
    public var completionTokensP95: Double?
    /// Starvation (SPEC 5): served < ratio × allocation while demand ≥ allocation, for the window.
    public var starved: Bool
    public var starvedSince: Double?
    /// Each gateway's smoothed share of this tenant's demand (sums to 1 when non-empty), for slices.
    public var gatewayShares: [String: Double]
    /// What each gateway admitted for this tenant — every attempt it let through to the upstream, served or refused
    /// there — requests and tokens per minute (short-window rates), for drift.
    public var gatewayServed: [String: PerDimension<Double>]
    /// The tenant was first seen less than a short window ago and has sent too few requests to show that
    /// they keep to the gateways that saw them: which gateways its calls reach is not known yet
    /// (``gatewayShares`` lists those that happened to see its first calls).
    public var young: Bool

    public init(
        key: AllocationKey, tenantClass: TenantClass, suspect: Bool = false, suspectReasons: [String] = [],
        demand: PerDimension<Double>, servedShort: PerDimension<Double> = PerDimension(0),
        servedLong: PerDimension<Double> = PerDimension(0), deniedRPM: Double = 0, queuedRPM: Double = 0,
        peakToAverage: Double = 1, tokensPerRequest: Double = 0, trend: Double = 0, lastActivityAt: Double? = nil,
        samples: Int = 0, retryRatio: Double = 0, queueWaitP95Ms: Double? = nil, completionTokensP50: Double? = nil,
        completionTokensP95: Double? = nil, starved: Bool = false, starvedSince: Double? = nil,
        gatewayShares: [String: Double] = [:], gatewayServed: [String: PerDimension<Double>] = [:],
        young: Bool = false
    ) {
        self.key = key
        self.tenantClass = tenantClass
        self.suspect = suspect
        self.suspectReasons = suspectReasons
        self.demand = demand
        self.servedShort = servedShort
        self.servedLong = servedLong
        self.deniedRPM = deniedRPM
        self.queuedRPM = queuedRPM
        self.peakToAverage = peakToAverage
        self.tokensPerRequest = tokensPerRequest
        self.trend = trend
        self.lastActivityAt = lastActivityAt
        self.samples = samples
        self.retryRatio = retryRatio
        self.queueWaitP95Ms = queueWaitP95Ms
        self.completionTokensP50 = completionTokensP50
        self.completionTokensP95 = completionTokensP95
        self.starved = starved
        self.starvedSince = starvedSince
        self.gatewayShares = gatewayShares
        self.gatewayServed = gatewayServed
        self.young = young
    }
}

/// The Classifier's output for one tick.
public struct ClassifierReport: Sendable {
    /// The engine's input, one per tenant × upstream seen within `forget_after_s`.
    public var tenants: [TenantObservation]
    /// Spend per tenant and budget window (for the cost circuit breaker).
    public var spend: [TenantSpend]
    /// Details for the API, metrics and publisher (slices, drift, token estimates), sorted by key.
    public var statuses: [TenantStatus]
    public var alerts: [LoopAlert]

    public init(tenants: [TenantObservation], spend: [TenantSpend], statuses: [TenantStatus], alerts: [LoopAlert]) {
        self.tenants = tenants
        self.spend = spend
        self.statuses = statuses
        self.alerts = alerts
    }
}
