/// Everything the Policy Engine needs for one tick (SPEC 2, 6), assembled by the loop from the
/// Observer's and the Classifier's outputs, the policy in force and the operator inputs.
public struct DecisionInput: Sendable {
    /// The tick's time, seconds since the Unix epoch (never read from a clock inside the engine).
    public var now: Double
    /// The policy in force.
    public var policy: Policy
    /// The Observer's view per upstream pool. Pools that tenants use but that are missing here fall
    /// back to the policy's declared capacity.
    public var pools: [PoolObservation]
    /// The Classifier's view per tenant and pool. A tenant is allocated on a pool only when it
    /// appears here for that pool.
    public var tenants: [TenantObservation]
    /// Spend per tenant and budget window (cost governance).
    public var spend: [TenantSpend]
    /// Operator overrides (expired ones are ignored).
    public var overrides: [Override]
    /// SREs' decisions on proposals since the last tick.
    public var resolutions: [ProposalResolution]
    /// Burst credit requests since the last tick.
    public var burstRequests: [BurstRequest]

    public init(
        now: Double, policy: Policy, pools: [PoolObservation] = [], tenants: [TenantObservation] = [],
        spend: [TenantSpend] = [], overrides: [Override] = [], resolutions: [ProposalResolution] = [],
        burstRequests: [BurstRequest] = []
    ) {
        self.now = now
        self.policy = policy
        self.pools = pools
        self.tenants = tenants
        self.spend = spend
        self.overrides = overrides
        self.resolutions = resolutions
        self.burstRequests = burstRequests
    }
}

/// The health state of an upstream pool (SPEC 4).
public enum UpstreamState: String, Sendable, Hashable, Codable, CaseIterable {
    case healthy
    /// Latency rising against its long-window baseline: the Observer already lowered the safe capacity.
    case degrading
    /// Quota exhaustion (429s) seen: capacity estimate cut.
    case throttled
    /// Overloaded, circuit open: gateways fail over or fail fast by task class.
    case overloaded
}

/// The Upstream Capacity Observer's view of one pool.
public struct PoolObservation: Sendable, Hashable {
    /// The pool id, e.g. `openai/gpt-4o`.
    public var upstream: String
    /// Effective capacity estimate `C_est` per dimension, per minute; nil → the policy's declared
    /// capacity; neither → the dimension is not allocated.
    public var capacity: PerDimension<Double?>
    /// Passed through to the pool summary: the Observer's capacity estimate already reflects it
    /// (a `degrading` upstream's safe capacity is lowered before any 429).
    public var state: UpstreamState

    public init(upstream: String, capacity: PerDimension<Double?>, state: UpstreamState = .healthy) {
        self.upstream = upstream
        self.capacity = capacity
        self.state = state
    }
}

/// The Classifier's class of a tenant on a pool (SPEC 5).
public enum TenantClass: String, Sendable, Hashable, Codable, CaseIterable {
    /// No recent demand: holds only its tier's `idle_allocation`.
    case idle
    /// Too little history: demand is the blend of the tier prior and observations.
    case coldStart = "cold_start"
    case steady
    /// A short, legitimate burst.
    case bursting
    /// Demand above allocation for long: no burst credit.
    case sustainedOver = "sustained_over"
}

/// The Tenant Consumption Classifier's view of one tenant on one pool.
public struct TenantObservation: Sendable, Hashable {
    public var tenant: String
    public var upstream: String
    public var tenantClass: TenantClass
    /// Gaming patterns seen: no burst credit.
    public var suspect: Bool
    /// Smoothed demand (served + denied locally + queued), per minute.
    public var demand: PerDimension<Double>
    /// Smoothed served rate, per minute (burst debt accounting).
    public var served: PerDimension<Double>
    /// Samples behind the estimate, and the classifier's confidence in `[0, 1]`.
    public var samples: Int
    public var confidence: Double
    /// Share of the tenant's tokens on this pool that are input (prompt) tokens, in `[0, 1]`: prices
    /// a budget throttle's token rate.
    public var inputTokenShare: Double
    /// The most requests and tokens the tenant asked for within one tick lately (its clump: an agent's
    /// parallel fan-out): the engine sizes the tenant's bucket to hold at least one clump, capped at a
    /// minute of its rate, so a low-rate tenant's fan-out is not queued call by call. 0: unknown.
    public var clump: PerDimension<Double>
    /// Dimensions in which the tenant is *blocked*: its own rate bucket denies a good part of what it
    /// wants, and it claims more there. A rise of its target in such a dimension is evidence, not noise:
    /// the damper follows it without smoothing or waiting for persistence (`max_up` still bounds it).
    public var pressing: PerDimension<Bool>
    /// How far the tenant's rate swings from one minute to the next around `demand` (one standard deviation,
    /// per minute; ``AllocationClaim/spread``). 0: unknown.
    public var spread: PerDimension<Double>
    /// The tenant's work fans out into tasks: its calls carry `task_id`s, several calls to a task. With the
    /// class `bursting` it is a tenant mid-task, and the engine lends it burst credit unasked (SPEC 6.5).
    public var fansOut: Bool

    public init(
        tenant: String, upstream: String, tenantClass: TenantClass = .steady, suspect: Bool = false,
        demand: PerDimension<Double>, served: PerDimension<Double> = PerDimension(0), samples: Int = 100,
        confidence: Double = 1, inputTokenShare: Double = 0.5, clump: PerDimension<Double> = PerDimension(0),
        pressing: PerDimension<Bool> = PerDimension(false), spread: PerDimension<Double> = PerDimension(0),
        fansOut: Bool = false
    ) {
        self.spread = spread
        self.fansOut = fansOut
        self.clump = clump
        self.pressing = pressing
        self.tenant = tenant
        self.upstream = upstream
        self.tenantClass = tenantClass
        self.suspect = suspect
        self.demand = demand
        self.served = served
        self.samples = samples
        self.confidence = confidence
        self.inputTokenShare = inputTokenShare
    }
}

/// A tenant's spend in one budget window, as the Classifier computed it from token counts and the
/// price table (`Policy.price(ofUpstream:)`, `Price.cost`).
public struct TenantSpend: Sendable, Hashable {
    public var tenant: String
    public var window: BudgetWindow
    /// Spent so far in the window in progress (`BudgetWindow.interval(containing:)`), policy currency.
    public var spent: Double
    /// Current burn rate, currency per second.
    public var burnRatePerSecond: Double

    public init(tenant: String, window: BudgetWindow, spent: Double, burnRatePerSecond: Double) {
        self.tenant = tenant
        self.window = window
        self.spent = spent
        self.burnRatePerSecond = burnRatePerSecond
    }
}
