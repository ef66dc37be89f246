import AllotCore
import AllotSignals
import AllotStore

/// The Upstream Capacity Observer's maths (SPEC 4): pure, synchronous and deterministic — the new
/// telemetry and `now` in, a report out — so the simulator can drive it on a virtual clock and tests
/// can check exact values. ``CapacityObserver`` is the actor that owns one.
///
/// Per upstream pool and dimension (RPM, TPM):
/// - **Start**: the provider's header limit normalised per minute (the event's own window when the
///   signal states one, else the pool's `header_window`), else the policy's declared capacity. When
///   that start value moves (a header appears, the provider changes the limit, the policy changes) —
///   a header median moves only beyond twice its standard error (``PoolTrack/medianTolerance(_:)``; √2
///   times that against a start value resting on as many statements) for three ticks running, or beyond
///   three times that at once, so statements that jitter do not move
///   capacity — the estimate follows it — unless a quota decrease happened within the long window, in which
///   case it only lowers the estimate (evidence beats a statement).
/// - **Shared key**: a provider `remaining` lower than our own traffic explains (`limit − remaining`
///   minus what we served in the header window before the statement) means someone else uses the
///   key; beyond `shared_tolerance` of the limit, the ceiling becomes `limit − others` and an
///   estimate above it drops to it at once.
/// - **Fast down** on quota exhaustion (a 429 `quota_exhausted`, or `remaining = 0` with a future
///   reset): `C_est ← max(floor, min(decrease_factor × C_est, served while throttled))`, where
///   "served while throttled" is the served rate over the short window's slices that saw quota errors
///   for the dimension and are settled — ended at least the short-window p95 latency of served attempts ago,
///   so that the successes admitted in them have been reported (a refusal is reported at once, a
///   success only after the call's latency: an unsettled slice under-counts what was served, and a
///   few 429s at the edge of a burst would read as a collapse), at least three of them (refusals in one or
///   two slices are as likely a burst meeting the provider's bucket as a lower limit, which keeps
///   refusing). Until then the cut is `decrease_factor` alone. Quota errors within `decrease_hold_s` of a decrease are attributed to it
///   and cause no further multiplicative cut; but a throttled slice that settles within the hold lowers the
///   estimate to what it measured (a measurement, which cannot compound), so a storm reaches the served
///   rate one tick after it is first seen. A measurement at or above `C_est` holds the estimate instead of
///   cutting it: the refusals are traffic beyond the allocation (outside evaluation round 28).
///   A 429 whose headers leave a tenth of the requests' limit (and at least six) is a token refusal (a
///   call larger than the tokens left). A bare 429 that names no dimension counts against the binding one
///   (the higher utilisation; both when within 0.1 of each other).
/// - **Slow up**: with no quota evidence in the short window, the circuit closed and latency not
///   degrading, utilisation (served / `C_est`) at or above `probe_utilisation` raises the estimate by
///   `probe_step × reference` per minute — and at least `probe_recover` of the gap to a limit the
///   provider's headers stated within the short window; with no header limit ever seen and a quota cut
///   within the long window, `probe_step × C_est`, 0.35 of that from where the provider last
///   refused (the newest served-while-throttled measurement within the long window) up to `probe_step`
///   above it, where that measurement is disproven — up to the ceiling (header limit, else declared; unbounded
///   when neither exists). Below 50 % there is no evidence the estimate is too low; in between it holds —
///   except below twice the floor, where a quiet short window is enough to probe (the floor's allocations
///   may admit nothing, and no traffic never reads as high utilisation), and below a limit the provider
///   states while our own gateways deny calls in the short window (the low use is ours: an estimate cut
///   below what its allocations can pass would otherwise never see the use that raises it).
/// - **Floor**: never below `capacity_floor × reference`.
/// - **Degrading**: the short-window p95 latency against the baseline p95 (the long window minus the
///   short one, so that a rise is not hidden in its own baseline) at or above `latency_ratio` (both with
///   at least `latency_min_samples` samples) → `degrading`, and the engine gets `degrade_factor × C_est`
///   until the ratio falls below `latency_recover_ratio`. Latency is that of served attempts. A rise
///   that comes with our own load rising (served attempts or tokens per second above the baseline's by
///   more than `latency_load_rise`) does not start `degrading`: latency growing with utilisation is queueing at
///   the upstream, which quota errors judge; a rise at steady load is the early warning.
/// - **Model version change** (a version the pool has not run before): the estimate restarts from the
///   start value, the decrease hold and the latency baseline are cleared, confidence halves for the long window.
/// - **State**: `overloaded` (circuit not closed, see ``CircuitPhase``) > `throttled` (a quota 429 in
///   the short window) > `degrading` (latency, or server errors and timeouts at or above the policy's
///   `alerts.upstream_error_rate`) > `healthy`. Spend-cap errors raise `spend_cap` and change nothing else.
/// - **Confidence** = source × stability × version: source 1 with a header seen within the long window,
///   0.6 with only a declared capacity, 0.3 otherwise; stability 0.75 after a quota decrease within the
///   long window; version 0.5 after a model version change within the long window.
public struct CapacityEstimation: Sendable {
    public private(set) var state: ObserverState
    public private(set) var policy: Policy
    /// Pool position by interned upstream ref and by name (rebuilt, never persisted: refs belong to a database).
    private var indexByRef: [Int64: Int] = [:]
    private var poolByRef: [Int32] = []
    private var indexByName: [String: Int] = [:]

    /// Below this utilisation there is no evidence the estimate is too low (SPEC 4).
    static let evidenceUtilisation = 0.5
    /// Model versions remembered per pool.
    static let versionMemory = 8
    /// Events that must report a version the pool has not run before it counts as a change (probing restarted
    /// from the start value): one event's version — a stray, a canary gateway's test call — took a pool cut to its
    /// true 600 rpm back to the stated 1,000, and the 429s followed.
    static let versionConfirmations = 3

    public init(policy: Policy, state: ObserverState? = nil) {
        self.policy = policy
        self.state = state ?? ObserverState()
        fitRings()
        reindex()
    }

    /// Swaps in a new policy. Changed windows restart the slice history (estimates and states are kept).
    public mutating func apply(policy: Policy) {
        self.policy = policy
        fitRings()
    }

    /// Ingests one tick's new telemetry and returns the report for `now`.
    public mutating func observe(_ delta: TelemetryDelta, now: Double) -> ObserverReport {
        ingest(delta, now: now)
        for upstream in policy.upstreams where indexByName[upstream.id] == nil { _ = addPool(upstream.id) }
        pruneForgotten(now: now)
        state.pools.sort { $0.upstream < $1.upstream }
        reindex()

        let elapsed = state.lastObserveAt.map { min(max(0, now - $0), policy.observer.shortWindowSeconds) } ?? 0
        var pools: [PoolObservation] = []
        var statuses: [UpstreamStatus] = []
        var alerts: [LoopAlert] = []
        pools.reserveCapacity(state.pools.count)
        statuses.reserveCapacity(state.pools.count)
        for index in state.pools.indices {
            var evaluation = PoolEvaluation(
                pool: state.pools[index], declared: policy.upstream(state.pools[index].upstream)?.capacity,
                settings: policy.observer, errorRate: policy.alerts.upstreamErrorRate, now: now, elapsed: elapsed,
                headerWindows: headerWindows(of: state.pools[index].upstream))
            let status = evaluation.run()
            state.pools[index] = evaluation.pool
            pools.append(PoolObservation(upstream: status.upstream, capacity: status.estimate, state: status.state))
            statuses.append(status)
            alerts.append(contentsOf: evaluation.alerts)
        }
        state.lastObserveAt = now
        return ObserverReport(pools: pools, upstreams: statuses, alerts: alerts)
    }

    // MARK: Ingest

    private mutating func ingest(_ delta: TelemetryDelta, now: Double) {
        var lastRef = Int64.min
        var lastIndex = -1
        var windows: [PerDimension<Double>] = state.pools.map { headerWindows(of: $0.upstream) }
        delta.events.withUnsafeBufferPointer { events in
            for position in events.indices {
                let ref = events[position].upstream
                let index: Int
                if ref == lastRef {
                    index = lastIndex
                } else if ref >= 0, ref < Int64(poolByRef.count), poolByRef[Int(ref)] >= 0 {
                    index = Int(poolByRef[Int(ref)])
                } else if let found = indexByRef[ref] {
                    index = found
                } else {
                    // A ref the names do not resolve belongs to a name registered after they were read;
                    // the loop reads fresh names, so this is a broken delta: skip rather than invent a pool.
                    guard let name = delta.names.upstream(ref) else { continue }
                    index = indexByName[name] ?? addPool(name)
                    bind(ref: ref, to: index)
                    if windows.count <= index { windows.append(headerWindows(of: name)) }
                }
                lastRef = ref
                lastIndex = index
                state.pools[index].ingest(
                    events.baseAddress! + position, now: now, windows: windows[index], names: delta.names)
            }
        }
    }

    private mutating func bind(ref: Int64, to index: Int) {
        if ref >= 0, ref < 1 << 16 {  // pools are few: larger refs go to the dictionary
            if Int(ref) >= poolByRef.count {
                poolByRef.append(contentsOf: repeatElement(-1, count: Int(ref) + 1 - poolByRef.count))
            }
            poolByRef[Int(ref)] = Int32(index)
        } else {
            indexByRef[ref] = index
        }
    }

    /// The window each header dimension counts over, seconds (the pool's `header_window`, per minute by default).
    private func headerWindows(of upstream: String) -> PerDimension<Double> {
        policy.upstream(upstream)?.headerWindow.map(\.seconds) ?? PerDimension(60)
    }

    private mutating func addPool(_ name: String) -> Int {
        state.pools.append(PoolTrack(upstream: name, settings: policy.observer))
        indexByName[name] = state.pools.count - 1
        return state.pools.count - 1
    }

    /// Drops pools the policy no longer declares and that sent nothing for `forget_after_s`.
    private mutating func pruneForgotten(now: Double) {
        let horizon = now - policy.loop.forgetAfterSeconds
        state.pools.removeAll { pool in
            policy.upstream(pool.upstream) == nil && (pool.lastEventAt ?? -Double.infinity) < horizon
        }
    }

    private mutating func reindex() {
        indexByName = Dictionary(
            uniqueKeysWithValues: state.pools.enumerated().map { ($0.element.upstream, $0.offset) })
        indexByRef = [:]
        poolByRef = []
    }

    /// Rebuilds slice rings whose geometry no longer matches the policy's windows.
    private mutating func fitRings() {
        let fine = PoolTrack.fineRing(policy.observer)
        let coarse = PoolTrack.coarseRing(policy.observer)
        for index in state.pools.indices {
            if state.pools[index].fine.seconds != fine.seconds
                || state.pools[index].fine.slots.count != fine.slots.count
            {
                state.pools[index].fine = fine
            }
            if state.pools[index].coarse.seconds != coarse.seconds
                || state.pools[index].coarse.slots.count != coarse.slots.count
            {
                state.pools[index].coarse = coarse
            }
        }
    }
}

extension PoolTrack {
    /// Adds one event to the pool's windows and signals. `now` bounds event times (a gateway clock
    /// ahead of ours must not create the future).
    ///
    /// The event is read through a pointer into the delta's buffer: a `StoredEvent` is several hundred
    /// bytes and this runs for every event of a tick.
    mutating func ingest(
        _ pointer: UnsafePointer<StoredEvent>, now: Double, windows: PerDimension<Double>,
        names: borrowing TelemetryNames
    ) {
        let at = min(Double(pointer.pointee.timestampMs) / 1000, now)
        if firstEventAt == nil || at < firstEventAt! { firstEventAt = at }
        if lastEventAt == nil || at > lastEventAt! { lastEventAt = at }
        let outcome = pointer.pointee.outcome
        let position = fine.slot(for: fine.index(of: at))
        if let position {
            fine.slots[position].outcomes[outcome.ordinal] &+= 1
            if pointer.pointee.unparseableHeaders > 0 {
                fine.slots[position].unparseableHeaders &+= Int32(pointer.pointee.unparseableHeaders)
            }
        }
        if outcome == .ok {
            let tokens = Double((pointer.pointee.promptTokens ?? 0) + (pointer.pointee.completionTokens ?? 0))
            let served = tokens > 0 ? tokens : Double(pointer.pointee.estimatedTokens ?? 0)
            if let position {
                fine.slots[position].servedRequests += 1
                fine.slots[position].servedTokens += served
            }
            let coarsePosition = coarse.slot(for: coarse.index(of: at))
            if let coarsePosition {
                coarse.slots[coarsePosition].servedTokens = (coarse.slots[coarsePosition].servedTokens ?? 0) + served
            }
            if let latency = pointer.pointee.latencyMs, latency.isFinite, latency >= 0 {
                let bucket = LogLinearScale.latency.bucket(of: latency)
                if let position { fine.slots[position].latency.add(bucket: bucket) }
                if let coarsePosition { coarse.slots[coarsePosition].latency.add(bucket: bucket) }
            }
        }

        if pointer.pointee.signals.family != nil {
            readLimits(pointer, at: at, windows: windows)
            if let position { fine.slots[position].statedAnswers &+= 1 }
        }
        let signals = UnsafePointer<EventSignals>(pointer.pointer(to: \.signals)!)

        // Quota evidence: a 429 with quota semantics, or `remaining = 0` with a reset still ahead.
        var requestsHit = signals.pointee.remainingRequests == 0 && (signals.pointee.resetRequestsMs ?? 0) > 0
        var tokensHit = signals.pointee.remainingTokens == 0 && (signals.pointee.resetTokensMs ?? 0) > 0
        if outcome == .quotaExhausted, !requestsHit, !tokensHit {
            requestsHit = signals.pointee.remainingRequests == 0
            tokensHit =
                signals.pointee.remainingTokens == 0 || signals.pointee.remainingInputTokens == 0
                || signals.pointee.remainingOutputTokens == 0
            if !requestsHit, !tokensHit, signals.pointee.family == .google {
                // Google names the violated quota: its limit is stored on the dimension it counts.
                requestsHit = signals.pointee.limitRequests != nil
                tokensHit = signals.pointee.limitTokens != nil
            }
            if !requestsHit, !tokensHit, Self.requestsPlentiful(signals.pointee), signals.pointee.limitTokens != nil {
                // A call larger than the tokens left is refused with tokens "remaining" (OpenAI: "Requested 40800").
                // Counted against both dimensions it cut the requests' estimate to the few long calls served
                // (233 → 120 rpm of a true 300 on a pool of 40k-token calls).
                tokensHit = true
            }
        }
        if requestsHit {
            if let position { fine.slots[position].quotaRPM &+= 1 }
            if lastQuotaAt.rpm == nil || at > lastQuotaAt.rpm! { lastQuotaAt.rpm = at }
        }
        if tokensHit {
            if let position { fine.slots[position].quotaTPM &+= 1 }
            if lastQuotaAt.tpm == nil || at > lastQuotaAt.tpm! { lastQuotaAt.tpm = at }
        }
        if outcome == .quotaExhausted, !requestsHit, !tokensHit {
            if let position { fine.slots[position].quotaUnattributed &+= 1 }
            if lastUnattributedQuotaAt == nil || at > lastUnattributedQuotaAt! { lastUnattributedQuotaAt = at }
        }

        switch outcome {
        case .overloaded:
            if lastOverloadAt == nil || at > lastOverloadAt! { lastOverloadAt = at }
        case .spendCap:
            if lastSpendCapAt == nil || at >= lastSpendCapAt! {
                lastSpendCapAt = at
                spendCapErrorType = pointer.pointee.errorType
            }
        default:
            break
        }

        if let ref = pointer.pointee.modelVersion, ref != modelVersionRef, let name = names.modelVersion(ref) {
            noteModelVersion(name, ref: ref, at: at)
        }
    }

    /// An event's model version other than the one in force: a version the pool ran before is a mixed roll-out
    /// and becomes the one in force; a new one is a change once enough events report it (until then the
    /// version in force stays, and so does the estimate).
    private mutating func noteModelVersion(_ name: String, ref: Int64, at: Double) {
        if name != modelVersion, modelVersion != nil, !seenVersions.contains(name) {
            let count = candidateVersion == name ? (candidateVersionEvents ?? 0) + 1 : 1
            candidateVersion = name
            candidateVersionEvents = count
            guard count >= CapacityEstimation.versionConfirmations else { return }
            versionChangePending = true
            versionChangedAt = at
        }
        modelVersionRef = ref
        guard name != modelVersion else { return }
        candidateVersion = nil
        candidateVersionEvents = nil
        if !seenVersions.contains(name) {
            seenVersions.append(name)
            if seenVersions.count > CapacityEstimation.versionMemory { seenVersions.removeFirst() }
        }
        modelVersion = name
    }

    /// Header limits (per minute) and `remaining` statements, newest event time wins.
    private mutating func readLimits(_ event: UnsafePointer<StoredEvent>, at: Double, windows: PerDimension<Double>) {
        let signals = event.pointee.signals
        var tokenLimit = signals.limitTokens
        var tokenRemaining = signals.remainingTokens
        if tokenLimit == nil, let input = signals.limitInputTokens, let output = signals.limitOutputTokens {
            tokenLimit = input + output
            if let inputLeft = signals.remainingInputTokens, let outputLeft = signals.remainingOutputTokens {
                tokenRemaining = inputLeft + outputLeft
            }
        }
        let statements: PerDimension<(limit: Int64?, remaining: Int64?, windowMs: Int64?)> = PerDimension(
            rpm: (signals.limitRequests, signals.remainingRequests, signals.windowRequestsMs),
            tpm: (tokenLimit, tokenRemaining, signals.windowTokensMs))
        for dimension in RateDimension.allCases {
            let statement = statements[dimension]
            guard let limit = statement.limit, limit > 0 else { continue }
            let window = statement.windowMs.map { Double($0) / 1000 } ?? windows[dimension]
            guard window > 0 else { continue }
            if headerSeenAt == nil || at > headerSeenAt! { headerSeenAt = at }
            // Every statement joins the medians' memory, whatever its order: gateways report in batches, and
            // a newest-only filter kept about one gateway's statements, so the median moved with few samples.
            // The median itself is taken once per tick (``PoolTrack/refreshHeaderLimits()``).
            // Taken out and put back, so the append does not copy a memory still referenced from here.
            var limits = recentLimits ?? PerDimension([])
            recentLimits = nil
            limits[dimension].append(Double(limit) * 60 / window)
            if limits[dimension].count > 2 * PoolTrack.limitMemory {
                limits[dimension].removeFirst(limits[dimension].count - PoolTrack.limitMemory)
            }
            recentLimits = limits
            if at >= headerLimitAt[dimension] ?? -Double.infinity { headerLimitAt[dimension] = at }
            if let left = statement.remaining, at >= (remaining[dimension]?.at ?? -Double.infinity) {
                if let previous = remaining[dimension], Double(limit) >= previous.limit * PoolEvaluation.statedRaise {
                    var raised = limitRaisedAt ?? PerDimension(nil)
                    raised[dimension] = at
                    limitRaisedAt = raised
                }
                let sample = RemainingSample(
                    at: at, limit: Double(limit), remaining: Double(max(0, left)), windowSeconds: window)
                remaining[dimension] = sample
                var samples = recentRemaining ?? PerDimension([])
                recentRemaining = nil
                samples[dimension].append(sample)
                if samples[dimension].count > PoolTrack.statementMemory { samples[dimension].removeFirst() }
                recentRemaining = samples
            }
        }
    }

    /// Whether a refusal's headers leave at least a tenth of the requests' limit, and six: the request dimension
    /// was not what refused it. Six because a provider whose bucket refills over ten seconds (a sixth of the
    /// minute) states fewer than six a minute when it cannot pass one request: with two, every request refusal
    /// of a 3-rpm pool (stating 2 or 3 left) was read as a token refusal and cut the tokens to their floor.
    static func requestsPlentiful(_ signals: EventSignals) -> Bool {
        guard let limit = signals.limitRequests, limit > 0, let left = signals.remainingRequests else { return false }
        return left >= max(6, limit / 10)
    }
}
