import AllotProtocol

/// Counters of an ``Enforcer`` since it was created, for the gateway's metrics.
public struct EnforcementStatistics: Sendable, Equatable {
    /// Requests admitted (including shadow-mode would-be denials, which are admitted).
    public var admitted = 0
    /// Of those, admitted after waiting in the queue.
    public var admittedAfterWaiting = 0
    /// Of those, admitted on allocation other tenants left idle (``GatewayConfiguration/borrowIdle``).
    public var borrowed = 0
    /// Requests denied, by the limit that denied them.
    public var denied: [LimitKind: Int] = [:]
    /// Shadow mode: requests that would have been denied, by limit (they were admitted).
    public var shadowWouldDeny: [LimitKind: Int] = [:]
    /// Waiting requests whose caller gave up.
    public var cancelledWhileQueued = 0
    /// Waiting requests reported `queued` once they had waited ``GatewayConfiguration/queuedReportAfter``.
    public var reportedWhileQueued = 0
    /// Waiting requests denied (`queue_full`) to make room in a full queue for a call of an older task of the
    /// same tenant.
    public var displaced = 0
    /// Calls found late (their task deadline passed) on arrival or while waiting: ranked last or denied, per
    /// ``GatewayConfiguration/pastDeadline``.
    public var lateCalls = 0
    /// Waiters the pumps looked at (each waiting pair's head, and the waiters whose maximum wait was over): the
    /// queue's work. A pump for the passage of time alone, while every head waits for a refill not yet due,
    /// looks only at the expired waiters.
    public var pumpVisits = 0
    /// Attempts completed with ``Enforcer/complete(_:_:now:)``.
    public var completed = 0
    /// Tickets handed back unused with ``Enforcer/release(_:now:)``.
    public var released = 0
    /// Times the limits stated by an upstream's responses braked its tenants' limits or released the brake
    /// (``GatewayConfiguration/followStatedLimits``).
    public var brakes = 0
    /// Tokens carried as debt after responses that used more than their reservation.
    public var debtTokens = 0.0
    /// Tokens refunded after responses that used less than their reservation.
    public var refundedTokens = 0.0
    public var snapshotsApplied = 0
    /// Snapshots refused for a version below the enforced one.
    public var snapshotsRejected = 0
    /// Times a lease expired and the gateway switched to `fallback`.
    public var leaseExpiries = 0
    /// Times the clock stepped back by more than a second and the buckets were rebased (refill resumed from then).
    public var clockStepsBack = 0
    /// Times the wall clock stepped forward by more than a second, seen against the steady clock (a ``Gateway`` on the
    /// system clock only), and the buckets were rebased.
    public var clockStepsForward = 0

    public init() {}

    /// All denials.
    public var deniedTotal: Int { denied.values.reduce(0, +) }
}

/// Which snapshot a gateway enforces, and how.
public struct EnforcementStatus: Sendable, Equatable {
    /// The enforced snapshot's version (what the snapshot client sends in `If-None-Match`); nil before the
    /// first snapshot.
    public var version: Int64?
    /// True once the lease expired: the `fallback` floors are enforced.
    public var inFallback: Bool
    /// The lease end of the enforced snapshot (its `expires_at`: Allot's instant).
    public var expiresAt: Double?
    /// When the lease ends on the gateway's clock (nil in fallback): when Allot's clock reaches `expiresAt` (the
    /// measured offset read in beyond a second), and at most the lease's length and 60 s past the last answer.
    public var leaseEnd: Double?
    /// Allot's clock minus the gateway's, seconds, as last measured on a poll's answer; nil before one, or from a
    /// server that sends no `Allot-Server-Time`.
    public var serverClockOffset: Double?
    public var policyVersion: String?
    /// Requests waiting in the admission queue.
    public var queueLength: Int
    /// Admitted requests not yet completed or released.
    public var inFlight: Int
    /// (tenant, upstream) pairs with bucket state in memory (idle, full ones are forgotten when a snapshot
    /// arrives, since a new bucket starts full anyway).
    public var trackedTenants: Int
    /// `task_id`s tracked for task budgets.
    public var trackedTasks: Int
    /// Upstreams braked because their responses state a lower limit than Allot allocates from
    /// (``GatewayConfiguration/followStatedLimits``): the fraction of the snapshot's limits in force, per
    /// dimension.
    public var brakes: [String: DimensionValues] = [:]
}

/// One tenant's enforcement state on one upstream, for inspection (tests, simulators, a gateway's debug page).
public struct TenantEnforcementStatus: Sendable, Equatable {
    /// The limits in force (the snapshot's entry, `default`, or `fallback`; braked while the upstream states a
    /// lower limit, ``GatewayConfiguration/followStatedLimits``).
    public var limits: RateLimits
    /// Whether the snapshot lists the tenant (false: `default` applies).
    public var listed: Bool
    public var shadow: Bool
    /// The buckets, brought forward to the `now` asked about.
    public var rpm: TokenBucket
    public var tpm: TokenBucket
    /// Charged requests in flight (what `max_concurrency` counts).
    public var inFlight: Int
    /// Requests of this tenant waiting in the queue.
    public var queued: Int
    /// Burst credit left (calls, tokens), zero when none or expired.
    public var creditCalls: Double
    public var creditTokens: Double
}
