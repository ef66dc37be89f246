import AllotJSON
import AllotTime

/// One allocation snapshot as gateways receive it from `GET /v1/snapshot` (SPEC section 7).
///
/// This is the gateway protocol's contract, shared by the publisher (which encodes it) and
/// `AllotEnforcement` (which decodes it), so both sides always agree on field names. Rates are
/// per minute; `burst` is a token bucket's capacity. A snapshot is immutable once published.
public struct Snapshot: Sendable, Equatable {
    /// The response field of every `GET /v1/snapshot` answer (200 and 304) that carries Allot's clock as it answers, in
    /// RFC 3339 with milliseconds: a gateway judges `expires_at` on Allot's clock rather than on its own (a clock
    /// stepped on either side moves leases by nothing).
    public static let serverTimeField = "Allot-Server-Time"
    /// The request field of a gateway's poll that carries its clock as it sends the poll (RFC 3339, milliseconds):
    /// Allot shows how far it is from its own (`GET /v1/gateways` `clock_offset_s`) and alerts beyond 30 s.
    public static let gatewayTimeField = "Allot-Gateway-Time"

    /// Strictly increasing across publishes and restarts; also the HTTP `ETag`.
    public var version: Int64
    /// Seconds since the Unix epoch.
    public var generatedAt: Double
    /// Gateways enforce this snapshot until then, and `fallback` afterwards (lease / fail static).
    public var expiresAt: Double
    /// How often gateways should poll when they do not long-poll.
    public var refreshMs: Int
    /// Identifies the policy files the allocation was computed with.
    public var policyVersion: String
    /// The gateway this slice was cut for; nil for the global view.
    public var gateway: String?
    public var upstreams: [UpstreamEntry]
    public var tenants: [TenantEntry]
    /// Limits for tenants this snapshot does not list.
    public var defaultLimits: RateLimits
    /// What gateways enforce after `expiresAt`: floors only.
    public var fallback: Fallback
    /// Per task class, the most calls and tokens one `task_id` may use (runaway agent loops).
    public var taskBudgets: [String: TaskBudget]

    public init(
        version: Int64, generatedAt: Double, expiresAt: Double, refreshMs: Int, policyVersion: String,
        gateway: String? = nil, upstreams: [UpstreamEntry], tenants: [TenantEntry], defaultLimits: RateLimits,
        fallback: Fallback, taskBudgets: [String: TaskBudget] = [:]
    ) {
        self.version = version
        self.generatedAt = generatedAt
        self.expiresAt = expiresAt
        self.refreshMs = refreshMs
        self.policyVersion = policyVersion
        self.gateway = gateway
        self.upstreams = upstreams
        self.tenants = tenants
        self.defaultLimits = defaultLimits
        self.fallback = fallback
        self.taskBudgets = taskBudgets
    }
}

/// A token bucket's parameters: `rate` per minute and `burst`, the bucket's capacity.
public struct Bucket: Sendable, Equatable, Hashable {
    public var rate: Double
    public var burst: Double

    public init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
    }
}

/// A pair of buckets, one per dimension.
public struct RateLimits: Sendable, Equatable, Hashable {
    public var rpm: Bucket
    public var tpm: Bucket

    public init(rpm: Bucket, tpm: Bucket) {
        self.rpm = rpm
        self.tpm = tpm
    }
}

/// A value per dimension (capacity, token estimate bounds, …).
public struct DimensionValues: Sendable, Equatable, Hashable {
    public var rpm: Double
    public var tpm: Double

    public init(rpm: Double, tpm: Double) {
        self.rpm = rpm
        self.tpm = tpm
    }
}

/// One upstream pool as gateways should see it.
public struct UpstreamEntry: Sendable, Equatable {
    public var id: String
    /// `healthy`, `degrading`, `throttled` or `overloaded`.
    public var state: String
    /// The capacity Allot allocates from (effective estimate).
    public var capacity: DimensionValues
    /// True when the circuit is open: gateways should fail over, or fail fast the task classes in `shed`.
    public var circuitOpen: Bool
    /// Task classes gateways should fail fast while the circuit is open (lowest priority first).
    public var shed: [String]

    public init(id: String, state: String, capacity: DimensionValues, circuitOpen: Bool = false, shed: [String] = []) {
        self.id = id
        self.state = state
        self.capacity = capacity
        self.circuitOpen = circuitOpen
        self.shed = shed
    }
}

/// A tenant's allocation on one upstream pool (for a gateway: its slice of it).
public struct TenantEntry: Sendable, Equatable {
    public var id: String
    public var upstream: String
    public var tier: String
    /// Lower numbers are more important (0 = highest).
    public var priority: Int
    public var rpm: Bucket
    public var tpm: Bucket
    /// Relative weight of this tenant's requests in a gateway's admission queue.
    public var queueWeight: Double
    /// Why each number is what it is (`fair_share`, `demand`, `floor`, …; SPEC 6.9).
    public var reason: Reasons
    public var burstCredit: BurstCredit?
    /// `enforce`, or `shadow`: count would-be denials without denying.
    public var mode: String
    /// Bounds the overshoot of concurrent requests whose cost is only known afterwards.
    public var maxConcurrency: Int
    /// The tenant's learned completion tokens on this upstream, to reserve before a call.
    public var tokenEstimate: TokenEstimate?
    /// When set, gateways deny every request with this reason (e.g. `budget_exhausted`).
    public var deny: String?
    /// The most a gateway admits for the tenant per minute, its own allocation, the idle allocation it borrows and
    /// its burst credit together, per dimension: the tenant's ceiling (the policy's `ceiling`, surplus included,
    /// never below its floor, or a spend budget's cap where lower) scaled by the gateway's share; `.infinity` in a
    /// dimension without one, nil when neither has one. JSON: `{"rpm": 72.0, "tpm": null}`, or `null`.
    public var ceiling: DimensionValues?

    public init(
        id: String, upstream: String, tier: String, priority: Int, rpm: Bucket, tpm: Bucket, queueWeight: Double,
        reason: Reasons, burstCredit: BurstCredit? = nil, mode: String = "enforce", maxConcurrency: Int,
        tokenEstimate: TokenEstimate? = nil, deny: String? = nil, ceiling: DimensionValues? = nil
    ) {
        self.id = id
        self.upstream = upstream
        self.tier = tier
        self.priority = priority
        self.rpm = rpm
        self.tpm = tpm
        self.queueWeight = queueWeight
        self.reason = reason
        self.burstCredit = burstCredit
        self.mode = mode
        self.maxConcurrency = maxConcurrency
        self.tokenEstimate = tokenEstimate
        self.deny = deny
        self.ceiling = ceiling
    }
}

/// The reason for each dimension's number.
public struct Reasons: Sendable, Equatable, Hashable {
    public var rpm: String
    public var tpm: String

    public init(rpm: String, tpm: String) {
        self.rpm = rpm
        self.tpm = tpm
    }
}

/// A time-limited extra allowance lent from the burst reserve (SPEC 6.5), usable on top of the
/// buckets until `expiresAt`.
public struct BurstCredit: Sendable, Equatable, Hashable {
    public var calls: Double
    public var tokens: Double
    public var expiresAt: Double

    public init(calls: Double, tokens: Double, expiresAt: Double) {
        self.calls = calls
        self.tokens = tokens
        self.expiresAt = expiresAt
    }
}

/// Completion-token percentiles learned per tenant and upstream.
public struct TokenEstimate: Sendable, Equatable, Hashable {
    public var p50: Double
    public var p95: Double

    public init(p50: Double, p95: Double) {
        self.p50 = p50
        self.p95 = p95
    }
}

/// Per task class limits for one `task_id`.
public struct TaskBudget: Sendable, Equatable, Hashable {
    public var maxCalls: Int
    public var maxTokens: Int

    public init(maxCalls: Int, maxTokens: Int) {
        self.maxCalls = maxCalls
        self.maxTokens = maxTokens
    }
}

/// What gateways fall back to once a snapshot's lease has expired: each tenant's floors.
public struct Fallback: Sendable, Equatable {
    public var tenants: [FallbackEntry]
    public var defaultLimits: RateLimits

    public init(tenants: [FallbackEntry], defaultLimits: RateLimits) {
        self.tenants = tenants
        self.defaultLimits = defaultLimits
    }
}

public struct FallbackEntry: Sendable, Equatable {
    public var id: String
    public var upstream: String
    public var rpm: Bucket
    public var tpm: Bucket

    public init(id: String, upstream: String, rpm: Bucket, tpm: Bucket) {
        self.id = id
        self.upstream = upstream
        self.rpm = rpm
        self.tpm = tpm
    }
}

extension Snapshot {
    /// How long its lease lasts from its publication, seconds (`expires_at − generated_at`, at least 0).
    public var leaseSeconds: Double { max(0, expiresAt - generatedAt) }

    /// Published with a lease that had already run out (`allot drain`, and the version that ends a drain, until the
    /// next tick: `expires_at` at `generated_at`): enforced as its `fallback` whatever the clocks read, and never taken
    /// back as a lease (a clock stepped back after it).
    public var bornExpired: Bool { leaseSeconds == 0 }
}
