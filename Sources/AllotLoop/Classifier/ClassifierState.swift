import AllotCore

/// The Tenant Consumption Classifier's memory between ticks, `Codable` so the loop can persist it and
/// a restarted server resumes with its demand smoothing, classes, starvation clocks, spend so far and
/// task counts instead of starting blind (SPEC 7). Restoring a state and feeding it the same
/// telemetry gives the same reports as the original.
///
/// Size: about 1 KB per tenant and upstream in memory; encoded, histograms are sparse.
public struct ClassifierState: Sendable, Hashable, Codable {
    /// The previous `classify`'s `now`; nil before the first.
    var lastClassifyAt: Double?
    /// One per tenant and upstream seen within `forget_after_s`.
    var tracks: [TenantTrack]
    /// Spend per tenant.
    var accounts: [SpendAccount]
    /// Calls and tokens per `task_id`.
    var tasks: [TaskKey: TaskTrack]
    /// Upstreams charged at the default price, by id.
    var unpriced: [String: UnpricedUsage]
    /// Histogram weights grow as `exp((now − epoch) / long window)` instead of decaying every bucket
    /// every tick; the epoch moves (and every histogram is rescaled) when they grow large.
    var histogramEpoch: Double?

    public init() {
        lastClassifyAt = nil
        tracks = []
        accounts = []
        tasks = [:]
        unpriced = [:]
        histogramEpoch = nil
    }

    /// The smoothed demand per tenant and upstream: what a restart resumes from.
    public var demand: [AllocationKey: PerDimension<Double>] {
        Dictionary(uniqueKeysWithValues: tracks.map { ($0.key, $0.demandShort) })
    }
}

/// Counts of one tick, folded into the rates at the tick's end (zero between ticks).
struct TickCounts: Sendable, Hashable, Codable {
    var servedRequests = 0.0
    var servedTokens = 0.0
    var promptTokens = 0.0
    var completionTokens = 0.0
    var denied = 0.0
    var deniedTokens = 0.0
    var queued = 0.0
    var queuedTokens = 0.0
    /// Every event (attempts, denials, queueing), and those that were retries.
    var events = 0.0
    var retries = 0.0
    var nearEmpty = 0.0
    /// What the served usage cost.
    var cost = 0.0

    var demandRequests: Double { servedRequests + denied + queued }
    var demandTokens: Double { servedTokens + deniedTokens + queuedTokens }
}

/// One gateway's view of one tenant on one upstream (for per-gateway slices and drift, SPEC 7).
struct GatewayTrack: Sendable, Hashable, Codable {
    var name: String
    /// The interned ref, bound on first sight in this process (refs belong to a database).
    var ref: Int64?
    var tickDemand = 0.0
    var tickServed = PerDimension<Double>(0)
    /// Short-window EWMA of demand requests per minute, and of served requests and tokens per minute.
    var demand = 0.0
    var served = PerDimension<Double>(0)
    var lastSeenAt: Double
}

/// The "demand rises only when allocation rises" detector's memory (see ``ClassificationRules``).
struct RatchetTrack: Sendable, Hashable, Codable {
    /// Last tick's allocation and demand in the judged dimension.
    var previousAllocation: Double?
    var previousDemand = 0.0
    /// The demand the tick before that (a rise after flat demand was not demand-driven).
    var earlierDemand = 0.0
    /// An allocation rise waiting to be judged: the demand before it, the rise, the ticks left.
    var pendingDemandBefore: Double?
    var pendingRise = 0.0
    var pendingTicks = 0
    /// The last judged rises, newest in bit 0 (1 = followed), and how many were judged (≤ 16 count).
    var history: UInt32 = 0
    var judged = 0

    var followedShare: Double {
        let window = min(judged, 16)
        guard window > 0 else { return 0 }
        let mask: UInt32 = window >= 32 ? .max : (1 << UInt32(window)) - 1
        return Double((history & mask).nonzeroBitCount) / Double(window)
    }

    mutating func record(followed: Bool) {
        history = (history << 1) | (followed ? 1 : 0)
        judged += 1
        pendingDemandBefore = nil
        pendingTicks = 0
        pendingRise = 0
    }
}

/// Everything the Classifier remembers about one tenant on one upstream.
struct TenantTrack: Sendable, Hashable, Codable {
    var key: AllocationKey
    var tick = TickCounts()

    // Exact time-decay EWMAs, per minute (see `ConsumptionClassification`).
    var servedShort = PerDimension<Double>(0)
    var servedLong = PerDimension<Double>(0)
    var demandShort = PerDimension<Double>(0)
    var demandLong = PerDimension<Double>(0)
    var deniedShort = 0.0
    var queuedShort = 0.0
    var deniedLong = 0.0
    var eventsLong = 0.0
    var retriesLong = 0.0
    var nearEmptyLong = 0.0
    var promptLong = 0.0
    var completionLong = 0.0
    /// The highest short-window demand (RPM), decaying over the long window: the peak of the peak-to-average ratio.
    var peakDemand = 0.0

    /// Demand events seen (served, denied, queued).
    var samples = 0
    var firstSeenAt: Double
    /// Last event of any kind, and last demand event (event times).
    var lastSeenAt: Double
    var lastActivityAt: Double?
    /// Since when demand exceeds the allocation (`sustained_over`), and since when the tenant starves.
    var overSince: Double?
    var starvingSince: Double?

    var completionTokens = DecayingHistogram()
    var queueWait = DecayingHistogram()
    var gateways: [GatewayTrack] = []
    var ratchet = RatchetTrack()
    var suspectReasons: [String] = []

    init(key: AllocationKey, at: Double) {
        self.key = key
        firstSeenAt = at
        lastSeenAt = at
    }
}

/// A tenant's spend in each budget window in progress (SPEC 6, cost governance).
struct SpendAccount: Sendable, Hashable, Codable {
    var tenant: String
    /// Start of the window each entry counts (UTC calendar hour, day, month), in `BudgetWindow.allCases` order.
    var windowStart: [Double]
    var spent: [Double]
    /// Smoothed spend rate, currency per second (long window).
    var burnPerSecond = 0.0
    var tickCost = 0.0
    var lastSpendAt: Double?

    init(tenant: String, now: Double) {
        self.tenant = tenant
        windowStart = BudgetWindow.allCases.map { $0.interval(containing: now).start }
        spent = Array(repeating: 0, count: BudgetWindow.allCases.count)
    }

    /// Starts a new window where `now` left the one in progress.
    mutating func roll(to now: Double) {
        for (position, window) in BudgetWindow.allCases.enumerated() {
            let start = window.interval(containing: now).start
            if start != windowStart[position] {
                windowStart[position] = start
                spent[position] = 0
            }
        }
    }

    /// Charges `cost` for usage at `at` to every window in progress that contains it (usage from a
    /// window that has ended belongs to that window and is not charged to the current one).
    mutating func charge(_ cost: Double, at: Double) {
        tickCost += cost
        if lastSpendAt == nil || at > lastSpendAt! { lastSpendAt = at }
        if at >= windowStart[0] { spent[0] += cost }
        if at >= windowStart[1] { spent[1] += cost }
        if at >= windowStart[2] { spent[2] += cost }
    }
}

/// A task of a tenant (`task_id` is the gateway's id, unique per tenant at best).
struct TaskKey: Sendable, Hashable, Codable {
    var tenant: String
    var task: String
}

/// Calls and tokens of one task so far (runaway detection, SPEC 6).
struct TaskTrack: Sendable, Hashable, Codable {
    var taskClass: TaskClass
    var upstream: String
    var calls = 0
    var tokens: Int64 = 0
    var firstSeenAt: Double
    var lastSeenAt: Double
    /// When it first exceeded its class's budget.
    var exceededAt: Double?
}

/// Usage charged at the default price on an upstream the price table does not list.
struct UnpricedUsage: Sendable, Hashable, Codable {
    var since: Double
    var lastAt: Double
}
