import AllotCore
import AllotSignals

/// One stored telemetry event as the loop reads it back: names as interned refs (resolve them with
/// ``TelemetryNames``), optional values nil when the gateway did not report them.
public struct StoredEvent: Sendable, Hashable {
    /// The row id; strictly increasing in commit order (see `migrations/0001_telemetry.sql`).
    public var id: Int64
    public var timestampMs: Int64
    public var tenant: Int64
    public var upstream: Int64
    public var gateway: Int64
    public var outcome: Outcome
    public var taskClass: TaskClass
    public var status: Int?
    public var latencyMs: Double?
    public var queueMs: Double?
    public var promptTokens: Int64?
    public var completionTokens: Int64?
    public var estimatedTokens: Int64?
    public var retry: Int?
    public var taskID: String?
    /// The model version's ref, if reported.
    public var modelVersion: Int64?
    public var errorType: String?
    public var signals: EventSignals
    public var unparseableHeaders: Int

    public init(
        id: Int64, timestampMs: Int64, tenant: Int64, upstream: Int64, gateway: Int64, outcome: Outcome,
        taskClass: TaskClass, status: Int? = nil, latencyMs: Double? = nil, queueMs: Double? = nil,
        promptTokens: Int64? = nil, completionTokens: Int64? = nil, estimatedTokens: Int64? = nil, retry: Int? = nil,
        taskID: String? = nil, modelVersion: Int64? = nil, errorType: String? = nil,
        signals: EventSignals = EventSignals(), unparseableHeaders: Int = 0
    ) {
        self.id = id
        self.timestampMs = timestampMs
        self.tenant = tenant
        self.upstream = upstream
        self.gateway = gateway
        self.outcome = outcome
        self.taskClass = taskClass
        self.status = status
        self.latencyMs = latencyMs
        self.queueMs = queueMs
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.estimatedTokens = estimatedTokens
        self.retry = retry
        self.taskID = taskID
        self.modelVersion = modelVersion
        self.errorType = errorType
        self.signals = signals
        self.unparseableHeaders = unparseableHeaders
    }
}

/// A registered tenant.
public struct TenantRecord: Sendable, Hashable {
    public var ref: Int64
    public var id: String
    /// The tier it was registered with.
    public var tier: String
    public var firstSeenMs: Int64
    public var lastSeenMs: Int64

    public init(ref: Int64, id: String, tier: String, firstSeenMs: Int64, lastSeenMs: Int64) {
        self.ref = ref
        self.id = id
        self.tier = tier
        self.firstSeenMs = firstSeenMs
        self.lastSeenMs = lastSeenMs
    }
}

/// A registered upstream pool, gateway or model version.
public struct NamedRecord: Sendable, Hashable {
    public var ref: Int64
    public var id: String
    public var firstSeenMs: Int64
    /// Last event time (upstreams), last contact (gateways); nil for model versions.
    public var lastSeenMs: Int64?

    public init(ref: Int64, id: String, firstSeenMs: Int64, lastSeenMs: Int64?) {
        self.ref = ref
        self.id = id
        self.firstSeenMs = firstSeenMs
        self.lastSeenMs = lastSeenMs
    }
}

/// Every interned name, by ref: resolves the refs in ``StoredEvent``.
///
/// Names are never deleted and refs never change, so a copy stays valid; read a fresh one when an
/// event carries a ref the copy does not know (a name registered since).
public struct TelemetryNames: Sendable, Hashable {
    public var tenants: [Int64: TenantRecord]
    public var upstreams: [Int64: NamedRecord]
    public var gateways: [Int64: NamedRecord]
    public var modelVersions: [Int64: NamedRecord]

    public init(
        tenants: [Int64: TenantRecord] = [:], upstreams: [Int64: NamedRecord] = [:],
        gateways: [Int64: NamedRecord] = [:], modelVersions: [Int64: NamedRecord] = [:]
    ) {
        self.tenants = tenants
        self.upstreams = upstreams
        self.gateways = gateways
        self.modelVersions = modelVersions
    }

    public func tenant(_ ref: Int64) -> String? { tenants[ref]?.id }
    public func upstream(_ ref: Int64) -> String? { upstreams[ref]?.id }
    public func gateway(_ ref: Int64) -> String? { gateways[ref]?.id }
    public func modelVersion(_ ref: Int64) -> String? { modelVersions[ref]?.id }
}

/// Usage of one tenant on one upstream in one task class over a time range, summed from the
/// per-minute rollups: what showback and spend multiply by the price table (SPEC section 6).
public struct UsageTotal: Sendable, Hashable {
    public var tenant: String
    public var upstream: String
    public var taskClass: TaskClass
    public var counters: MinuteCounters

    public init(tenant: String, upstream: String, taskClass: TaskClass, counters: MinuteCounters) {
        self.tenant = tenant
        self.upstream = upstream
        self.taskClass = taskClass
        self.counters = counters
    }

    /// What the provider bills for this usage at `policy`'s price of its upstream: the served calls (outcome `ok`)
    /// and their tokens, as the Classifier counts spend; refused and failed attempts cost nothing. Showback
    /// (`GET /v1/costs`) and the budget windows seeded at a cold start price usage by this one rule (outside
    /// evaluation round 27: the two had disagreed). `priced`: false where the default price was charged.
    public func servedCost(policy: Policy) -> (amount: Double, priced: Bool) {
        CostGovernance.cost(
            upstream: upstream, inputTokens: Double(counters.servedPromptTokens),
            outputTokens: Double(counters.servedCompletionTokens), requests: Double(counters.ok), policy: policy)
    }
}

/// One `rollups_minute` row with its names resolved: tenant history.
public struct MinuteRollup: Sendable, Hashable {
    public var tenant: String
    public var upstream: String
    public var taskClass: TaskClass
    /// The minute's first millisecond (UTC).
    public var minuteMs: Int64
    public var counters: MinuteCounters

    public init(tenant: String, upstream: String, taskClass: TaskClass, minuteMs: Int64, counters: MinuteCounters) {
        self.tenant = tenant
        self.upstream = upstream
        self.taskClass = taskClass
        self.minuteMs = minuteMs
        self.counters = counters
    }
}
