import AllotCore

/// The Upstream Capacity Observer's memory between ticks, `Codable` so the loop can persist it and a
/// restarted server resumes with its capacity estimates, latency baselines and circuit states
/// instead of starting blind (SPEC 7 "resumes from persisted estimator state").
///
/// Restoring a state and feeding it the same telemetry gives the same reports as the original.
public struct ObserverState: Sendable, Hashable, Codable {
    /// The previous `observe`'s `now`; nil before the first.
    var lastObserveAt: Double?
    /// One per pool, sorted by id.
    var pools: [PoolTrack]

    public init() {
        lastObserveAt = nil
        pools = []
    }

    /// The pools' current capacity estimates `C_est` (before the degrading reduction), by id: what a
    /// restart resumes from.
    public var estimates: [String: PerDimension<Double?>] {
        Dictionary(uniqueKeysWithValues: pools.map { ($0.upstream, $0.estimate) })
    }
}

/// The circuit breaker of one pool (SPEC 4: overload drives the health state and the circuit).
///
/// `closed` → `open` when the short window's share of `overloaded` answers reaches
/// `circuit_open_ratio` (with at least `circuit_min_attempts` attempts; within a short window of its last
/// closing, the share of the attempts since then); `open` → `halfOpen` after
/// 5 s (at most `circuit_quiet_s`) without an overload error, or after `circuit_quiet_s` open while
/// the share is below `circuit_severe_ratio` (a sustained partial overload: the upstream still serves
/// most attempts); `halfOpen` → `closed` after `circuit_quiet_s` half-open, once no overload error came for as
/// long or the share (with at least `circuit_min_attempts` attempts) is below `circuit_open_ratio`, or back
/// to `open` when the share reaches `circuit_severe_ratio`. Both shed `background`; an open
/// circuit at `circuit_severe_ratio` (a severe overload) sheds `batch` and `interactive` too.
enum CircuitPhase: String, Sendable, Hashable, Codable {
    case closed
    case open
    case halfOpen = "half_open"
}

/// A provider's latest `remaining` statement about one dimension, in the header window's own units.
struct RemainingSample: Sendable, Hashable, Codable {
    /// When it was said (event time).
    var at: Double
    var limit: Double
    var remaining: Double
    /// The window the limit counts over, seconds.
    var windowSeconds: Double
}

/// A capacity change the Observer made, kept for the signals while it is recent (or, with `value`, a
/// measurement remembered).
struct CapacityAction: Sendable, Hashable, Codable {
    var at: Double
    var text: String
    /// Optional: checkpoints written before it decode without it.
    var value: Double?

    init(at: Double, text: String, value: Double? = nil) {
        self.at = at
        self.text = text
        self.value = value
    }
}

/// Everything the Observer remembers about one upstream pool. Absent times are nil, never infinite
/// (JSON has no infinity).
struct PoolTrack: Sendable, Hashable, Codable {
    var upstream: String

    /// Header statements remembered per dimension for the short medians: the newest limits that detect a
    /// change, and the `remaining` statements (``recentRemaining``).
    static let statementMemory = 61
    /// Header limits the estimate's start value is the median of (``refreshHeaderLimits()``): under
    /// headers that jitter by ±30 %, the median of 61 moved by ±4 % (one standard error) from tick to
    /// tick and the estimate followed it several times a run; that of 601 moves by about 1 %.
    static let limitMemory = 601

    // MARK: Capacity estimate (per dimension)

    /// `C_est`: nil while neither headers nor the policy gave a starting point.
    var estimate: PerDimension<Double?> = PerDimension(nil)
    /// The start value last applied (header limit, else declared): when it moves, the estimate follows.
    var startValue: PerDimension<Double?> = PerDimension(nil)
    /// What the floor and the probe step are fractions of: the start value, or the estimate before the
    /// first cut when there is none.
    var reference: PerDimension<Double?> = PerDimension(nil)
    /// The provider's limit, per minute: the median of the statements remembered (``refreshHeaderLimits()``).
    var headerLimit: PerDimension<Double?> = PerDimension(nil)
    /// Event time of the newest statement of a limit.
    var headerLimitAt: PerDimension<Double?> = PerDimension(nil)
    /// When any rate-limit header was last seen (event time).
    var headerSeenAt: Double?
    /// The newest `remaining` statement.
    var remaining: PerDimension<RemainingSample?> = PerDimension(nil)
    /// The newest header limits (per minute) and `remaining` statements, oldest first: at most
    /// ``PoolTrack/limitMemory`` limits after a tick (twice that between ticks) and
    /// ``PoolTrack/statementMemory`` `remaining` statements. The estimate starts from the limits' median
    /// (``refreshHeaderLimits()``), so that headers that jitter (a provider's or a proxy's noise) do not
    /// move it while a real change wins within a few statements. nil in checkpoints written before they
    /// existed.
    var recentLimits: PerDimension<[Double]>?
    var recentRemaining: PerDimension<[RemainingSample]>?
    /// Consecutive ticks the header median has stayed beyond its tolerance of the start value (a moved
    /// median is taken for a new limit once it persists, see ``medianTolerance(_:)``). nil in
    /// checkpoints written before it.
    var startPending: PerDimension<Int>?
    /// How many statements the header median in force as the start value was taken from (0 for the declared
    /// capacity): a median of as many statements as it, or fewer, must leave it by √2 times the tolerance (see
    /// ``medianTolerance(_:)``). nil in checkpoints written before it.
    var startCount: PerDimension<Int>?
    /// When (event time) a statement last stated a limit a quarter or more above the statement before it: for a
    /// header window after it, the provider's bucket is still filling to its new size and `limit − remaining` is
    /// not others' use (``PoolEvaluation``'s shared-key reading). nil in checkpoints written before it.
    var limitRaisedAt: PerDimension<Double?>?
    /// Others' use of a shared key, per minute, inferred from the newest fresh `remaining`.
    var othersUse: PerDimension<Double> = PerDimension(0)
    /// The newest served-while-throttled measurement per dimension (per minute, with when it was made):
    /// where the provider last refused. A probe above it moves at 0.35 of the step — the limit was
    /// there a moment ago, and every probe that crossed it at full speed overshot into refusals — until
    /// it is `probe_step` above it without a refusal: the measurement is then disproven.
    /// nil in checkpoints written before it.
    var measuredLimit: PerDimension<CapacityAction?>?
    /// Since when the estimate has been probed up at every tick by full steps (not near a measured limit, not
    /// from the floor) without a refusal: such a probe speeds up (``PoolEvaluation/probeBoost(since:now:)``).
    /// nil in checkpoints written before it.
    var probingSince: PerDimension<Double?>?

    /// Marks `dimension` as probed by a whole step at `now`; returns since when the streak has lasted.
    mutating func probing(_ dimension: RateDimension, at now: Double) -> Double {
        var since = probingSince ?? PerDimension(nil)
        let start = since[dimension] ?? now
        since[dimension] = start
        probingSince = since
        return start
    }
    /// The last multiplicative decrease, and until when further quota errors are attributed to it.
    var lastDecreaseAt: PerDimension<Double?> = PerDimension(nil)
    /// The limit in force (stated, else declared) at the last decrease: a statement a quarter above it is
    /// followed even if it rose in smaller steps. Optional: checkpoints written before it decode without it.
    var startAtDecrease: PerDimension<Double?>?
    var holdUntil: PerDimension<Double?> = PerDimension(nil)
    /// Newest quota-exhaustion evidence attributed to each dimension, and unattributed (event time).
    var lastQuotaAt: PerDimension<Double?> = PerDimension(nil)
    var lastUnattributedQuotaAt: Double?
    /// The newest capacity change per dimension, for the signals.
    var lastAction: PerDimension<CapacityAction?> = PerDimension(nil)

    // MARK: Model version

    var modelVersion: String?
    var modelVersionRef: Int64?
    /// Versions this pool has run (bounded): a version seen before is a mixed roll-out, not a change.
    var seenVersions: [String] = []
    /// The newest change (event time) and whether the next observe still has to act on it.
    var versionChangedAt: Double?
    var versionChangePending = false
    /// A version not run before, and how many events have reported it since (one event's version is no roll-out:
    /// see ``CapacityEstimation/versionConfirmations``). nil in checkpoints written before it.
    var candidateVersion: String?
    var candidateVersionEvents: Int?

    // MARK: Health

    var circuit: CircuitPhase = .closed
    /// When the circuit entered its current phase (tick time).
    var circuitSince: Double?
    /// When it last opened (the `circuit_open` alert's start).
    var circuitOpenedAt: Double?
    var lastOverloadAt: Double?
    var latencyDegrading = false
    var degradingSince: Double?
    /// Until when a latency rise is already explained: the provider stated a lower limit, and the short
    /// window's latency is the warning that came before it.
    var latencyExplainedUntil: Double?
    /// Until when a latency rise is the backlog readmitted after the provider raised the limit it states by a
    /// quarter or more (a quota back from an incident): the calls held back meanwhile all arrive at once. Two short
    /// windows from the raise, so that the answers of the first have left the short window.
    var latencyReadmittedUntil: Double?

    /// Ends a latency degradation: the state and its start.
    mutating func endLatencyDegradation() {
        latencyDegrading = false
        degradingSince = nil
    }
    var throttledSince: Double?
    /// Since when the provider's stated limit has been contradicted by what it serves (``PoolEvaluation``'s
    /// `disbelieveContradictedLimits`); nil when it is not.
    var limitContradictedSince: Double?
    var errorsSince: Double?
    var lastSpendCapAt: Double?
    var spendCapSince: Double?
    var spendCapErrorType: String?
    /// Azure's deployment utilisation from the newest event that reported it, 0…1.
    var providerUtilisation: Double?

    // MARK: Windows

    var firstEventAt: Double?
    var lastEventAt: Double?
    /// Counters and latency per fine slice (the short window).
    var fine: SliceRing<CountSlice>
    /// Latency per coarse slice (the long window's baseline).
    var coarse: SliceRing<LatencySlice>

    init(upstream: String, settings: ObserverSettings) {
        self.upstream = upstream
        fine = PoolTrack.fineRing(settings)
        coarse = PoolTrack.coarseRing(settings)
    }

    /// 12 slices per short window: a 5 s resolution for the default 60 s window.
    static func fineRing(_ settings: ObserverSettings) -> SliceRing<CountSlice> {
        SliceRing(window: settings.shortWindowSeconds, slices: 12)
    }

    /// 15 slices per long window: a 60 s resolution for the default 900 s window.
    static func coarseRing(_ settings: ObserverSettings) -> SliceRing<LatencySlice> {
        SliceRing(window: settings.longWindowSeconds, slices: 15)
    }
}

extension PoolTrack {
    /// The median (the mean of the two middle values for an even count); nil for none.
    static func median(_ values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// How far (relative) the median of `values` may move before it is taken for a change rather than
    /// the noise of the statements: twice its standard error, `1.2533 · σ / √n` with `σ = 1.4826 · MAD`
    /// (the median absolute deviation, robust to a few wild values), and at least 1 %. Statements that
    /// all agree give 1 %: a provider's real change of limit is followed at once. A move beyond it is
    /// followed once it persists for ``startPersistTicks`` ticks, or at once beyond three times it.
    ///
    /// Against a start value that is itself a median of at least as many statements (``startCount``), the two
    /// differ by chance by the standard error of a difference, √2 times one median's, and the tolerance is √2
    /// times this one: under headers that jitter by ±30 %, one median's tolerance let the estimate follow the
    /// medians' wander by about 3 % seven times in half an hour (noisy-signals, seed 1; twice with √2; seeds 1–8:
    /// starved tenant-minutes 2.04 → 1.60, utilisation 97.6 → 98.1 %: a move down is applied at once, the way
    /// back dampened). A median of more statements than the start value is the better estimate, and one
    /// median's tolerance still applies to it: otherwise a quiet pool's first median, of a dozen statements,
    /// stood (842 for a true 900) until the provider cut its limit. So does a median after the memory restarted
    /// (``changedSuffix(_:)``): the start value's statements were the old limit's.
    static let startPersistTicks = 3

    /// Sets ``headerLimit`` from the remembered statements, once per tick: the median of the newest
    /// ``limitMemory``, unless the newest statements show a change of limit (``changedSuffix(_:)``), in
    /// which case the memory restarts from them and the change is followed within a few statements.
    /// (Against the median of all of them, a limit cut by 30 % under headers that jitter by 30 % was never
    /// far enough from the mixture, and took minutes.)
    mutating func refreshHeaderLimits() {
        guard var memory = recentLimits else { return }
        for dimension in RateDimension.allCases where !memory[dimension].isEmpty {
            var values = memory[dimension]
            if values.count > Self.limitMemory { values.removeFirst(values.count - Self.limitMemory) }
            if let changed = Self.changedSuffix(values) {
                values = Array(values.suffix(changed))
                // A change: the statements the start value rests on are the old limit's, no evidence of its noise.
                startCount?[dimension] = 0
            }
            memory[dimension] = values
            headerLimit[dimension] = Self.median(values)
        }
        recentLimits = memory
    }

    /// The shorter runs of newest statements that may show a change before ``statementMemory`` of them do.
    static let changeRuns = [33, 17, 9, 5, 3]

    /// How many of the newest `values` (oldest first) state a new limit, or nil for none:
    /// - all ``statementMemory`` of the newest, when their median is further from that of the older ones
    ///   than three times its own ``medianTolerance(_:)`` (six standard errors);
    /// - else the longest run of ``changeRuns`` whose statements all lie on one side of the older ones' median,
    ///   beyond three times the tolerance of a median of that many (``medianTolerance(_:)``'s formula with the
    ///   spread of the older ones, which are at least as many and at least 5): clean headers that agree on a
    ///   new value are believed after three statements, jittering ones only after a move their jitter could
    ///   not make (±30 % jitter: three statements beyond +96 %, 33 beyond +29 %). Counting statements alone, a
    ///   pool that had shrunk to 9 rpm (a statement every ten seconds or so) stayed at that limit for four
    ///   minutes after the provider stated 900 again, and took as long to believe the drop.
    static func changedSuffix(_ values: [Double]) -> Int? {
        let newest = Array(values.suffix(Self.statementMemory))
        if let older = median(Array(values.dropLast(newest.count))), let recent = median(newest),
            abs(recent - older) > 3 * medianTolerance(newest) * older
        {
            return newest.count
        }
        for run in changeRuns where values.count - run >= max(run, 5) {
            let older = Array(values.dropLast(run))
            guard let center = median(older), center > 0,
                let mad = median(older.map { abs($0 - center) })
            else { continue }
            let tolerance = tolerance(mad: mad, center: center, count: run)
            let newest = values.suffix(run)
            if newest.allSatisfy({ $0 > center * (1 + 3 * tolerance) })
                || newest.allSatisfy({ $0 < center * (1 - 3 * tolerance) })
            {
                return run
            }
        }
        return nil
    }

    static func medianTolerance(_ values: [Double]) -> Double {
        guard values.count > 1, let center = median(values), center > 0 else { return 0.01 }
        guard let mad = median(values.map { abs($0 - center) }) else { return 0.01 }
        return tolerance(mad: mad, center: center, count: values.count)
    }

    /// ``medianTolerance(_:)`` of a median of `count` statements whose spread is `mad` (the median absolute
    /// deviation) around `center`: twice the standard error relative to `center`, at least 1 %.
    static func tolerance(mad: Double, center: Double, count: Int) -> Double {
        let error = 1.2533 * 1.4826 * mad / Double(count).squareRoot()
        return max(0.01, 2 * error / center)
    }
}
