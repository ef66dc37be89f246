import AllotCore

/// The Tenant Consumption Classifier's memory between ticks, `Codable` so the loop can persist it and
/// a restarted server resumes with its demand smoothing, classes, starvation clocks, spend so far and
/// task counts instead of starting blind (SPEC 7). Restoring a state and feeding it the same
/// telemetry gives the same reports as the original.
///
/// Size: about 1 KB per tenant and upstream in memory (the track, the used range of its two
/// histograms, its gateways) plus about 90 bytes per live task (`TaskTable`). Checkpointed
/// (`BinaryStateCoder`, histograms sparse, tasks as columns) 10,000 tenants with 200,000 live tasks
/// take about 25 MB: persist it every few ticks, not every tick.
public struct ClassifierState: Sendable, Hashable, Codable {
    /// The previous `classify`'s `now`; nil before the first.
    var lastClassifyAt: Double?
    /// One per tenant and upstream seen within `forget_after_s`.
    var tracks: [TenantTrack]
    /// Spend per tenant.
    var accounts: [SpendAccount]
    /// Calls and tokens per `task_id` (each names its tenant and task).
    @TaskColumns var tasks: [TaskTrack]
    /// Upstreams charged at the default price, by id.
    var unpriced: [String: UnpricedUsage]
    /// Histogram weights grow as `exp((now − epoch) / long window)` instead of decaying every bucket
    /// every tick; the epoch moves (and every histogram is rescaled) when they grow large.
    var histogramEpoch: Double?

    public init() {
        lastClassifyAt = nil
        tracks = []
        accounts = []
        tasks = []
        unpriced = [:]
        histogramEpoch = nil
    }

    /// The demand level per tenant and upstream (the short-window demand before the first tick that set
    /// one): what a restart resumes from.
    public var demand: [AllocationKey: PerDimension<Double>] {
        Dictionary(uniqueKeysWithValues: tracks.map { ($0.key, $0.level ?? $0.demandShort) })
    }
}

/// One tenant and upstream's counts of the tick in progress, folded into the rates at the tick's end.
/// Kept apart from ``TenantTrack`` and compact (counts as `Float`, exact up to 2^24 per tick): the
/// per-event loop updates one of these at random, and a small array stays in cache. Never persisted:
/// it is empty between ticks.
struct TickCounts: Sendable {
    var servedRequests: Float = 0
    var servedTokens: Float = 0
    var promptTokens: Float = 0
    var completionTokens: Float = 0
    var denied: Float = 0
    var deniedTokens: Float = 0
    var queued: Float = 0
    var queuedTokens: Float = 0
    /// Seconds the tick's requests waited in gateway queues (their `queue_ms`, summed).
    var waitSeconds: Float = 0
    /// First attempts that reached the upstream carrying a `task_id`, and the tasks first seen among them
    /// (``TaskTable``): their ratio is the calls a task makes, the fan-out burst credit is detected from.
    var taskCalls: Float = 0
    var tasksStarted: Float = 0
    /// Every event (attempts, denials, queueing), and those that were retries.
    var events: Float = 0
    var retries: Float = 0
    var nearEmpty: Float = 0
    /// Demand events.
    var samples: Int32 = 0
    /// The newest event and demand event times.
    var lastSeenAt = -Double.infinity
    /// The oldest event time of the tick (a gateway's first report may cover more than one tick).
    var firstSeenAt = Double.infinity
    var lastActivityAt = -Double.infinity
    /// What the served usage cost, split by the budget windows in progress it falls in: usage in the
    /// current hour counts in every window, usage earlier today in the day and month, usage earlier
    /// this month in the month only (the windows are UTC calendar periods shared by every tenant).
    var costHour = 0.0
    var costDay = 0.0
    var costMonth = 0.0
    /// The part of the cost from events recent enough to be the current burn rate (within the classifier's long
    /// window): the rest is late reports of old usage.
    var burnCost = 0.0
    /// The first gateways' counts, inline (most tenants are seen by a few gateways); more go to the
    /// classification's overflow buffer.
    var gateways = InlineGateways()
    /// The pool's price (not reset between ticks: kept beside the counters it prices).
    var price: ConsumptionClassification.TokenPrice

    init(price: ConsumptionClassification.TokenPrice) {
        self.price = price
    }

    /// Requests wanted: first attempts (retry 0 or unmarked) of every outcome but a spend cap, and their
    /// tokens (served: used; otherwise estimated) — each request once, however often it was retried.
    var newRequests: Float = 0
    var newTokens: Float = 0
    /// Denials that named the tenant's RPM or TPM bucket.
    var deniedByRPM: Float = 0
    var deniedByTPM: Float = 0
    /// Denials that named no limit at all (other names — concurrency, budgets, circuits — count in neither).
    var deniedUnnamed: Float = 0
    /// Denials (and `queued` reports) that named the concurrency cap (`error_type` `concurrency`).
    var deniedByConcurrency: Float = 0

    /// The requests the gateways settled (served or denied), and their tokens: the attempt-based measures. A
    /// `queued` event is a request still waiting (or given up): it counts in ``newRequests`` only, since a
    /// waiting request's attempt or denial is reported too (with `retry` one higher).
    var demandRequests: Double { Double(servedRequests) + Double(denied) }
    var demandTokens: Double { Double(servedTokens) + Double(deniedTokens) }
    var cost: Double { costHour + costDay + costMonth }
}

/// Up to four gateways' counts for one tenant and upstream in the tick in progress (transient).
struct InlineGateways: Sendable, Hashable {
    static let capacity = 4
    /// Gateway slots (see `ConsumptionClassification.gatewayNames`), −1 when free.
    var slots = SIMD4<Int32>(repeating: -1)
    var demand = SIMD4<Float>(repeating: 0)
    var served = SIMD4<Float>(repeating: 0)
    var tokens = SIMD4<Float>(repeating: 0)

    /// Counts one event for `slot`; false when all four places hold other gateways.
    mutating func count(slot: Int32, demand isDemand: Bool, served isServed: Bool, tokens servedTokens: Float) -> Bool {
        for place in 0..<Self.capacity {
            if slots[place] == slot || slots[place] < 0 {
                slots[place] = slot
                if isDemand { demand[place] += 1 }
                if isServed {
                    served[place] += 1
                    tokens[place] += servedTokens
                }
                return true
            }
        }
        return false
    }
}

/// One event's contribution to a gateway's view of a tenant beyond the inline four, buffered in event
/// order and grouped by track at the tick's end (transient).
struct GatewaySample: Sendable, Hashable {
    var track: UInt32
    var gateway: UInt16
    var demand: Bool
    var served: Bool
    var tokens: Float
}

/// One gateway's view of one tenant on one upstream (for per-gateway slices and drift, SPEC 7).
struct GatewayTrack: Sendable, Hashable, Codable {
    var name: String
    /// Short-window EWMA of demand requests per minute, and of served requests and tokens per minute.
    var demand = 0.0
    var served = PerDimension<Double>(0)
    /// The last tick in which the gateway reported the tenant.
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

    // Exact time-decay EWMAs, per minute (see `ConsumptionClassification`).
    var servedShort = PerDimension<Double>(0)
    var servedLong = PerDimension<Double>(0)
    var demandShort = PerDimension<Double>(0)
    var demandLong = PerDimension<Double>(0)
    var deniedShort = 0.0
    var queuedShort = 0.0
    /// Requests waiting in gateway queues on average (short window; Little's law over `queue_ms`).
    /// Optional: checkpoints written before it existed decode without it.
    var waitingShort: Double?
    /// The most demand (requests, tokens) seen in one tick, decaying over the long window (the clump
    /// of ``TenantObservation/clump``). Optional: older checkpoints decode without it.
    var clump: PerDimension<Double>?
    var deniedLong = 0.0
    var eventsLong = 0.0
    var retriesLong = 0.0
    var nearEmptyLong = 0.0
    var promptLong = 0.0
    var completionLong = 0.0
    /// The highest short-window demand (RPM), decaying over the long window: the peak of the peak-to-average ratio.
    var peakDemand = 0.0
    /// Requests (and their tokens) per minute counted once each, at their first attempt, short and long
    /// window: what the tenant wants, without its retries (``TickCounts/newRequests``). Optional: older
    /// checkpoints decode without them.
    /// Seconds of ticks folded into the rates since the track began (capped): a young track's short
    /// EWMA holds only `1 − e^(−seconds/τ)` of its weight. nil in checkpoints written before it (the
    /// track is then taken as settled).
    var foldedSeconds: Double?
    /// While the track is young (less than a short window folded): the oldest event time seen and the
    /// requests (and tokens) wanted since, counted once each — its exact rate so far. nil once settled, and
    /// in checkpoints written before them.
    var youngSince: Double?
    var youngWanted: PerDimension<Double>?
    /// First attempts with a `task_id` that reached the upstream, and the tasks started among them, per
    /// minute (short window): ``TenantTrack/fansOut``. Optional: older checkpoints decode without them.
    var taskCallsShort: Double?
    var tasksStartedShort: Double?
    /// Attempts (requests and tokens, retries included: what ``demandShort`` counts) per minute over the
    /// fast window (``ClassificationRules/fastWindowSeconds``): how far a blocked tenant's claim may go
    /// while the short window still lags a jump. Optional: older checkpoints decode without it.
    var attemptsFast: PerDimension<Double>?
    /// Requests (and tokens) wanted per minute over the fast window, each once (``wantedShort``'s counts):
    /// with requests reported waiting (`queued`) in them, how far the claim of a tenant held in gateway queues
    /// may go — its attempts count the waiting requests only once the queue lets them through. Optional: older
    /// checkpoints decode without it.
    var wantedFast: PerDimension<Double>?
    var wantedShort: PerDimension<Double>?
    var wantedLong: PerDimension<Double>?
    /// Denials per minute that named the tenant's RPM and TPM buckets (short window): which dimension
    /// holds a constrained tenant back. Optional: older checkpoints decode without it.
    var deniedByLimit: PerDimension<Double>?
    /// Denials per minute that named no limit (short window). Optional: older checkpoints decode without it.
    var deniedUnnamed: Double?
    /// Denials and waits per minute that named the concurrency cap (short window): the `concurrency_bound` alert.
    /// Optional: older checkpoints decode without it.
    var deniedConcurrency: Double?
    /// The published allocation averaged like `servedShort` (same window): what a tenant's use is
    /// compared with when judging whether it fills its allocation — the current allocation would make a
    /// tenant whose allocation just rose look idle until its served rate catches up. Optional: older
    /// checkpoints decode without it.
    var allocatedShort: PerDimension<Double>?
    /// The demand level the engine is given (see `TenantTrack.moveLevel`): it moves only when the
    /// short-window demand leaves it by more than its own noise, or stays on one side for a while.
    /// Optional, like the two below: checkpoints written before it decode without it (the level then
    /// starts at the short-window demand).
    var level: PerDimension<Double>?
    /// Variance of the short-window demand around the long-window one: the level's noise (long window).
    var levelNoise: PerDimension<Double>?
    /// Seconds the short-window demand has stayed beyond the level's deadband on one side (+ above,
    /// − below; 0 when within it).
    var levelDrift: PerDimension<Double>?
    /// The same for the long-window demand: a level left off the tenant's mean by the noise it was set
    /// in is corrected once the long window says so for that long.
    var levelLongDrift: PerDimension<Double>?
    /// Long-window means of the requests wanted per tick and of their square: the index of dispersion
    /// (variance ÷ mean) of the tick counts, 1 for requests arriving independently, the clump size for
    /// requests in clumps — the level's model of its own noise. Optional: older checkpoints decode without.
    var tickCountMean: Double?
    var tickCountSquare: Double?

    /// The demand level the tenant held while active — up at once, down over the long window — and kept
    /// while it is idle: what it is likely to want when it comes back (see `returnedAt`). Optional, like
    /// the two below: older checkpoints decode without them.
    var activeLevel: PerDimension<Double>?
    /// Whether the last tick found the tenant idle, and when it last came back from idle.
    var wasIdle: Bool?
    var returnedAt: Double?
    /// Back from idle: the oldest event time since it came back and the requests (and tokens) wanted since,
    /// counted once each — its exact rate since its return, like a young track's. nil otherwise.
    var returnSince: Double?
    var returnWanted: PerDimension<Double>?
    /// Back from idle: the short-window rate wanted (``wantedShort``) it had decayed to when it came back, and the
    /// instant its EWMA restarted from there — to read the EWMA for what came since, once the exact rate's short
    /// window is over (``TenantTrack/moveLevel(fold:now:rules:windows:claim:blocked:)``). nil after three short
    /// windows, and in checkpoints written before them.
    var returnBase: PerDimension<Double>?
    var returnBaseAt: Double?

    /// Demand events seen (served, denied, queued).
    var samples = 0
    var firstSeenAt: Double
    /// Last event of any kind, and last demand event (event times).
    var lastSeenAt: Double
    var lastActivityAt: Double?
    /// The longest time between two demand events, fading over the long window (``hasStopped(now:shortWindow:)``).
    /// Optional: older checkpoints decode without it.
    var longestQuiet: Double?
    /// The last tick at which its short window held `sparseSamples` requests or more
    /// (``hasStopped(now:shortWindow:)``). Optional: older checkpoints decode without it.
    var lastDenseAt: Double?
    /// Since when demand exceeds the allocation (`sustained_over`), and since when the tenant starves.
    var overSince: Double?
    var starvingSince: Double?
    /// Since when the `concurrency_bound` and `suspect_tenant` alerts hold (nil while they do not). Optional:
    /// older checkpoints decode without them (the alerts then date from the first tick after the restart).
    var concurrencyBoundSince: Double?
    var suspectSince: Double?

    var completionTokens = DecayingHistogram()
    var queueWait = DecayingHistogram()
    var gateways: [GatewayTrack] = []
    var ratchet = RatchetTrack()
    var suspectReasons: [String] = []

    init(key: AllocationKey, at: Double) {
        self.key = key
        firstSeenAt = at
        lastSeenAt = at
        foldedSeconds = 0
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

    /// Adds a tick's costs (split as in ``TickCounts``) to the windows in progress.
    mutating func charge(_ tick: TickCounts, at: Double) {
        // Burn counts recent usage whatever window it fell in: just after a month turns, the last minutes of the
        // previous one are no spend of this one but are the current rate.
        guard tick.cost > 0 || tick.burnCost > 0 else { return }
        tickCost += tick.burnCost
        spent[0] += tick.costHour
        spent[1] += tick.costHour + tick.costDay
        spent[2] += tick.cost
        if lastSpendAt == nil || at > lastSpendAt! { lastSpendAt = at }
    }
}

/// Calls and tokens of one task so far (runaway detection, SPEC 6). `task_id` is the gateway's id,
/// unique per tenant at best, so a task is a tenant and a task id.
struct TaskTrack: Sendable, Hashable, Codable {
    var tenant: String
    var task: String
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
