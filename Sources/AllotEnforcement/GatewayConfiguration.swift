import AllotProtocol

/// Settings of the enforcement side of a gateway: identity, queueing and the defaults used where the snapshot
/// is silent.
public struct GatewayConfiguration: Sendable {
    /// This gateway instance's id (`?gateway=` when polling, `gateway` in telemetry); `[A-Za-z0-9._:/-]`.
    public var gatewayID: String
    /// How long a request of each class may wait in the admission queue before it is denied (seconds; 0 =
    /// never queue). Default: realtime 0.5, interactive 5, batch 60, background 300.
    public var maxWait: PerTaskClass<Double>
    /// Most requests waiting at once; beyond it requests are denied at once (`queue_full`). Default 10,000.
    public var maxQueueLength: Int
    /// Seconds a request waits in the admission queue before the gateway reports it as `queued`, once, with
    /// the time it arrived: Allot then counts the demand a standing queue holds when it arrives, not when the
    /// queue lets it through at the allocation's pace. Its later attempt or denial is reported with `retry`
    /// one higher, so the request counts once as demand. Default 5, the longest an interactive request waits:
    /// realtime and interactive requests are denied by then (which Allot sees), so only batch and background
    /// requests — up to 60 and 300 s in the queue without a denial — are reported, as soon as an interactive
    /// one would have been denied. `.infinity`: never (only a caller that gives up is reported `queued`).
    public var queuedReportAfter: Double
    /// Completion tokens reserved when neither the caller nor the snapshot gives an estimate. Default 500.
    public var defaultCompletionEstimate: Int
    /// Which of the snapshot's learned completion percentiles to reserve: p50 (default; over-spend becomes debt
    /// and `max_concurrency` bounds the overshoot) or p95 (fewer debts, more idle reservation).
    public var estimatePercentile: EstimatePercentile
    /// `max_concurrency` for tenants the snapshot does not list (nil: unbounded).
    public var defaultMaxConcurrency: Int?
    /// The gateway's own cap on requests in flight per upstream, shared by all tenants (nil: none). When it is
    /// reached, waiting requests are served by task class and then by the tenants' `queue_weight`.
    public var maxInFlightPerUpstream: Int?
    /// Limits enforced for every tenant before the first snapshot arrives. nil (default): requests wait for
    /// the first snapshot up to their maximum wait, then are denied with `no_snapshot`.
    public var bootstrapLimits: RateLimits?
    /// Retry-after advised when no refill rate tells (concurrency, no snapshot), in seconds. Default 1.
    public var defaultRetryAfter: Double
    /// Most `task_id`s tracked for the runaway-task guard; the least recently seen are forgotten. Default
    /// 100,000.
    public var maxTrackedTasks: Int
    /// A task unseen for this long is forgotten (seconds). Default 3,600.
    public var taskIdleTimeout: Double
    /// Work conservation: a tenant whose own bucket is empty may borrow the allocation other tenants leave
    /// idle on the same upstream at this gateway (``IdleCapacity``), so that allocation nobody uses is not
    /// wasted while someone waits. The gateway still admits at most the sum of its slices in the long run.
    /// Default true.
    public var borrowIdle: Bool
    /// The idle buckets' size in seconds of the summed rate (at least the largest tenant's burst). Default 5.
    public var borrowWindow: Double
    /// Each tenant's borrow allowance, as a multiple of its own slice: a bucket refilled at `borrowShare` × its
    /// rate, holding that many times the larger of its burst and `borrowWindow` seconds of its rate. Within its
    /// allowance a tenant borrows whenever the idle buckets have room; beyond it, only while the borrow leaves
    /// them at least a quarter full (allocation nobody within an allowance has taken). Idle allocation otherwise goes
    /// to whoever asks while it is there, and a tenant sending many parallel calls asks most often: one standard
    /// tenant behind 32 gateways was served 3.4 times its allocation from what five critical tenants left idle
    /// while three others as constrained got 1.1 times theirs and starved. `.infinity`: no allowance (the idle
    /// buckets alone bound borrowing); 0: only what accrues beyond a quarter. Default 1.
    public var borrowShare: Double
    /// Tenants whose tier priority is this or before (lower) borrow without an allowance. Default 0: the first
    /// tier (the shipped policy's `critical`, contracted capacity for a few accounts). A critical compliance run
    /// arriving at 160 rpm beside busy pipelines was allocated 48 at first; it used to borrow its way to its rate
    /// while its allocation caught up, and within an allowance its tasks' p95 went 12.6 → 19.9 s (16.3 s
    /// exempt). -1: every tenant has an allowance.
    public var borrowUnboundedPriority: Int
    /// The gateway's own cap per upstream (``GatewayCap``): everything it admits there, its tenants' own
    /// requests and borrowed ones alike, fits a bucket refilled at the sum of its slices and holding this many
    /// seconds of it (at least the largest tenant's burst), so that slices rounded up to whole requests cannot
    /// add up to a burst the upstream refuses. Burst credit is not held by it; realtime calls have a reserve in it
    /// (``capRealtimeReserve``). 0 turns it
    /// off. Default 10 (a tier's default `bucket_s`): the fleet's slices sum to the allocation, so together the
    /// gateways' caps hold this many seconds of it, and a provider's bucket holds little more (the simulated one
    /// 10 s). At 20 s, three gateways in front of pools of 60 to 3,000 rpm released 20 s of allocation after
    /// a lull or an overload into the provider's 10: in random scenarios 429 rates of 0.77-4.56 % fell to
    /// 0.12-3.73 % at 10 s, and utilisation rose 0.3-6 points (the built-in scenarios moved within their noise).
    public var capWindow: Double
    /// ``capWindow``'s default, seconds.
    public static let defaultCapWindow = 10.0
    /// The fraction of the cap's burst (each dimension) the other task classes leave for realtime calls on an
    /// upstream where realtime calls came within ``capRealtimeMemory`` seconds, at least one request and the last
    /// realtime call's tokens; a realtime call within its own allocation may use it (``GatewayCap`` has the
    /// measurements). 0 keeps nothing. Default 0.1: over the 50 random scenarios with realtime tenants (seeds 1
    /// and 2, without the minimum) 0.25 halved the 429s as well but starved tenant-minutes summed 2,840
    /// against 2,826 without a reserve, 0.1 2,813.
    public var capRealtimeReserve: Double
    /// How long after the last realtime call on an upstream the cap keeps ``capRealtimeReserve`` there,
    /// seconds. Default 300 (sparse realtime tenants send a task every few minutes).
    public var capRealtimeMemory: Double
    /// Where the gateway holds no slice on an upstream the snapshot lists with a capacity (every tenant there
    /// is on the snapshot's `default`: a fresh installation's first snapshot, a gateway that has just joined),
    /// its cap there refills at this fraction of that capacity instead of the sum of slices (with the cap's
    /// window, at least one `default` burst). Without it nothing bounded the newcomers together: each may send
    /// a whole request at once at every gateway, and 198 tenants arriving together at ten times a 600-rpm
    /// pool behind three gateways had 211 of their first 385 attempts answered 429 (6.6 % of a five-minute
    /// run's), none with it. A third, so that three gateways together start from the upstream's capacity; at a
    /// tenth the first five seconds of the built-in scenarios started slower (tpm-vs-rpm, seeds 9-24: starved
    /// tenant-minutes 0.8 → 0.9; a third: 0.6). 0 turns it off. Default 0.34: set about 1/N for a fleet of N
    /// gateways (eight at 0.34 each start from 2.7 times the upstream's capacity).
    public var newcomerCapShare: Double
    /// Whether a quota refusal (429) draws the gateway's cap on its upstream down so that it admits nothing
    /// there before the refusal's retry-after (at most ``GatewayCap/longestRefusalHold`` seconds), or empties
    /// it when the refusal gives none (``GatewayCap/holdAfterRefusal(retryAfter:tokens:at:)`` has the
    /// measurements). Default true.
    public var capHoldsAfterRefusal: Bool
    /// Follow a lower limit the provider states before Allot does: when the last three responses of an upstream
    /// all state a limit (`x-ratelimit-limit-*`, `anthropic-ratelimit-*-limit`) below 90% of the capacity the
    /// snapshot allocates from, the listed tenants' limits there are scaled by the stated limit over that
    /// capacity (never below a tenth; a stated 0 is ignored) until a snapshot allocates from the lower capacity (or the statements rise again). Allot makes
    /// the same cut at its next tick; this saves the refusals until then. Default true.
    public var followStatedLimits: Bool
    /// What happens to a call whose task deadline (``AdmissionRequest/taskDeadline``) has passed when it
    /// arrives or while it waits. Default ``PastDeadlinePolicy/rankLast``.
    public var pastDeadline: PastDeadlinePolicy
    /// Receives notable events (snapshot applied or rejected, lease expired, poll failures, telemetry drops),
    /// for the gateway's logs and metrics. Called synchronously, outside the enforcer's lock.
    public var onEvent: (@Sendable (GatewayEvent) -> Void)?

    /// - Parameters:
    ///   - gatewayID: this instance's id.
    ///   - maxWait: per task class, seconds a request may queue.
    ///   - maxQueueLength: most waiting requests.
    ///   - queuedReportAfter: seconds of waiting after which a request is reported `queued`.
    ///   - defaultCompletionEstimate: tokens reserved when nothing better is known.
    ///   - estimatePercentile: which learned percentile to reserve.
    ///   - defaultMaxConcurrency: concurrency cap for unlisted tenants.
    ///   - maxInFlightPerUpstream: the gateway's own in-flight cap per upstream.
    ///   - bootstrapLimits: limits before the first snapshot.
    ///   - defaultRetryAfter: advised retry when no refill rate tells.
    ///   - maxTrackedTasks: task ids tracked for task budgets.
    ///   - taskIdleTimeout: seconds after which an idle task is forgotten.
    ///   - borrowIdle: whether tenants may borrow allocation left idle by others on the same upstream.
    ///   - borrowWindow: the idle buckets' size in seconds of the summed rate.
    ///   - capWindow: the gateway cap's size in seconds of the summed rate (0: no cap).
    ///   - capRealtimeReserve: the fraction of the cap's burst the other classes leave for realtime calls.
    ///   - capRealtimeMemory: seconds after the last realtime call on an upstream that the reserve is kept.
    ///   - newcomerCapShare: the cap's rate, as a fraction of the upstream's capacity, where the gateway holds
    ///     no slice there.
    ///   - capHoldsAfterRefusal: whether a quota refusal holds the gateway's cap until its retry-after.
    ///   - followStatedLimits: whether a lower limit stated in response headers brakes the upstream at once.
    ///   - pastDeadline: what happens to calls of tasks whose deadline has passed.
    ///   - onEvent: event handler.
    public init(
        gatewayID: String,
        maxWait: PerTaskClass<Double> = PerTaskClass(realtime: 0.5, interactive: 5, batch: 60, background: 300),
        maxQueueLength: Int = 10_000, queuedReportAfter: Double = 5, defaultCompletionEstimate: Int = 500,
        estimatePercentile: EstimatePercentile = .p50, defaultMaxConcurrency: Int? = nil,
        maxInFlightPerUpstream: Int? = nil, bootstrapLimits: RateLimits? = nil, defaultRetryAfter: Double = 1,
        maxTrackedTasks: Int = 100_000, taskIdleTimeout: Double = 3_600, borrowIdle: Bool = true,
        borrowWindow: Double = 5, borrowShare: Double = 1, borrowUnboundedPriority: Int = 0,
        capWindow: Double = defaultCapWindow, capRealtimeReserve: Double = 0.1, capRealtimeMemory: Double = 300,
        newcomerCapShare: Double = 0.34, capHoldsAfterRefusal: Bool = true,
        followStatedLimits: Bool = true, pastDeadline: PastDeadlinePolicy = .rankLast,
        onEvent: (@Sendable (GatewayEvent) -> Void)? = nil
    ) {
        self.gatewayID = gatewayID
        self.maxWait = maxWait
        self.maxQueueLength = maxQueueLength
        self.queuedReportAfter = queuedReportAfter
        self.defaultCompletionEstimate = defaultCompletionEstimate
        self.estimatePercentile = estimatePercentile
        self.defaultMaxConcurrency = defaultMaxConcurrency
        self.maxInFlightPerUpstream = maxInFlightPerUpstream
        self.bootstrapLimits = bootstrapLimits
        self.defaultRetryAfter = defaultRetryAfter
        self.maxTrackedTasks = maxTrackedTasks
        self.taskIdleTimeout = taskIdleTimeout
        self.borrowIdle = borrowIdle
        self.borrowWindow = borrowWindow
        self.borrowShare = borrowShare
        self.borrowUnboundedPriority = borrowUnboundedPriority
        self.capWindow = capWindow
        self.capRealtimeReserve = capRealtimeReserve
        self.capRealtimeMemory = capRealtimeMemory
        self.newcomerCapShare = newcomerCapShare
        self.capHoldsAfterRefusal = capHoldsAfterRefusal
        self.followStatedLimits = followStatedLimits
        self.pastDeadline = pastDeadline
        self.onEvent = onEvent
    }
}

/// What the admission queue does with a call whose task deadline has passed (it arrived late, or its task's
/// deadline passed while it waited). Either way it no longer takes capacity from the tenant's calls that can
/// still make their deadlines; the policies differ in whether it may use what those calls leave.
public enum PastDeadlinePolicy: String, Sendable {
    /// The call ranks behind every call of its tenant and task class whose task can still make its deadline
    /// (and behind calls without a deadline), oldest task first among the late ones; it is admitted when the
    /// tenant has nothing more urgent waiting, and waits or is denied like any other call otherwise. The
    /// default: the gateway cannot know whether a late answer is worthless (deadlines are often SLOs, and a
    /// late result usually beats a failed task whose earlier calls were already paid for), and ranking it
    /// last is work-conserving: it only uses capacity no timely call of its tenant is waiting for.
    case rankLast = "rank_last"
    /// The call is denied with code `deadline_passed` (limit ``LimitKind/deadline``, no retry-after): at
    /// arrival, and when its task's deadline passes while it waits. For callers whose deadlines are hard
    /// (the result is useless once late), so that a late task stops spending the tenant's allocation at all.
    /// In `shadow` mode the would-be denial is only counted.
    case deny
}

/// Which learned completion-token percentile to reserve before a call.
public enum EstimatePercentile: String, Sendable {
    case p50
    case p95
}

/// Something a gateway operator wants in the logs.
public enum GatewayEvent: Sendable, Equatable {
    /// A snapshot is now enforced (`previous` nil for the first).
    case snapshotApplied(version: Int64, previous: Int64?)
    /// A snapshot was refused: a version below the enforced one (a server restored from an old backup, a
    /// misrouted response). The enforced snapshot stays.
    case snapshotRejected(version: Int64, enforced: Int64, reason: String)
    /// The enforced snapshot's lease expired (its `expiresAt`, Allot's instant: see ``serverClock(offset:)``; or
    /// sooner, its length and 60 s after the last answer, when Allot fell silent): the gateway now enforces its
    /// `fallback` floors.
    case leaseExpired(version: Int64, expiresAt: Double)
    /// Allot's clock is `offset` seconds ahead of the gateway's (behind when negative; 0: in step, within a second),
    /// as measured on a poll's answer (and moved by a step back of the gateway's own clock, reported at the step):
    /// leases and burst credits run until Allot's clock reaches their `expires_at`, and telemetry is stamped on it.
    /// Reported when it moves by more than a second, or comes into or out of use.
    case serverClock(offset: Double)
    /// The enforced snapshot's lease, taken as ended on the gateway's clock, is live by Allot's (measured since): the
    /// gateway enforces it again instead of its `fallback` floors.
    case leaseResumed(version: Int64)
    /// A snapshot poll failed; the next attempt is in `retryIn` seconds.
    case pollFailed(message: String, consecutiveFailures: Int, retryIn: Double)
    /// The limits an upstream's responses state moved the brake on its listed tenants' limits
    /// (``GatewayConfiguration/followStatedLimits``): the fractions of the snapshot's limits now in force (1:
    /// released), and the stated limits per minute behind them.
    case statedLimitBrake(upstream: String, rpmFraction: Double, tpmFraction: Double, statedRPM: Double?, statedTPM: Double?)
    /// Telemetry events were dropped because the buffer was full (drop-oldest) or the server refused them.
    case telemetryDropped(count: Int, reason: String)
    /// A telemetry batch could not be posted; it is kept and retried in `retryIn` seconds.
    case telemetryPostFailed(message: String, consecutiveFailures: Int, retryIn: Double)
    /// Telling Allot the gateway leaves (``Gateway/stop(timeout:)``) failed: Allot re-splits its tenants once it has been
    /// silent for `gateway_lag_s`, and alerts on it as silent until it forgets it.
    case leaveFailed(message: String)
}

extension GatewayConfiguration {
    /// The tenants' borrow allowance these settings call for.
    var borrowAllowance: BorrowAllowance {
        BorrowAllowance(share: borrowShare, window: borrowWindow, unboundedPriority: borrowUnboundedPriority)
    }
}
