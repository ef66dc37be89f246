/// The Classifier's fixed thresholds that the policy's `classifier` section does not carry (its
/// windows, idle time, cold-start samples and `sustained_over_s` are there). Defaults are what the
/// loop runs with; the simulator and tests may pass others.
public struct ClassificationRules: Sendable, Hashable, Codable {
    /// `bursting`: short-window demand at least this multiple of the long-window demand…
    public var burstRatio: Double
    /// …and at least this many requests per minute (a tenant going from 0.1 to 0.3 RPM is not bursting).
    public var burstMinimumRPM: Double

    /// Suspect pattern "demand that rises only when allocation rises": an allocation rise is a rise
    /// of at least this fraction while the tenant was unconstrained (demand below 95 % of its allocation)…
    public var allocationRise: Double
    /// …it is *followed* when, within this many ticks, demand rises by at least `followFraction` of the
    /// allocation's rise and by at least 5 %…
    public var followTicks: Int
    public var followFraction: Double
    /// …and the tenant is suspect once at least this many rises were judged (the last 16 count)…
    public var followMinimumRises: Int
    /// …of which at least this share were followed.
    public var followShare: Double

    /// Suspect pattern "denied floods never retried": long-window denied requests at least this many
    /// per minute…
    public var floodMinimumRPM: Double
    /// …and at least this share of the tenant's demand…
    public var floodShare: Double
    /// …while retries stay below this share of the denied requests.
    public var floodRetryShare: Double

    /// Suspect pattern "many near-empty requests": served requests carrying at most this many tokens
    /// (prompt + completion)…
    public var nearEmptyTokens: Int64
    /// …at least this many per minute (long window)…
    public var nearEmptyMinimumRPM: Double
    /// …and at least this share of the served requests.
    public var nearEmptyShare: Double

    /// A gateway seeing a tenant gets at least this share of its slices (before renormalising to 1).
    public var minimumGatewayShare: Double

    /// Demand of a sparse tenant: a short-window rate estimated from fewer than this many requests is
    /// mostly noise (a tenant with one task a minute reads 0 between tasks), so the long-window rate is
    /// then a lower bound of the demand reported.
    public var sparseSamples: Double
    /// A tenant is *constrained* when, over the short window, on average at least this many of its
    /// requests wait in gateway queues (Little's law: the `queue_ms` reported, summed, per second)…
    public var constrainedWaiting: Double
    /// …or at least this share of its demand is denied or abandoned in a queue.
    public var constrainedDeniedShare: Double
    /// A constrained tenant's demand is at least its allocation × (1 + this), in the dimensions it uses
    /// (served at least 75 % of the most used one): an agent whose calls wait in a queue issues no
    /// more, so what it is served understates what it wants — without this its allocation would
    /// follow its own throttling down (the silent-starvation loop). Water-filling still caps it at
    /// its fair share; dampening bounds the step.
    public var constrainedProbe: Double
    /// A *blocked* tenant (its own bucket denies a tenth of what it wants) claims its allocation × (1 + this)
    /// each tick, compounding, up to its attempts over the fast window or the short one (whichever is higher;
    /// plus the probe, less the engine's headroom): the attempts bound the claim, this only sets how fast it
    /// gets there. At 0.25 a surge of 8× took ten ticks to be claimed; 0.5 takes five. (Seeds 1–8 of the
    /// built-in scenarios, with the fast window: starved tenant-minutes summed 21.7 → 20.7, night-collision
    /// premium SLO 99.65 → 100 %, total variation summed 153 → 156 %/min.)
    public var blockedGrowth: Double
    /// The fast window (seconds) over which a blocked tenant's attempts are also averaged: the short window
    /// (a minute) lags a jump in demand by most of a minute.
    public var fastWindowSeconds: Double
    /// A dimension is claimed only where the tenant is served at least this share of its allocation
    /// (counting one request more: a tenant of 30k-token calls cannot use the last 20k tokens of a minute):
    /// a tenant that waits while part of its allocation goes unused is held back by something else — its
    /// clumps meeting its bucket, the split over gateways — and more rate would sit idle. At 0.6 clumpy
    /// agents (tasks of many calls at once) ratcheted their allocations up claim after claim and back down
    /// when the clumps passed: allocation total variation 19–44 % of capacity per minute in the simulator's
    /// scenarios, 9–29 % at 0.9.
    public var constrainedUse: Double
    /// With at least this many denials per minute naming a bucket (`error_type` `rpm` or `tpm`), a
    /// dimension that fewer than a tenth of them name is not claimed.
    public var constrainedNamedDenials: Double

    /// The demand level (what the engine is given instead of the raw short-window rate, whose noise for
    /// agents — tasks of tens of calls at once — is ±30 % and moved every allocation of the pool with it)
    /// moves to the short-window demand when that leaves it by more than `levelNoiseMultiple` standard
    /// deviations of its own noise (the short rate's spread around the long one) and more than
    /// `levelDeadband` of the level… (Three: an agent's tasks make the short rate's spread skewed, with a
    /// long upper tail, and at two the level jumped on clumps; over seeds 1–8 of the built-in scenarios
    /// three cut the allocations' total variation by 6 % with no more starvation.)
    public var levelNoiseMultiple: Double
    public var levelDeadband: Double
    /// …or when it has stayed beyond the deadband on one side for this many seconds: a claim (the tenant denied or
    /// queued), a fall beyond the tenant's modelled noise, or a rise beyond twice it. A smaller rise that nobody
    /// refuses does not move it by persisting (the headroom covers it, and a tenant it leaves short claims): an
    /// agent's rate stays a minute on one side of a 10 % deadband often enough that counting it moved every
    /// allocation with the noise.
    public var levelPersistSeconds: Double

    /// Runaway-task accounting: a `task_id` not seen for this long is forgotten…
    public var taskExpirySeconds: Double
    /// …and at most this many tasks are tracked (the least recently seen are dropped first).
    public var maximumTrackedTasks: Int

    public init(
        burstRatio: Double = 2, burstMinimumRPM: Double = 1, allocationRise: Double = 0.1, followTicks: Int = 12,
        followFraction: Double = 1.0 / 3,
        followMinimumRises: Int = 6, followShare: Double = 0.75, floodMinimumRPM: Double = 10,
        floodShare: Double = 0.5, floodRetryShare: Double = 0.05, nearEmptyTokens: Int64 = 16,
        nearEmptyMinimumRPM: Double = 10, nearEmptyShare: Double = 0.5, minimumGatewayShare: Double = 0.05,
        sparseSamples: Double = 20, constrainedWaiting: Double = 0.5, constrainedDeniedShare: Double = 0.02,
        constrainedProbe: Double = 0.25, blockedGrowth: Double = 0.5, fastWindowSeconds: Double = 10,
        constrainedUse: Double = 0.9, constrainedNamedDenials: Double = 1,
        levelNoiseMultiple: Double = 3,
        levelDeadband: Double = 0.1, levelPersistSeconds: Double = 60, taskExpirySeconds: Double = 3600,
        maximumTrackedTasks: Int = 200_000
    ) {
        self.burstRatio = burstRatio
        self.burstMinimumRPM = burstMinimumRPM
        self.allocationRise = allocationRise
        self.followTicks = followTicks
        self.followFraction = followFraction
        self.followMinimumRises = followMinimumRises
        self.followShare = followShare
        self.floodMinimumRPM = floodMinimumRPM
        self.floodShare = floodShare
        self.floodRetryShare = floodRetryShare
        self.nearEmptyTokens = nearEmptyTokens
        self.nearEmptyMinimumRPM = nearEmptyMinimumRPM
        self.nearEmptyShare = nearEmptyShare
        self.minimumGatewayShare = minimumGatewayShare
        self.sparseSamples = sparseSamples
        self.constrainedWaiting = constrainedWaiting
        self.constrainedDeniedShare = constrainedDeniedShare
        self.constrainedProbe = constrainedProbe
        self.blockedGrowth = blockedGrowth
        self.fastWindowSeconds = fastWindowSeconds
        self.constrainedUse = constrainedUse
        self.constrainedNamedDenials = constrainedNamedDenials
        self.levelNoiseMultiple = levelNoiseMultiple
        self.levelDeadband = levelDeadband
        self.levelPersistSeconds = levelPersistSeconds
        self.taskExpirySeconds = taskExpirySeconds
        self.maximumTrackedTasks = maximumTrackedTasks
    }
}
