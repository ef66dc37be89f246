import AllotCore
import AllotSignals

/// One pool's evaluation at one tick: reads its windows, moves its capacity estimate, latency and
/// circuit states (rules in ``CapacityEstimation``), and produces its status and alerts.
struct PoolEvaluation {
    var pool: PoolTrack
    let declared: PerDimension<Double?>
    let settings: ObserverSettings
    /// The policy's `alerts.upstream_error_rate`.
    let errorRate: Double
    let now: Double
    /// Seconds since the previous tick (bounded by the short window): the probe's time step.
    let elapsed: Double
    /// The policy's `header_window` per dimension, in seconds.
    let headerWindows: PerDimension<Double>
    private(set) var alerts: [LoopAlert] = []
    private var signals: [String] = []

    init(
        pool: PoolTrack, declared: PerDimension<Double?>?, settings: ObserverSettings, errorRate: Double, now: Double,
        elapsed: Double, headerWindows: PerDimension<Double>
    ) {
        self.pool = pool
        self.declared = declared ?? PerDimension(nil)
        self.settings = settings
        self.errorRate = errorRate
        self.now = now
        self.elapsed = elapsed
        self.headerWindows = headerWindows
    }

    /// What the short window holds.
    struct ShortWindow {
        var slices: [(slice: CountSlice, span: Double)]
        var outcomes = [Int](repeating: 0, count: Outcome.allCases.count)
        var served = PerDimension<Double>(0)
        var coverage = 0.0
        var unparseable = 0
        /// Answers that carried a provider's rate-limit headers.
        var statedAnswers = 0.0
        var latency = [Double](repeating: 0, count: LogLinearScale.latency.count)
        var latencySamples = 0.0

        init(_ slices: [(slice: CountSlice, span: Double)]) {
            self.slices = slices
            for (slice, span) in slices {
                coverage += span
                for index in outcomes.indices { outcomes[index] += Int(slice.outcomes[index]) }  // 8 outcomes
                served.rpm += slice.servedRequests
                served.tpm += slice.servedTokens
                unparseable += Int(slice.unparseableHeaders)
                statedAnswers += Double(slice.statedAnswers)
                slice.latency.merge(into: &latency)
                latencySamples += Double(slice.latency.total)
            }
        }

        /// Served per minute over the window.
        func rate(_ dimension: RateDimension) -> Double { coverage > 0 ? served[dimension] / coverage * 60 : 0 }

        /// Attempts that reached the upstream.
        var attempts: Int {
            Outcome.allCases.reduce(0) { $0 + ($1.reachedUpstream ? outcomes[$1.ordinal] : 0) }
        }

        func count(_ outcome: Outcome) -> Int { outcomes[outcome.ordinal] }

        /// Served per minute over the slices that saw quota errors for `dimension` (or unattributed
        /// ones, when `unattributed`) and ended by `settledBefore`: the rate the upstream delivered while
        /// it was refusing more.
        ///
        /// - Newer slices are left out: an event carries its admission time but is reported when the
        ///   upstream has answered, and a refusal answers at once while a success takes the call's
        ///   latency — the newest slices hold their 429s but not yet all their successes, and would read
        ///   as a collapse.
        /// - Nil until at least `minimumSlices` such slices have settled, unless the provider refused at
        ///   least `heavyShare` of the attempts in them, ``PoolEvaluation/heavyRefusalMinimum`` or more, while we
        ///   attempted at least `heavyAttemptRate` a minute there: a few refusals in one or two slices are as likely
        ///   the edge of a burst meeting the provider's bucket (the rate was fine, the burst was not) as a lower
        ///   limit, while a limit well below our rate refuses a large share at once, and keeps refusing slice after
        ///   slice. Refusals of a pool we hardly use measure nothing of its limit.
        func throttledRate(
            _ dimension: RateDimension, unattributed: Bool, settledBefore: Double, width: Double, minimumSlices: Int,
            heavyShare: Double, heavyAttemptRate: Double
        ) -> Double? {
            var served = 0.0
            var span = 0.0
            var count = 0
            var refused = 0
            var attempts = 0
            for (slice, seconds) in slices
            where (slice.quota(dimension) > 0 || (unattributed && slice.quotaUnattributed > 0))
                && Double(slice.index + 1) * width <= settledBefore
            {
                served += dimension == .rpm ? slice.servedRequests : slice.servedTokens
                span += seconds
                count += 1
                refused += Int(slice.outcomes[Outcome.quotaExhausted.ordinal])
                for outcome in Outcome.allCases where outcome.reachedUpstream {
                    attempts += Int(slice.outcomes[outcome.ordinal])
                }
            }
            let heavy =
                refused >= PoolEvaluation.heavyRefusalMinimum && Double(refused) >= heavyShare * Double(attempts)
                && span > 0 && Double(attempts) / span * 60 >= heavyAttemptRate
            return (count >= minimumSlices || (count > 0 && heavy)) && span > 0 ? served / span * 60 : nil
        }
    }

    mutating func run() -> UpstreamStatus {
        let window = ShortWindow(
            pool.fine.window(settings.shortWindowSeconds, now: now, notBefore: pool.firstEventAt ?? now))
        let believed = pool.headerLimit  // the tick before's, for a statement the service contradicts
        pool.refreshHeaderLimits()
        disbelieveContradictedLimits(window, believed: believed)
        restartOnVersionChange()
        // The circuit first: a latency rise while it sheds for overload is the overload's.
        let circuitShed = evaluateCircuit(window)
        let latency = evaluateLatency(window)
        estimateCapacity(window, latencyP99: latency.short.p99 ?? latency.short.p95)
        let state = evaluateHealth(window)

        // After the estimate: a statement of a lower limit there ends the degradation its warning started.
        if pool.latencyDegrading {
            alerts.append(
                LoopAlert(
                    kind: "upstream_degrading", severity: .warning, upstream: pool.upstream,
                    message: "\(pool.upstream): latency rising against its baseline; safe capacity lowered to "
                        + "\(percent(settings.degradeFactor)) of the estimate",
                    since: pool.degradingSince ?? now))
        }
        let factor = pool.latencyDegrading ? settings.degradeFactor : 1
        let safe = pool.estimate.map { $0.map { $0 * factor } }
        if pool.latencyDegrading, let rpm = pool.estimate.rpm ?? pool.estimate.tpm {
            signals.append(
                "safe capacity lowered to \(percent(factor)) of the estimate while latency degrades"
                    + " (\(Self.format(rpm)) → \(Self.format(rpm * factor)) \(pool.estimate.rpm != nil ? "rpm" : "tpm"))"
            )
        }
        let served = PerDimension<Double>(rpm: window.rate(.rpm), tpm: window.rate(.tpm))
        let utilisation = PerDimension<Double?> { dimension in
            safe[dimension].flatMap { $0 > 0 ? served[dimension] / $0 : nil }
        }
        var outcomes: [String: Int] = [:]
        for outcome in Outcome.allCases where window.count(outcome) > 0 {
            outcomes[outcome.rawValue] = window.count(outcome)
        }
        if window.unparseable > 0 {
            signals.append(
                "\(window.unparseable) unparseable rate-limit headers in the last \(seconds(settings.shortWindowSeconds))"
            )
        }
        if let provider = pool.providerUtilisation {
            signals.append("provider reports deployment utilisation \(percent(provider))")
        }
        return UpstreamStatus(
            upstream: pool.upstream, state: state, signals: signals, declared: declared,
            headerLimit: pool.headerLimit, estimate: safe, confidence: confidence(), served: served,
            utilisation: utilisation, latencyShort: latency.short, latencyLong: latency.long, outcomes: outcomes,
            circuitOpen: pool.circuit != .closed, shed: circuitShed, modelVersion: pool.modelVersion,
            lastEventAt: pool.lastEventAt)
    }

    // MARK: Capacity

    /// A stated limit is believed when it fits what the upstream does: one below `1 / contradictionRatio` of
    /// what was served in the short window, with no quota refusal there, is contradicted by the service itself
    /// (a provider that meant it would be refusing most of those calls). The limit believed before stays in
    /// force (none: the pool is as blind as before the statement) and a warning says so. One event stating
    /// `requests-limit: 1` (a proxy's or a test's) collapsed a 4,000-rpm pool to 0.98 rpm for as long as it
    /// was the only statement, while 1,800 rpm were being served and the pool read healthy. A real cut below
    /// half our rate is refused within seconds: the statement is believed from its first 429.
    static let contradictionRatio = 2.0

    private mutating func disbelieveContradictedLimits(_ window: ShortWindow, believed: PerDimension<Double?>) {
        var contradicted: [String] = []
        if window.count(.quotaExhausted) == 0 {
            // A limit counted over a day is no bound on a minute's rate: only limits of a minute or less are judged.
            for dimension in RateDimension.allCases where headerWindows[dimension] <= 60 {
                // Against what the limit lets through in the window's span, a minute at least: a limit of L a
                // minute admits L at once, so a few calls in the window's first seconds contradict nothing.
                let minutes = max(window.coverage, 60) / 60
                func contradicts(_ limit: Double?) -> Bool {
                    limit.map { $0 * minutes * Self.contradictionRatio < window.served[dimension] } ?? false
                }
                guard let stated = pool.headerLimit[dimension], contradicts(stated) else { continue }
                let fallback = contradicts(believed[dimension]) ? nil : believed[dimension]
                pool.headerLimit[dimension] = fallback
                let kept =
                    fallback.map { "the limit stated before, \(Self.format($0)), stays in force" }
                    ?? declared[dimension].map { "the declared capacity, \(Self.format($0)), stays in force" }
                    ?? "the estimate stays as it was"
                let unit = dimension == .rpm ? "requests" : "tokens"
                contradicted.append(
                    "the provider states \(Self.format(stated)) \(dimension.rawValue) while "
                        + "\(Self.format(window.served[dimension])) \(unit) were served in the last "
                        + "\(seconds(window.coverage)) without a quota refusal: not believed; " + kept)
            }
        }
        guard !contradicted.isEmpty else {
            pool.limitContradictedSince = nil
            return
        }
        if pool.limitContradictedSince == nil { pool.limitContradictedSince = now }
        signals.append(contentsOf: contradicted)
        alerts.append(
            LoopAlert(
                kind: "upstream_limit_contradicted", severity: .warning, upstream: pool.upstream,
                message: "\(pool.upstream): " + contradicted.joined(separator: "; ")
                    + " (a proxy or a misconfigured key may be rewriting the rate-limit headers)",
                since: pool.limitContradictedSince ?? now))
    }

    private mutating func restartOnVersionChange() {
        guard pool.versionChangePending else { return }
        pool.versionChangePending = false
        for dimension in RateDimension.allCases {
            if let start = pool.headerLimit[dimension] ?? declared[dimension] { pool.estimate[dimension] = start }
            // Quota evidence from before the change was about the old version.
            pool.holdUntil[dimension] = pool.versionChangedAt ?? now
            pool.lastDecreaseAt[dimension] = nil
        }
        pool.coarse = PoolTrack.coarseRing(settings)
        pool.endLatencyDegradation()
        let text = "model version changed to \(pool.modelVersion ?? "?"): probing restarted"
        for dimension in RateDimension.allCases where pool.estimate[dimension] != nil {
            pool.lastAction[dimension] = CapacityAction(at: now, text: text)
        }
    }

    /// Settled throttled slices a served-while-throttled measurement needs (see `ShortWindow.throttledRate`);
    /// before that a cut is `decrease_factor` alone.
    static let minimumThrottledSlices = 3
    /// …unless the provider refused at least this share of the attempts in the settled throttled slices and
    /// states no limit in its headers: then one settles it (a burst meeting the provider's bucket refused
    /// 2–14 % in the simulator's scenarios; a limit halved under our rate refuses a third and more). A
    /// provider that states its limit is believed first: the refusals right after it lowered it are the
    /// requests admitted under the old one.
    static let heavyRefusalShare = 0.25
    /// …and at least this many refusals, at an attempt rate of at least ``heavyAttemptShare`` of the estimate: one
    /// refused call of a quiet pool (nothing served that minute) is all of its attempts, and read as a measurement it
    /// cut a 30,000-rpm pool to its floor at once (outside evaluation round 29).
    static let heavyRefusalMinimum = 5
    /// A quarter: a pool's limit halved under a rate at half its estimate still reads as one.
    static let heavyAttemptShare = 0.25

    /// The share of the short window's answers with rate-limit headers from which a pool counts as stating its limit
    /// for the heavy-refusal measurement (``ShortWindow/throttledRate``), unless a refusal said which limit it met.
    static let statedShare = 0.5

    /// The share of the probe step above the last measured limit (``PoolTrack/measuredLimit``). At 0.2 the
    /// step above a measurement that under-read the limit took five minutes (blind-capacity-drop, seeds 1–16:
    /// utilisation 96.8 %, five seeds below 95 %); at 0.35 it takes three (97.7 %, two seeds below 95 %) for
    /// 429s of 0.62 → 0.70 % (one seed of sixteen at 1.1 %); 0.5 gave 98.2 % and 0.74 %.
    static let aboveLimitProbe = 0.35
    /// The probe's speed-up at or above the declared capacity of a pool whose provider never stated a limit.
    static let aboveDeclaredProbe = 2.0
    /// How much faster a probe by full steps goes after `now − since` seconds of them without a refusal: half as
    /// fast again after a minute. Steps of 5 % of the estimate a minute took 570 s to find a blind pool raised from
    /// 600k to 1M TPM while its tenants waited for the room (utilisation 85.9 %); ×1.5 after a minute, 330 s
    /// (92.9 %); ×2, 270 s (94.3 %), but in blind-capacity-drop (seeds 1–16), where a probe that passed an
    /// under-reading cut meets the real limit again, ×2 answered two seeds' attempts with 429s above 1 % (1.11 %),
    /// ×1.5 none (0.96 % at most; mean 0.73 → 0.71 %, utilisation 98.3 → 98.5 %, the lowest seed 93.4 → 95.5 %).
    /// Near a measured limit the probe stays slow (``aboveLimitProbe``) and is no streak, so a pool probed back
    /// toward where it was refused is not sped up until it has passed that point by a step; nor is a probe below
    /// a limit the provider states (its recovery has its own pace, `probe_recover` of the gap).
    static func probeBoost(since: Double, now: Double) -> Double {
        (now - since) / 60 >= 1 ? 1.5 : 1
    }

    /// A stated limit this many times the previous one is followed at once, even after a recent cut.
    static let statedRaise = 1.25

    private mutating func remember(limit: Double, _ dimension: RateDimension) {
        var limits = pool.measuredLimit ?? PerDimension(nil)
        limits[dimension] = CapacityAction(at: now, text: "", value: limit)
        pool.measuredLimit = limits
    }

    /// - Parameter latencyP99: the short window's p99 latency of served attempts (ms): how long the
    ///   newest slices' successes may still be on their way (see `ShortWindow.throttledRate`).
    private mutating func estimateCapacity(_ window: ShortWindow, latencyP99: Double?) {
        let short = settings.shortWindowSeconds
        let width = pool.fine.seconds
        // Calls admitted before this have been answered (and reported) with 99% likelihood: events carry their
        // admission time but arrive after their latency. p99, not p95: on a reasoning-model pool where 40-s calls
        // are a sixth of the calls, p95 is the short calls' 5 s, and the long calls still in flight were missing
        // from our side of the shared-key sum and of the throttled slices (utilisation 94.3 → 95.1%, seeds 1–3;
        // the first minutes still misread some of them, while few long calls have completed). At most the short
        // window less 10 s, so that statements remain to judge.
        let settledBefore = now - min(short - 10, (latencyP99 ?? 0) / 1000)
        // A bare 429 counts against the binding dimension(s).
        let utilisation = PerDimension<Double?> { dimension in
            pool.estimate[dimension].flatMap { $0 > 0 ? window.rate(dimension) / $0 : nil }
        }
        let binding = PerDimension<Bool> { dimension in
            guard let mine = utilisation[dimension] else { return utilisation.rpm == nil && utilisation.tpm == nil }
            let other = utilisation[dimension == .rpm ? .tpm : .rpm] ?? -Double.infinity
            return mine >= other - 0.1
        }
        let unattributedAt = pool.lastUnattributedQuotaAt
        for dimension in RateDimension.allCases {
            // A tick that does not probe by full steps (a cut, a hold, too little use, near a measured limit)
            // ends the streak.
            var probedOn = false
            defer { if !probedOn { pool.probingSince?[dimension] = nil } }
            let name = dimension.rawValue
            let others = sharedUse(dimension, settledBefore: settledBefore)
            pool.othersUse[dimension] = others
            var start = pool.headerLimit[dimension] ?? declared[dimension]
            if let stated = pool.headerLimit[dimension], let previous = pool.startValue[dimension], previous > 0 {
                // Within the statements' own noise, or beyond it only briefly: not a new limit (headers that
                // jitter must not move capacity). Far beyond it, or persistently: a new limit. Noise is that of
                // two medians against a start value of as many statements or more (``PoolTrack/medianTolerance(_:)``).
                let statements = pool.recentLimits?[dimension] ?? []
                let behind = pool.startCount?[dimension] ?? 0
                let tolerance =
                    PoolTrack.medianTolerance(statements) * previous
                    * (behind > 0 && behind >= statements.count ? 2.squareRoot() : 1)
                var pending = pool.startPending ?? PerDimension(0)
                let moved = abs(stated - previous)
                if moved <= tolerance {
                    pending[dimension] = 0
                    start = previous
                } else if moved <= 3 * tolerance, pending[dimension] + 1 < PoolTrack.startPersistTicks {
                    pending[dimension] += 1
                    start = previous
                } else {
                    pending[dimension] = 0
                }
                pool.startPending = pending
            }
            // Where the provider has never stated a limit, the declared capacity is the operator's guess, not a
            // limit: the estimate may probe above it (see the probe below); only refusals bound it.
            let blind = pool.headerLimit[dimension] == nil
            let ceiling = blind ? nil : start.map { max(0, $0 - others) }

            if start != pool.startValue[dimension] {
                if let start {
                    let recentCut =
                        (pool.lastDecreaseAt[dimension] ?? -Double.infinity) >= now - settings.longWindowSeconds
                    // A provider that raises the limit it states by a quarter or more has changed something (an
                    // incident over, a tier upgrade): the estimate follows at once, whatever was cut before —
                    // the next quota errors cut again if the statement is wrong. A cut still wins over a limit
                    // stated all along (evidence beats a statement) and over small moves. (A pool back from 450
                    // to 1,500 rpm took two minutes to probe up.)
                    // A quarter above the last statement, or above the one in force at the cut: a provider raising
                    // its limit from 500 to 1,000 rpm in steps of 100 a minute stayed followed by probing alone,
                    // the estimate four minutes behind (utilisation 84 %).
                    func raisedAbove(_ earlier: Double?) -> Bool {
                        earlier.map { start >= $0 * Self.statedRaise } ?? false
                    }
                    let atCut = recentCut ? pool.startAtDecrease?[dimension] ?? nil : nil
                    let raised =
                        pool.headerLimit[dimension] != nil
                        && (raisedAbove(pool.startValue[dimension]) || raisedAbove(atCut))
                    // A statement that lowers the estimate is a decrease like a quota cut: the refusals until the
                    // lower allocations are in force belong to it and cut no further (a 30-s tick saw a drop to a
                    // stated 700 and its own 429s at once, and cut to 665).
                    if let estimate = pool.estimate[dimension], start < estimate {
                        pool.holdUntil[dimension] = now + settings.decreaseHoldSeconds
                        // The latency that rose before it was the warning of this drop, and the short window
                        // still holds it: lowering the safe capacity on top cut the new limit to 80% for the
                        // minute the window took to clear (a stated 1,500 → 1,000 held at 800).
                        pool.latencyExplainedUntil = now + settings.shortWindowSeconds
                        if pool.latencyDegrading { pool.endLatencyDegradation() }
                    }
                    if pool.estimate[dimension] == nil || !recentCut || raised {
                        pool.estimate[dimension] = start
                        // The calls held back under the lower limit arrive at once and drain the provider's bucket:
                        // their latency is that backlog's, not lost capacity. Read as degradation, a quota back from
                        // 75 to 1,500 rpm was cut to 1,200 for 50 s at 18 % utilisation (outside evaluation round 35).
                        // A degradation this tick's latency started ends (latency is read before the estimate); one
                        // that began before the raise is real and stays.
                        // Two short windows: the backlog's answers of the first stay in the short window for the
                        // second (review: answers slow for 50 s after a raise degraded the pool at 65 s, one window).
                        if raised {
                            pool.latencyReadmittedUntil = now + 2 * settings.shortWindowSeconds
                            if pool.latencyDegrading, pool.degradingSince == now { pool.endLatencyDegradation() }
                        }
                        // The cut is superseded: its refusals, still in the window, do not measure the new limit.
                        if raised, recentCut {
                            pool.lastDecreaseAt[dimension] = nil
                            pool.startAtDecrease?[dimension] = nil
                        }
                        let source =
                            pool.headerLimit[dimension] != nil ? "the provider's limit" : "the declared capacity"
                        pool.lastAction[dimension] = CapacityAction(
                            at: now, text: "\(name) estimate set to \(source), \(Self.format(start))")
                    } else if let estimate = pool.estimate[dimension], estimate > start {
                        pool.estimate[dimension] = start
                    }
                }
                pool.startValue[dimension] = start
                var counts = pool.startCount ?? PerDimension(0)
                counts[dimension] = pool.headerLimit[dimension] != nil ? pool.recentLimits?[dimension].count ?? 0 : 0
                pool.startCount = counts
            }
            if let start {
                pool.reference[dimension] = start
            } else if pool.reference[dimension] == nil {
                pool.reference[dimension] = pool.estimate[dimension]
            }
            guard let estimate = pool.estimate[dimension] else { continue }
            let floor = settings.capacityFloor * (pool.reference[dimension] ?? estimate)

            if let ceiling, estimate > ceiling {
                pool.estimate[dimension] = max(floor, ceiling)
                pool.lastAction[dimension] = CapacityAction(
                    at: now,
                    text: "another client uses ~\(Self.format(others)) \(name) of the shared key: estimate "
                        + "\(Self.format(estimate)) → \(Self.format(max(floor, ceiling)))")
                continue
            }

            var evidence = pool.lastQuotaAt[dimension]
            if binding[dimension], let unattributedAt, unattributedAt > (evidence ?? -Double.infinity) {
                evidence = unattributedAt
            }
            // The estimate in requests a minute (tokens by the window's tokens per served call; unknown with none
            // served): a heavy share of refusals measures a lower limit only where our attempts came near it.
            let tokensPerCall = window.served.rpm > 0 ? window.served.tpm / window.served.rpm : 0
            let requestEstimate =
                dimension == .rpm ? estimate : tokensPerCall > 0 ? estimate / tokensPerCall : .infinity
            // A heavy share of refusals settles a measurement at once where the provider states no limit — or states
            // it on less than half of the window's answers (``statedShare``) while none of the window's refusals said
            // which limit they met: headers on one answer in twenty (round 44's `s24`) left every cut after a halving
            // to wait for three settled slices, and 1.05–1.09 % of the attempts were refused (seeds 1–8; now
            // 0.80–0.84 %).
            let statesLimit =
                (pool.headerLimitAt[dimension] ?? -Double.infinity) >= now - short
                && ((pool.lastQuotaAt[dimension] ?? -Double.infinity) >= now - short
                    || window.statedAnswers >= Self.statedShare * Double(window.attempts))
            let served =
                evidence.map { $0 >= now - short } ?? false
                ? window.throttledRate(
                    dimension, unattributed: binding[dimension], settledBefore: settledBefore, width: width,
                    minimumSlices: Self.minimumThrottledSlices,
                    heavyShare: statesLimit ? .infinity : Self.heavyRefusalShare,
                    heavyAttemptRate: Self.heavyAttemptShare * requestEstimate) : nil
            if let evidence, pool.lastDecreaseAt[dimension] != nil,
                evidence <= pool.holdUntil[dimension] ?? -Double.infinity, let served, max(floor, served) < estimate
            {
                // Within the hold, no further multiplicative cut; but throttled slices that have settled since
                // the cut measure what the upstream delivered, and the estimate comes down to that.
                pool.estimate[dimension] = max(floor, served)
                remember(limit: served, dimension)
                pool.lastAction[dimension] = CapacityAction(
                    at: now,
                    text:
                        "quota exhausted: \(name) estimate \(Self.format(estimate)) → \(Self.format(max(floor, served)))"
                        + " (served \(Self.format(served)) while throttled, now settled)")
                continue
            }
            if let evidence, evidence > pool.holdUntil[dimension] ?? -Double.infinity, evidence >= now - short {
                if let served, served >= estimate {
                    // The upstream served at least the estimate while refusing: the refusals are traffic beyond
                    // what Allot allocated (a gateway ignoring its slice, another client of the key), and a lower
                    // estimate would only cut the tenants that keep to theirs. Held, not cut (outside evaluation
                    // round 28: a rogue gateway's 429s drove a pool serving 98–116 rpm from 98 to 27.7 by compounded
                    // cuts). The hold keeps the next refusals from a fresh cut before they are measured again.
                    pool.holdUntil[dimension] = now + settings.decreaseHoldSeconds
                    pool.lastAction[dimension] = CapacityAction(
                        at: now,
                        text: "quota exhausted while serving \(Self.format(served)) \(name), at or above the "
                            + "estimate \(Self.format(estimate)): held (traffic beyond the allocation)")
                    continue
                }
                let target = min(estimate * settings.decreaseFactor, served ?? estimate * settings.decreaseFactor)
                let cut = max(floor, target)
                pool.estimate[dimension] = cut
                if let served, served <= estimate * settings.decreaseFactor { remember(limit: served, dimension) }
                pool.lastDecreaseAt[dimension] = now
                var atDecrease = pool.startAtDecrease ?? PerDimension(nil)
                atDecrease[dimension] = pool.startValue[dimension]
                pool.startAtDecrease = atDecrease
                pool.holdUntil[dimension] = now + settings.decreaseHoldSeconds
                pool.lastAction[dimension] = CapacityAction(
                    at: now,
                    text: "quota exhausted: \(name) estimate \(Self.format(estimate)) → \(Self.format(cut))"
                        + (served.map { " (served \(Self.format($0)) while throttled)" } ?? ""))
                continue
            }

            let quiet =
                (pool.lastQuotaAt[dimension] ?? -Double.infinity) < now - short
                && (unattributedAt ?? -Double.infinity) < now - short && now >= pool.holdUntil[dimension] ?? now
            let used = window.rate(dimension) / max(estimate, .leastNonzeroMagnitude)
            let room = ceiling.map { estimate < $0 } ?? true
            // Quiet near the floor (below twice it) is evidence enough: allocations split from a few percent of
            // the reference over many tenants and gateways can admit nothing at all, and without traffic
            // utilisation never reads high — the estimate stayed at the floor for good (a 3-rpm pool behind 32
            // gateways). Above twice the floor traffic flows again, and utilisation judges.
            let atFloor = estimate < 2 * floor
            // Toward a limit the provider states (freshly), at least `probe_recover` of the gap per minute.
            let stated =
                (pool.headerLimitAt[dimension] ?? -Double.infinity) >= now - short ? ceiling : nil
            let gap = stated.map { max(0, $0 - estimate) } ?? 0
            // Below a limit the provider states, using half the estimate is evidence enough: the estimate sits
            // there only because of a cut (a hypothesis the next quota errors confirm), and the served rate
            // follows each step up with the window's lag, so at 90 % the recovery advanced one tick in seven (a
            // cut to 333 of a stated 1500 took ten minutes to undo).
            let enough = gap > 0 ? CapacityEstimation.evidenceUtilisation : settings.probeUtilisation
            // Below a limit the provider states, with our own gateways turning demand away and no quota errors,
            // low use is our holding back, not evidence: an estimate cut below what its allocations can pass
            // starves itself of the use that would raise it. (A 45k-TPM pool whose calls carry tens of thousands
            // of tokens: cut to 16k after a storm, its tenants' slices could no longer admit one call, and it
            // stayed there — 44 % utilisation for twelve minutes.)
            // Above the declared capacity of a pool that states no limit: only while our own gateways turn demand
            // away; as below a stated limit, half the estimate used is then evidence enough.
            let aboveDeclared = blind && estimate >= (start ?? .infinity)
            let heldBack = (gap > 0 || aboveDeclared) && window.count(.deniedLocal) > 0
            let wanted = !aboveDeclared || (heldBack && used >= CapacityEstimation.evidenceUtilisation)
            if quiet, room, wanted, pool.circuit == .closed, !pool.latencyDegrading,
                used >= enough || atFloor || heldBack, elapsed > 0
            {
                // Without any stated limit, after a quota cut within the long window the step is a share of the
                // estimate, not of the declared capacity: a declared capacity twice the real one made every
                // probe overshoot by a tenth a minute (blind capacity drop: 107 of 243 refusals).
                let measured =
                    blind && (pool.lastDecreaseAt[dimension] ?? -Double.infinity) >= now - settings.longWindowSeconds
                let unit = measured || aboveDeclared ? estimate : (pool.reference[dimension] ?? estimate)
                // Above where the provider refused within the long window: about a third of the step — up to one step
                // above it. Passed by a step with no refusal, the measurement is disproven: served while
                // throttled under-reads a limit met in a transient (blind capacity drop, seed 8: cut to 457 of
                // a true 600, then a fifth of a step for the whole long window — 82 % utilisation).
                let known = pool.measuredLimit?[dimension] ?? nil
                let nearLimit =
                    measured
                    && known.map {
                        $0.at >= now - settings.longWindowSeconds && estimate >= $0.value ?? .infinity
                            && estimate < ($0.value ?? .infinity) * (1 + settings.probeStep)
                    }
                        ?? false
                // From near the floor without traffic, steps of the reference: what was measured there (nothing
                // served) is no limit to creep above.
                let fromFloor = used < enough && !heldBack
                var boost = 1.0
                // Only where the provider states no limit: below a stated one the recovery already takes
                // `probe_recover` of the gap a minute, and in small pools of large calls the statement sits above
                // what bursts let through (a 60-rpm pool: 429s 3.31 → 3.69 % with the speed-up there).
                if !fromFloor, !nearLimit, stated == nil {
                    probedOn = true
                    // Above the declared capacity nothing says where the limit is, and the first refusal bounds it:
                    // steps twice as large (a blind pool of 900 declared at 450, seeds 1-8: utilisation 86.5 → 90.0 %,
                    // 429s 0.25 → 0.36 %, sustained starvation 6.1 → 0.6 tenant-minutes).
                    boost =
                        Self.probeBoost(since: pool.probing(dimension, at: now), now: now)
                        * (aboveDeclared ? Self.aboveDeclaredProbe : 1)
                }
                let step =
                    fromFloor
                    ? settings.probeStep * (pool.reference[dimension] ?? estimate) * elapsed / 60
                    : max(
                        settings.probeStep * unit * (nearLimit ? Self.aboveLimitProbe : boost),
                        settings.probeRecover * gap) * elapsed / 60
                let raised = min(ceiling ?? .infinity, estimate + step)
                pool.estimate[dimension] = raised
                let why =
                    aboveDeclared && boost > 1
                    ? " (steps ×\(Self.format(boost)) above the declared capacity, no limit stated)"
                    : boost > 1 ? " (steps ×\(Self.format(boost)) after a minute of probing without a refusal)" : ""
                pool.lastAction[dimension] = CapacityAction(
                    at: now,
                    text: (!fromFloor
                        ? "probing up: \(name) utilisation \(percent(used)) with no quota errors, estimate "
                        : "probing up from the floor: \(name) no quota errors for a short window, estimate ")
                        + "\(Self.format(estimate)) → \(Self.format(raised))" + why)
            } else if used < CapacityEstimation.evidenceUtilisation, window.coverage > 0 {
                signals.append("\(name) utilisation \(percent(used)) is below 50%: no evidence to probe up")
            }
        }
        for dimension in RateDimension.allCases {
            if let action = pool.lastAction[dimension], action.at >= now - short { signals.append(action.text) }
        }
    }

    /// Others' use of a shared key per minute, from the fresh `remaining` statements: the provider's used
    /// amount (`limit − remaining`) minus what we served in the header window before it (slices rounded
    /// outward, so our own traffic is never under-counted). Zero when not measurable (stale statement, a
    /// window longer than the short window, a pool not watched for the whole header window — our own earlier
    /// traffic would be missing) or within `shared_tolerance`.
    ///
    /// Two guards against reading our own burst as another client:
    /// - *Our* use is the most we served over the last 10, 20, 30 s or the whole header window before the
    ///   statement, each scaled to the window: a provider whose bucket is shorter than its stated window (a
    ///   token bucket of ten seconds, reported per minute) reads a burst that drained it as a minute's use;
    ///   a client that really shares the key shows in every sub-window too.
    /// - Only statements made before `settledBefore` count: a success is reported after its latency, so
    ///   at the tick right after a burst most of it is still missing from our side of the sum. (Overload
    ///   scenario: after five minutes of shedding, the backlog's first burst — 455 attempts in 10 s —
    ///   read as "another client uses ~1150 rpm" and cut the estimate 1344 → 350 of a true 1500.)
    private func sharedUse(_ dimension: RateDimension, settledBefore: Double) -> Double {
        // The median over the recent fresh statements (one alone before they were remembered), so that
        // `remaining` values that jitter do not read as another client.
        let samples = pool.recentRemaining?[dimension] ?? pool.remaining[dimension].map { [$0] } ?? []
        var others: [Double] = []
        var limit = 0.0
        let width = pool.fine.seconds
        // For a header window after the stated limit rose by a quarter or more, the provider's bucket is still
        // filling to its new size and `limit − remaining` measures that, not another client (round 14: a pool back
        // from 6 to 600 rpm read "another client uses ~266 rpm", and the estimate fell to its floor, 0.3 rpm, for
        // three minutes).
        let raisedAt = pool.limitRaisedAt?[dimension] ?? nil
        for sample in samples {
            guard sample.at >= now - settings.shortWindowSeconds, sample.at <= settledBefore,
                sample.windowSeconds <= settings.shortWindowSeconds + 1e-9,
                let first = pool.firstEventAt, first <= sample.at - sample.windowSeconds,
                raisedAt.map({ sample.at - sample.windowSeconds >= $0 }) ?? true
            else { continue }
            let from = pool.fine.index(of: sample.at - sample.windowSeconds)
            let to = pool.fine.index(of: sample.at)
            // Served per slice, newest first, over the header window.
            var served = [Double](repeating: 0, count: Int(to - from) + 1)
            for slice in pool.fine.slots where slice.index >= from && slice.index <= to {
                served[Int(to - slice.index)] = dimension == .rpm ? slice.servedRequests : slice.servedTokens
            }
            var ours = 0.0
            var sum = 0.0
            for (position, amount) in served.enumerated() {
                sum += amount
                let covered = Double(position + 1) * width
                // Sub-windows of at least 10 s (and two slices); the whole window as it is.
                if position == served.count - 1 {
                    ours = max(ours, sum)
                } else if covered >= 10 - 1e-9, position >= 1 {
                    ours = max(ours, sum * sample.windowSeconds / covered)
                }
            }
            others.append(max(0, sample.limit - sample.remaining - ours) * 60 / sample.windowSeconds)
            limit = max(limit, sample.limit * 60 / sample.windowSeconds)
        }
        guard let median = PoolTrack.median(others) else { return 0 }
        return median > settings.sharedTolerance * limit ? median : 0
    }

    // MARK: Latency

    private mutating func evaluateLatency(_ window: ShortWindow) -> (
        short: LatencyPercentiles, long: LatencyPercentiles
    ) {
        let scale = LogLinearScale.latency
        var long = [Double](repeating: 0, count: scale.count)
        var baseline = [Double](repeating: 0, count: scale.count)
        var longSamples = 0.0
        var baselineSamples = 0.0
        var baselineSpan = 0.0
        var baselineTokens = 0.0
        // The baseline excludes the coarse slices the short window overlaps.
        let recent = pool.coarse.index(of: now - settings.shortWindowSeconds)
        for (slice, span) in pool.coarse.window(
            settings.longWindowSeconds, now: now, notBefore: pool.firstEventAt ?? now)
        {
            slice.latency.merge(into: &long)
            longSamples += Double(slice.latency.total)
            if slice.index < recent {
                slice.latency.merge(into: &baseline)
                baselineSamples += Double(slice.latency.total)
                baselineTokens += slice.servedTokens ?? 0
                baselineSpan += span
            }
        }
        func percentiles(_ counts: [Double], _ total: Double) -> LatencyPercentiles {
            LatencyPercentiles(
                p50: scale.quantile(0.5, of: counts, total: total, integral: false),
                p95: scale.quantile(0.95, of: counts, total: total, integral: false),
                p99: scale.quantile(0.99, of: counts, total: total, integral: false), samples: Int(total))
        }
        let shortPercentiles = percentiles(window.latency, window.latencySamples)
        let minimum = Double(settings.latencyMinSamples)
        if window.latencySamples >= minimum, baselineSamples >= minimum, let recentP95 = shortPercentiles.p95,
            let baseP95 = scale.quantile(0.95, of: baseline, total: baselineSamples, integral: false), baseP95 > 0
        {
            let ratio = recentP95 / baseP95
            // Served attempts per second, now and in the baseline: a latency rise that comes with a
            // rise of our own load is our queueing at the upstream, not lost capacity.
            let load = window.coverage > 0 ? window.latencySamples / window.coverage : 0
            let baselineLoad = baselineSpan > 0 ? baselineSamples / baselineSpan : 0
            let tokenLoad = window.coverage > 0 ? window.served.tpm / window.coverage : 0
            let baselineTokenLoad = baselineSpan > 0 ? baselineTokens / baselineSpan : 0
            let tokensRose = baselineTokenLoad > 0 && tokenLoad > (1 + settings.latencyLoadRise) * baselineTokenLoad
            let loadRose = load > (1 + settings.latencyLoadRise) * baselineLoad || tokensRose
            let comparison =
                "short-window p95 \(Self.format(recentP95)) ms vs baseline p95 \(Self.format(baseP95)) ms"
                + " (×\(Self.format(ratio, digits: 2)))"
            if !pool.latencyDegrading, ratio >= settings.latencyRatio {
                if loadRose {
                    signals.append(
                        comparison + " while "
                            + (load > (1 + settings.latencyLoadRise) * baselineLoad
                                ? "served attempts rose \(Self.format(baselineLoad * 60)) → \(Self.format(load * 60))"
                                : "served tokens rose \(Self.format(baselineTokenLoad * 60)) → \(Self.format(tokenLoad * 60))")
                            + " per minute: our own load, not degradation")
                } else if window.count(.quotaExhausted) > 0 {
                    // Refusals in the same window: the upstream is saturated, and latency grows as its bucket
                    // drains — the quota errors judge that; lowering the safe capacity on top cut it twice (a
                    // 60-rpm pool at its limit: estimate 48, then 38 for a minute).
                    signals.append(comparison + " while the upstream answers 429: saturation, not degradation")
                } else if now < pool.latencyExplainedUntil ?? -Double.infinity {
                    // Whether the latency warned of the drop or came with it (a pool turned contended), the stated
                    // limit is already the estimate: not a second cut.
                    signals.append(
                        comparison + " after the provider stated a lower limit: latency that goes with that drop, "
                            + "already in the estimate")
                } else if now < pool.latencyReadmittedUntil ?? -Double.infinity {
                    signals.append(
                        comparison + " just after the provider raised its limit: the backlog readmitted, not lost "
                            + "capacity")
                } else if pool.circuit != .closed
                    ? window.count(.overloaded) > 0
                    : now - (pool.circuitSince ?? -Double.infinity) < settings.shortWindowSeconds
                {
                    // The upstream answers overload errors and the circuit is shedding for them: the latency is
                    // that overload (and the backlog readmitted after it), which the circuit handles. Lowering the
                    // safe capacity as well cut every allocation to 80% after each episode of a flaky region. So for a
                    // short window after the circuit closed, while its latency samples still hold that backlog: at the
                    // tick it closed after a total outage the same p95 cut the estimate to 80% for a minute (outside
                    // evaluation round 16, every seed).
                    let closedAgo = seconds(now - (pool.circuitSince ?? now))
                    signals.append(
                        comparison
                            + (pool.circuit != .closed
                                ? " while the upstream is overloaded: the circuit's, not lost capacity"
                                : " just after an overload (the circuit closed \(closedAgo) ago): its backlog, "
                                    + "not lost capacity"))
                } else {
                    pool.latencyDegrading = true
                    pool.degradingSince = now
                }
            } else if pool.latencyDegrading, ratio < settings.latencyRecoverRatio {
                pool.endLatencyDegradation()
            }
            if pool.latencyDegrading || (ratio >= settings.latencyRecoverRatio && !loadRose) {
                signals.append(comparison)
            }
        }
        return (shortPercentiles, percentiles(long, longSamples))
    }

    // MARK: Health

    /// Seconds without an overload error after which an open circuit goes half-open (at most `circuit_quiet_s`):
    /// the overload is over. A flaky region refusing 60% for 20 s every 80 s kept `batch` shed (as an open circuit
    /// then did) for the 30 s after each episode too; its backlog, readmitted all at once, met the provider's
    /// bucket in a burst of 429s that cut the estimate episode after episode (seeds 1–4: utilisation 75 → 85%,
    /// 429s 2.2 → 0%, starved tenant-minutes 42 → 12). Five seconds, not ten: after a total outage the severe
    /// circuit sheds every class, so nothing is sent until it half-opens, and the first ten seconds of the
    /// provider's recovery went unused (outside evaluation round 16, seeds 1–4: a 2-minute outage 18.4 → 17.1
    /// starved tenant-minutes, utilisation 84.0 → 84.5%; a 30-s one after it 30.8 → 27.4; the other overload
    /// stories and the built-ins identical).
    static let overloadEndedSeconds = 5.0

    /// Moves the circuit breaker and returns the task classes to shed.
    private mutating func evaluateCircuit(_ window: ShortWindow) -> [String] {
        let attempts = window.attempts
        let overloads = window.count(.overloaded)
        let ratio = attempts > 0 ? Double(overloads) / Double(attempts) : 0
        let lastOverload = pool.lastOverloadAt ?? -Double.infinity
        switch pool.circuit {
        case .closed:
            // Within a short window of its last closing (`circuitSince`), the attempts since then must show the share
            // too: the window remembers an outage for a minute after it ended, and a circuit closed after one reopened
            // on those refusals 5 s later and shed for another 70 s (outside evaluation round 16, after every total
            // outage). Both, not the recent attempts alone: fewer of them, their share is noisier, and a chronic 15 %
            // reopened on it more often (chronic-overload 4.8 → 5.1 starved tenant-minutes).
            var recentShare = true
            if let closedAt = pool.circuitSince, now - closedAt < settings.shortWindowSeconds {
                let since = ShortWindow(pool.fine.window(now - closedAt, now: now, notBefore: closedAt))
                recentShare =
                    since.attempts >= settings.circuitMinAttempts
                    && Double(since.count(.overloaded)) >= settings.circuitOpenRatio * Double(since.attempts)
            }
            if attempts >= settings.circuitMinAttempts, ratio >= settings.circuitOpenRatio, recentShare {
                pool.circuit = .open
                pool.circuitSince = now
                pool.circuitOpenedAt = now
            }
        case .open:
            // Quiet for `overloadEndedSeconds` (the overload is over), or open for `circuit_quiet_s` while the
            // overload is below severe: a provider refusing a third of the attempts for ten minutes still serves
            // two thirds. Half-open reopens if it turns severe.
            if now - lastOverload >= min(settings.circuitQuietSeconds, Self.overloadEndedSeconds)
                || (now - (pool.circuitSince ?? now) >= settings.circuitQuietSeconds
                    && ratio < settings.circuitSevereRatio)
            {
                pool.circuit = .halfOpen
                pool.circuitSince = now
            }
        case .halfOpen:
            if attempts >= settings.circuitMinAttempts, ratio >= settings.circuitSevereRatio {
                pool.circuit = .open
                pool.circuitSince = now
            } else if now - (pool.circuitSince ?? now) >= settings.circuitQuietSeconds,
                now - lastOverload >= settings.circuitQuietSeconds
                    || (attempts >= settings.circuitMinAttempts && ratio < settings.circuitOpenRatio)
            {
                // Quiet, or refusing less than it takes to open (over enough attempts): a chronic error rate below
                // the opening share is not an overload shedding helps, and would not have opened the circuit
                // without the blip before it. (Waiting for a quiet `circuit_quiet_s` alone, a steady 8 % of 503s —
                // one every second — kept `background` shed for the rest of a 15-minute run.) A share hovering at
                // the opening one cycles no faster than the timers allow: `circuit_quiet_s` open, as long half-open.
                // Closing below half the opening share instead kept a steady 15 % shedding for 14 minutes after
                // noise opened the circuit (chronic-overload seed 4: 29.0 starved tenant-minutes against 8.2).
                pool.circuit = .closed
                pool.circuitSince = now
                pool.circuitOpenedAt = nil
            }
        }
        var shed: [TaskClass] = []
        switch pool.circuit {
        case .closed:
            break
        case .open:
            // Below severe only `background`, as half-open: an overload is the provider's, shared with all its
            // customers, and the attempts it refuses cost nothing but the client's backoff, while a shed class's
            // tasks wait out their deadlines. Shedding `batch` too, twelve scenarios of 60–90 % refusals starved
            // 229 and 227 tenant-minutes (seeds 1, 2) where `background` alone starves 202 and 202, the random
            // scenarios 290 and 270 where it starves 282 and 260, and a region refusing half the attempts for 30 s
            // every 2 min ran at 90.8 % utilisation where it runs at 97.7 % (docs: policies/README.md).
            shed = ratio >= settings.circuitSevereRatio ? [.background, .batch, .interactive] : [.background]
        case .halfOpen:
            shed = [.background]
        }
        let names = shed.map(\.rawValue)
        if pool.circuit != .closed {
            let phase = pool.circuit == .open ? "circuit open" : "circuit half-open (probing)"
            signals.append(
                "overloaded: \(overloads) of \(attempts) attempts (\(percent(ratio))) in the last "
                    + "\(seconds(settings.shortWindowSeconds)); \(phase), shedding \(names.joined(separator: ", "))")
            alerts.append(
                LoopAlert(
                    kind: "circuit_open", severity: .critical, upstream: pool.upstream,
                    message: "\(pool.upstream) is overloaded: \(phase); gateways fail fast "
                        + names.joined(separator: ", "),
                    since: pool.circuitOpenedAt ?? now))
        }
        return names
    }

    private mutating func evaluateHealth(_ window: ShortWindow) -> UpstreamState {
        let attempts = window.attempts
        let short = settings.shortWindowSeconds
        let quota = window.count(.quotaExhausted)
        if quota > 0 {
            if pool.throttledSince == nil { pool.throttledSince = now }
            signals.insert(
                "quota exhausted: \(quota) of \(attempts) attempts answered 429 in the last \(seconds(short))", at: 0)
            alerts.append(
                LoopAlert(
                    kind: "upstream_throttled", severity: .warning, upstream: pool.upstream,
                    // What happened, not what the estimator did about it: a 429 stating a limit sets the estimate
                    // to it, one that states none cuts it, and one within the hold after a change does neither
                    // (round 21: "capacity estimate cut" while the estimate sat at the stated limit).
                    message: "\(pool.upstream) answers 429 (quota exhausted): \(quota) of \(attempts) attempts in the "
                        + "last \(seconds(short)); the capacity estimate follows (GET /v1/upstreams)",
                    since: pool.throttledSince ?? now))
        } else {
            pool.throttledSince = nil
        }

        let errors = window.count(.serverError) + window.count(.timeout)
        let failing = attempts >= settings.circuitMinAttempts && Double(errors) / Double(attempts) >= errorRate
        if failing {
            if pool.errorsSince == nil { pool.errorsSince = now }
            signals.append(
                "server errors and timeouts: \(errors) of \(attempts) attempts "
                    + "(\(percent(Double(errors) / Double(attempts)))) in the last \(seconds(short))")
            alerts.append(
                LoopAlert(
                    kind: "upstream_errors", severity: .warning, upstream: pool.upstream,
                    message: "\(pool.upstream): \(percent(Double(errors) / Double(attempts))) of attempts fail "
                        + "with server errors or timeouts",
                    since: pool.errorsSince ?? now))
        } else {
            pool.errorsSince = nil
        }

        if let last = pool.lastSpendCapAt, last >= now - short {
            if pool.spendCapSince == nil { pool.spendCapSince = now }
            let type = pool.spendCapErrorType.map { " (\($0))" } ?? ""
            signals.append("spend cap reached\(type): retrying cannot help; capacity unchanged")
            alerts.append(
                LoopAlert(
                    kind: "spend_cap", severity: .critical, upstream: pool.upstream,
                    message: "\(pool.upstream): the provider refuses on a spend or billing cap\(type); "
                        + "raise the cap with the provider",
                    since: pool.spendCapSince ?? now))
        } else {
            pool.spendCapSince = nil
        }

        if pool.circuit != .closed { return .overloaded }
        if quota > 0 { return .throttled }
        if pool.latencyDegrading || failing { return .degrading }
        return .healthy
    }

    private func confidence() -> Double {
        let long = now - settings.longWindowSeconds
        var source = 0.3
        if let seen = pool.headerSeenAt, seen >= long {
            source = 1
        } else if declared.rpm != nil || declared.tpm != nil {
            source = 0.6
        }
        let recentCut = RateDimension.allCases.contains { (pool.lastDecreaseAt[$0] ?? -Double.infinity) >= long }
        let stability = recentCut ? 0.75 : 1
        let version = (pool.versionChangedAt ?? -Double.infinity) >= long ? 0.5 : 1
        return source * stability * version
    }

    // MARK: Formatting

    static func format(_ value: Double, digits: Int = 1) -> String { SignalText.number(value, digits: digits) }

    private func percent(_ fraction: Double) -> String { SignalText.percent(fraction) }

    private func seconds(_ value: Double) -> String { SignalText.seconds(value) }
}
