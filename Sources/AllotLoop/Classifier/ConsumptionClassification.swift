import AllotCore
import AllotSignals
import AllotStore
import Foundation

/// The Tenant Consumption Classifier's maths (SPEC 5): pure, synchronous and deterministic — the
/// new telemetry, the published allocations and `now` in, a report out. ``ConsumptionClassifier`` is
/// the actor that owns one; the simulator may drive this directly.
///
/// Per tenant and upstream:
/// - **Rates** are exact continuous-time EWMAs for irregular ticks: over a tick of `Δ` seconds with
///   `n` events, `r ← r·e^(−Δ/τ) + (n/Δ)·(1 − e^(−Δ/τ))` (the solution for a rate constant within the
///   tick), per minute, with `τ` the policy's short or long window. Events are counted in the tick that
///   reads them, whatever their time (late events are not lost); the first tick's `Δ` is the loop
///   interval. A tick with `Δ ≤ 0` (the same `now` twice) only accumulates.
/// - **Demand** = served + denied locally + queued (SPEC 5): what the tenant wanted. Served tokens are
///   prompt + completion; denied and queued requests count their `estimated_tokens`. The demand the
///   engine sees is this short-window rate, with two corrections for agents (closed-loop clients, whose
///   calls wait for earlier ones, so that what they send follows what they are let through):
///   a *sparse* tenant (fewer than `sparseSamples` requests in the short window) reports at least its
///   long-window rate — unless it has stopped (`TenantTrack.hasStopped`) — and a *constrained* tenant
///   (requests waiting in gateway queues — Little's law over the `queue_ms` reported — or denied) claims its
///   allocation × (1 + `constrainedProbe`) in the dimensions it fills (``ClassificationRules``).
/// - **Clump**: the most requests and tokens asked for within one tick, decaying over the long window;
///   the engine's buckets hold at least one clump (``TenantObservation/clump``).
/// - **Classes**, first match: `idle` (no demand event for `idle_after_s`), `cold_start` (fewer than
///   `cold_start_samples` demand events: the demand reported is `c·observed + (1 − c)·prior` with
///   `c = samples / cold_start_samples` and the prior the tier's `cold_start_demand`, a percentage
///   resolving against the pool's capacity after the safety margin), `sustained_over` (short demand, or the
///   requests wanted with `queued` reports, above the published allocation in a dimension continuously for
///   `sustained_over_s`), `bursting` (short demand at least `burstRatio` × long demand, and at least
///   `burstMinimumRPM`), `steady`.
/// - **Starvation**: served (short) below `starvation_ratio` × allocation while demand (short, or the requests
///   wanted with `queued` reports) is at or above the allocation, in a dimension, at every tick for
///   `starvation_window_s` → `starved` and a `starved` alert, until a tick where the condition no longer holds.
/// - **Suspect**: the three patterns of ``ClassificationRules``; each adds a reason.
/// - **Spend**: served prompt and completion tokens × the pool's price (the default price, with an
///   `unpriced_upstream` alert, when the pool has none), per tenant and UTC calendar hour, day and
///   month; the burn rate is the long-window EWMA of currency per second.
/// - **Runaway tasks**: upstream calls and tokens per `task_id` against the task class's `task_budgets`
///   entry → `runaway_task` while the task keeps running.
///
/// Speed (SPEC 13): the per-event work touches only small, contiguous, ref-indexed tables (the tick's
/// counters, sample buffers grouped later by counting sort, a task counter table), in two passes (see
/// `ingest`); everything per tenant happens once per tick, in one pass over the tenants.
public struct ConsumptionClassification: Sendable {
    /// The state, minus the tasks (held in `taskTable`).
    private var stored: ClassifierState
    public private(set) var policy: Policy
    public var rules: ClassificationRules

    // Transient tables, rebuilt on init, policy change and when tracks are forgotten (refs belong to a
    // database; positions follow `stored.tracks`).

    /// Track position by key, and by interned refs: `trackByTenantRef[ref]` is the first track of that
    /// tenant ref (−1: none), chained through `nextSameTenant`, matched on `trackUpstreamRef`.
    private var indexByKey: [AllocationKey: Int] = [:]
    private var trackByTenantRef: [Int32] = []
    private var nextSameTenant: [Int32] = []
    private var trackUpstreamRef: [Int64] = []
    /// Refs too large for a direct table.
    private var farRefs: [RefPair: Int] = [:]
    /// Per track: the tick's counters (with the pool's price) and its spend account.
    private var ticks: [TickCounts] = []
    private var trackAccount: [Int] = []
    private var accountByTenant: [String: Int] = [:]
    /// Gateways by interned ref (their slot in `gatewayNames`), and the tick's per-gateway samples.
    private var gatewayByRef: [Int32] = []
    private var gatewayNames: [String] = []
    private var gatewaySlotByName: [String: Int] = [:]
    private var gatewaySamples: [GatewaySample] = []
    /// The tick's histogram samples, `track << 8 | bucket` (on `LogLinearScale.compact`).
    private var completionSamples: [UInt32] = []
    private var queueSamples: [UInt32] = []
    /// Task positions by hash of tenant account and task id, and the task budgets by `TaskClass.ordinal`.
    private var taskTable = TaskTable()
    private var taskSamples: [TaskSample] = []
    /// The tick's compact event records (see `ingest`).
    private var records: [EventRecord] = []
    private var taskBudgets: [(calls: Int, tokens: Int64)] = []
    /// Events per chunk of `ingest` (512 KiB of records); tests make it small.
    var ingestChunk = 16_384
    /// `stored.accounts` indices in tenant order; nil after accounts were removed; new ones wait in
    /// `unorderedAccounts` (like `order`).
    private var accountOrder: [Int]?
    private var unorderedAccounts: [Int] = []
    /// `stored.tracks` indices in key order; nil after tracks were removed. Tracks created since the
    /// last report wait in `unordered` and are merged in (a full sort of 10,000 string keys every
    /// tick a new tenant appears would cost more than classifying them).
    private var order: [Int]?
    private var unordered: [Int] = []

    /// Histogram weights are rescaled beyond this.
    static let weightLimit = 1e20
    /// Refs below this are looked up in direct tables (larger ones in dictionaries), and a direct table
    /// never grows beyond 16 entries per track plus this: a database whose refs ran far ahead of its
    /// active tenants (churn) does not cost a table per ref ever issued.
    static let directRefLimit: Int64 = 1 << 16

    private func direct(_ ref: Int64) -> Bool {
        ref >= 0 && ref < Self.directRefLimit + Int64(16 * stored.tracks.count)
    }

    struct RefPair: Hashable {
        var tenant: Int64
        var upstream: Int64
    }

    /// A pool's price per token (and per request), for the per-event loop.
    struct TokenPrice: Sendable {
        var input: Double
        var output: Double
        var request: Double
        var known: Bool

        init(_ price: Price, known: Bool) {
            input = price.inputPerMillionTokens / 1_000_000
            output = price.outputPerMillionTokens / 1_000_000
            request = price.perRequest
            self.known = known
        }
    }

    public init(policy: Policy, state: ClassifierState? = nil, rules: ClassificationRules = ClassificationRules()) {
        self.policy = policy
        self.rules = rules
        stored = state ?? ClassifierState()
        let tasks = stored.tasks
        stored.tasks = []
        reindex(tasks: tasks)
    }

    /// The state to persist (and to restore with `init(policy:state:rules:)`).
    public var state: ClassifierState {
        var state = stored
        state.tasks = taskTable.tasks
        return state
    }

    /// Swaps in a reloaded policy (windows, thresholds, prices, tiers, task budgets).
    public mutating func apply(policy: Policy) {
        self.policy = policy
        reindex()
    }

    /// Replaces the spend so far of the windows in progress at `now` (the loop seeds it from the
    /// rollups at start, when windows as long as a month began before the events it reads).
    public mutating func seedSpend(_ spent: [String: [BudgetWindow: Double]], now: Double) {
        for (tenant, windows) in spent {
            let index = account(for: tenant, now: now)
            stored.accounts[index].roll(to: now)
            for (position, window) in BudgetWindow.allCases.enumerated() {
                if let amount = windows[window], amount.isFinite {
                    stored.accounts[index].spent[position] = max(0, amount)
                }
            }
        }
    }

    /// Ingests one tick's new events and classifies every tenant and upstream at `now`.
    ///
    /// - Parameters:
    ///   - allocations: the rates currently published per tenant and upstream (per minute): the
    ///     reference for `sustained_over`, starvation and the suspect correlation.
    ///   - capacities: the pools' capacity estimates (the Observer's), for resolving percentage
    ///     cold-start priors; a pool missing here uses its declared capacity.
    public mutating func classify(
        _ delta: TelemetryDelta, allocations: [AllocationKey: PerDimension<Double>],
        capacities: [String: PerDimension<Double?>] = [:], now: Double
    ) -> ClassifierReport {
        let settings = policy.classifier
        let previousTick = stored.lastClassifyAt ?? -Double.infinity
        forgetTracks(now: now)
        for index in stored.accounts.indices { stored.accounts[index].roll(to: now) }
        ingest(delta, now: now)

        let elapsed = stored.lastClassifyAt.map { now - $0 } ?? policy.loop.intervalSeconds
        let fold =
            elapsed > 0
            ? Fold(
                elapsed: elapsed, short: 1 - exp(-elapsed / settings.shortWindowSeconds),
                long: 1 - exp(-elapsed / settings.longWindowSeconds),
                longDecay: exp(-elapsed / settings.longWindowSeconds),
                fast: 1 - exp(-elapsed / max(rules.fastWindowSeconds, .leastNormalMagnitude)))
            : nil
        sortTracks()
        var tenants: [TenantObservation] = []
        var statuses: [TenantStatus] = []
        var alerts: [LoopAlert] = []
        tenants.reserveCapacity(stored.tracks.count)
        statuses.reserveCapacity(stored.tracks.count)
        let context = TrackContext(policy: policy, rules: rules, now: now, capacities: capacities, fold: fold)
        // One pass over the tracks, in report order: fold the tick's counts in, then classify (each
        // track's memory is touched once per tick).
        let weight = fold != nil ? histogramWeight(now: now) : 1
        let completions = SampleRuns(completionSamples, tracks: completionSamples.isEmpty ? 0 : stored.tracks.count)
        let waits = SampleRuns(queueSamples, tracks: queueSamples.isEmpty ? 0 : stored.tracks.count)
        let gateways = GatewayRuns(gatewaySamples, tracks: gatewaySamples.isEmpty ? 0 : stored.tracks.count)
        var perGateway: [(slot: Int, demand: Double, served: Double, tokens: Double)] = []
        var guesses: [(entry: Int, guessed: PerDimension<Double>)] = []
        for index in order ?? [] {
            if let fold {
                let tick = ticks[index]
                ticks[index] = TickCounts(price: tick.price)
                if !tick.price.known, tick.cost > 0 { markUnpriced(stored.tracks[index].key.upstream, now: now) }
                stored.accounts[trackAccount[index]].charge(tick, at: tick.lastSeenAt)
                completions.forEach(track: index) {
                    stored.tracks[index].completionTokens.add(bucket: $0, weight: weight)
                }
                waits.forEach(track: index) { stored.tracks[index].queueWait.add(bucket: $0, weight: weight) }
                stored.tracks[index].fold(
                    fold, tick: tick, now: now, shortWindow: settings.shortWindowSeconds,
                    longWindow: settings.longWindowSeconds)
                perGateway.removeAll(keepingCapacity: true)
                for place in 0..<InlineGateways.capacity where tick.gateways.slots[place] >= 0 {
                    perGateway.append(
                        (
                            Int(tick.gateways.slots[place]), Double(tick.gateways.demand[place]),
                            Double(tick.gateways.served[place]), Double(tick.gateways.tokens[place])
                        ))
                }
                gateways.forEach(track: index) { sample in
                    let slot = Int(sample.gateway)
                    var position = perGateway.firstIndex { $0.slot == slot }
                    if position == nil {
                        perGateway.append((slot, 0, 0, 0))
                        position = perGateway.count - 1
                    }
                    if sample.demand { perGateway[position!].demand += 1 }
                    if sample.served {
                        perGateway[position!].served += 1
                        perGateway[position!].tokens += Double(sample.tokens)
                    }
                }
                for entry in perGateway {
                    stored.tracks[index].countGateway(
                        gatewayNames[entry.slot], demand: entry.demand, served: entry.served, tokens: entry.tokens,
                        fold: fold, now: now)
                }
            }
            let allocation = allocations[stored.tracks[index].key]
            let result = stored.tracks[index].classify(allocation: allocation, advance: fold != nil, context: context)
            if result.guessed.rpm > 0 || result.guessed.tpm > 0 {
                guesses.append((tenants.count, result.guessed))
            }
            tenants.append(result.observation)
            statuses.append(result.status)
            alerts.append(contentsOf: result.alerts)
        }
        shareColdStartGuesses(guesses, tenants: &tenants, statuses: &statuses, context: context)
        if let fold {
            Self.clearForReuse(&gatewaySamples)
            Self.clearForReuse(&completionSamples)
            Self.clearForReuse(&queueSamples)
            for index in stored.accounts.indices { stored.accounts[index].fold(fold) }
            stored.lastClassifyAt = now
        }
        alerts.append(contentsOf: unpricedAlerts(now: now))
        alerts.append(contentsOf: taskAlerts(now: now, previousTick: previousTick))
        if fold != nil {
            // Compactions rebuild the transient tables: only between ticks (no counters pending).
            forgetAccounts(now: now)
        }
        return ClassifierReport(tenants: tenants, spend: spend(), statuses: statuses, alerts: alerts)
    }

    /// Holds the guessed part of a pool's `cold_start` tenants' demand (``TenantTrack/Classification/guessed``)
    /// together to the room its capacity leaves — the demand it carries with `demand_headroom`, `C / (1 + h)`, less
    /// what its other active tenants want and what the newcomers showed — and never below
    /// `classifier.cold_start_share` of the capacity; beyond that the newcomers share it by weight (the tier's
    /// times the tenant's in the policy; overrides are the engine's), each at most its own guess — water-filling,
    /// as the engine shares capacity: a critical newcomer among a flood of free ones keeps its guess. A
    /// newcomer's first request in a 2-s tick read as 30 a minute, and 600 tenants registered at once by one batch,
    /// each read so or lifted to its tier's prior, were given 929 of a 980-rpm pool while a critical tenant
    /// wanting 130 was cut to its guardrail minimum (outside evaluation round 28).
    private func shareColdStartGuesses(
        _ guesses: [(entry: Int, guessed: PerDimension<Double>)], tenants: inout [TenantObservation],
        statuses: inout [TenantStatus], context: TrackContext
    ) {
        guard !guesses.isEmpty else { return }
        var guessed: [String: PerDimension<Double>] = [:]
        var newcomersShown: [String: PerDimension<Double>] = [:]
        for item in guesses {
            let tenant = tenants[item.entry]
            let sum = guessed[tenant.upstream] ?? PerDimension(0)
            guessed[tenant.upstream] = PerDimension<Double> { sum[$0] + item.guessed[$0] }
            let shown = newcomersShown[tenant.upstream] ?? PerDimension(0)
            newcomersShown[tenant.upstream] = PerDimension<Double> { shown[$0] + tenant.demand[$0] - item.guessed[$0] }
        }
        // What the pool's other active tenants want (no guess in it: established ones, and newcomers already sure of
        // what they showed), and whether one is established (watched for two short windows or more): at a cold start
        // of the whole pool nobody has that evidence yet, and the newcomers share the pool as they showed and guess.
        let established = 2 * policy.classifier.shortWindowSeconds
        var guessing = [Bool](repeating: false, count: tenants.count)
        for item in guesses { guessing[item.entry] = true }
        var shown: [String: PerDimension<Double>] = [:]
        var settled: [String: PerDimension<Bool>] = [:]
        for (entry, index) in (order ?? []).enumerated() where entry < tenants.count && !guessing[entry] {
            let pool = tenants[entry].upstream
            guard tenants[entry].tenantClass != .idle, guessed[pool] != nil else { continue }
            let demand = tenants[entry].demand
            let sum = shown[pool] ?? PerDimension(0)
            shown[pool] = PerDimension<Double> { sum[$0] + demand[$0] }
            if stored.tracks[index].foldedSeconds ?? .infinity >= established {
                let before = settled[pool] ?? PerDimension(false)
                settled[pool] = PerDimension<Bool> { before[$0] || demand[$0] > 0 }
            }
        }
        let share = min(1, max(0, policy.classifier.coldStartShare))
        let headroom = 1 + max(0, policy.allocation.demandHeadroom)
        // The room per pool and dimension where the guesses exceed it.
        var rooms: [String: PerDimension<Double?>] = [:]
        for (upstream, sum) in guessed {
            let capacity = context.capacity(of: upstream)
            let wanted = shown[upstream] ?? PerDimension(0)
            let protected = settled[upstream] ?? PerDimension(false)
            let newcomers = newcomersShown[upstream] ?? PerDimension(0)
            // A pool of unknown capacity (none declared, no estimate yet) has nothing to share; one nobody is
            // established in (a whole pool starting cold) has no evidence to protect from its newcomers' guesses.
            let room = PerDimension<Double?> {
                let allowed = max(share * capacity[$0], capacity[$0] / headroom - wanted[$0] - newcomers[$0])
                return capacity[$0] > 0 && protected[$0] && sum[$0] > allowed ? allowed : nil
            }
            if room.rpm != nil || room.tpm != nil { rooms[upstream] = room }
        }
        guard !rooms.isEmpty else { return }
        var members: [String: [Int]] = [:]
        for (position, item) in guesses.enumerated() where rooms[tenants[item.entry].upstream] != nil {
            members[tenants[item.entry].upstream, default: []].append(position)
        }
        for (upstream, positions) in members {
            guard let room = rooms[upstream] else { continue }
            // The engine's weight without overrides (tier × tenant, bounded).
            let weights = positions.map { position in
                let tenant = tenants[guesses[position].entry].tenant
                return policy.terms(ofTenant: tenant, upstream: upstream, overrides: [], now: 0).weight
            }
            var kept = positions.map { guesses[$0].guessed }
            for dimension in RateDimension.allCases {
                guard let allowed = room[dimension] else { continue }
                let upper = positions.map { guesses[$0].guessed[dimension] }
                let filled = WaterFilling.fill(
                    capacity: allowed, weights: weights, lower: [Double](repeating: 0, count: upper.count),
                    upper: upper)
                for k in positions.indices { kept[k][dimension] = min(upper[k], filled.allocations[k]) }
            }
            for (k, position) in positions.enumerated() {
                let item = guesses[position]
                let demand = tenants[item.entry].demand
                let shared = PerDimension<Double> { demand[$0] - item.guessed[$0] + kept[k][$0] }
                tenants[item.entry].demand = shared
                // No allowance for its swing on top (`allocation.demand_deviations`) where the room binds, cut or not:
                // what is left is mostly a guess, and 600 such allowances took from the established tenant the room
                // just left for it.
                let spread = tenants[item.entry].spread
                tenants[item.entry].spread = PerDimension<Double> { room[$0] != nil ? 0 : spread[$0] }
                statuses[item.entry].demand = shared
            }
        }
    }

    // MARK: Ingest

    /// The per-event work, in two passes (see the type's note on speed). The first streams the
    /// delta's events — several hundred bytes each — and keeps what the counters need in a compact
    /// record per event; the second applies the records to the per-track counters, whose table then
    /// stays in cache instead of being evicted by the event stream.
    ///
    /// Both passes go a chunk of `ingestChunk` events at a time (a steady tick is one chunk): a
    /// catch-up tick's 250,000 records and task calls held at once were 16 MB more at the loop's
    /// peak. Every counter still sees its events in order, so the result is the same.
    private mutating func ingest(_ delta: TelemetryDelta, now: Double) {
        let hourStart = BudgetWindow.hour.interval(containing: now).start
        let dayStart = BudgetWindow.day.interval(containing: now).start
        let monthStart = BudgetWindow.month.interval(containing: now).start
        let spans = CostSpans(
            hourStart: hourStart, dayStart: dayStart, monthStart: monthStart,
            burnSince: now - policy.classifier.longWindowSeconds)
        let nearEmpty = Double(rules.nearEmptyTokens)
        let scale = LogLinearScale.compact
        let chunk = max(1, ingestChunk)
        records.reserveCapacity(min(delta.events.count, chunk))
        delta.events.withUnsafeBufferPointer { events in
            // The task counters in a tight loop of their own: their table is large and touched at
            // random, and a short loop body lets the processor overlap those cache misses.
            func countTasks() {
                taskTable.reserve(newTasks: taskSamples.count)
                for sample in taskSamples {
                    let taskClass = events[Int(sample.event)].taskClass
                    let started = taskTable.count(
                        sample.hash, tokens: sample.tokens, at: sample.at, budget: taskBudgets[taskClass.ordinal],
                        keyHint: Int(sample.track)
                    ) {
                        let key = stored.tracks[Int(sample.track)].key
                        return TaskTable.Info(
                            tenant: key.tenant, task: events[Int(sample.event)].taskID ?? "", upstream: key.upstream,
                            taskClass: taskClass, firstSeenAt: sample.at)
                    }
                    if started { ticks[Int(sample.track)].tasksStarted += 1 }
                }
                taskSamples.removeAll(keepingCapacity: true)
            }
            for position in events.indices {
                if records.count == chunk {
                    count(records, spans)
                    records.removeAll(keepingCapacity: true)
                }
                if taskSamples.count == chunk { countTasks() }
                guard let index = trackIndex(events[position].tenant, events[position].upstream, delta: delta, now: now)
                else { continue }
                let outcome = events[position].outcome
                let prompt = events[position].promptTokens
                let completion = events[position].completionTokens
                let known = prompt != nil || completion != nil
                let promptCount = Double(max(0, prompt ?? 0))
                let completionCount = Double(max(0, completion ?? 0))
                let estimated = Double(max(0, events[position].estimatedTokens ?? 0))
                var flags: UInt8 = 0
                if let retry = events[position].retry, retry > 0 { flags |= EventRecord.retry }
                var tokens = 0.0
                switch outcome {
                case .ok:
                    tokens = known ? promptCount + completionCount : estimated
                    if known, promptCount + completionCount <= nearEmpty { flags |= EventRecord.nearEmpty }
                    if let completion, completion >= 0 {
                        completionSamples.append(UInt32(index) << 8 | UInt32(scale.bucket(of: Double(completion))))
                    }
                case .deniedLocal, .queued:
                    tokens =
                        events[position].estimatedTokens != nil || !known ? estimated : promptCount + completionCount
                    // The gateway names the limit that denied (AllotEnforcement writes `rpm`, `tpm`, …).
                    switch events[position].errorType {
                    case "rpm"?: flags |= EventRecord.limitRPM
                    case "tpm"?: flags |= EventRecord.limitTPM
                    case "concurrency"?: flags |= EventRecord.limitConcurrency
                    case nil: flags |= EventRecord.limitUnnamed
                    default: break
                    }
                case .spendCap:
                    break
                default:
                    // An attempt the upstream refused or failed: its tokens count as wanted (first attempts).
                    tokens = events[position].estimatedTokens != nil ? estimated : promptCount + completionCount
                }
                // A `queued` event's wait is a request's wait so far; its attempt or denial reports the whole.
                if outcome != .queued, let wait = events[position].queueMs, wait.isFinite, wait >= 0 {
                    queueSamples.append(UInt32(index) << 8 | UInt32(scale.bucket(of: wait)))
                    if wait > 0 { ticks[index].waitSeconds += Float(wait / 1000) }
                }
                let gateway = gatewaySlot(events[position].gateway, names: delta.names).map { Int32($0) } ?? -1
                records.append(
                    EventRecord(
                        at: min(Double(events[position].timestampMs) / 1000, now), tokens: Float(tokens),
                        prompt: Float(promptCount), completion: Float(completionCount), track: Int32(index),
                        gateway: gateway, outcome: UInt8(outcome.ordinal), flags: flags))
                if outcome.reachedUpstream, let task = events[position].taskID {
                    if flags & EventRecord.retry == 0 { ticks[index].taskCalls += 1 }
                    taskSamples.append(
                        TaskSample(
                            hash: TaskTable.hash(account: Int32(trackAccount[index]), task: task),
                            tokens: (prompt ?? 0) + (completion ?? 0),
                            at: min(Double(events[position].timestampMs) / 1000, now), event: Int32(position),
                            track: Int32(index)))
                }
            }
            countTasks()
        }
        count(records, spans)
        records.removeAll(keepingCapacity: true)
    }

    /// Empties a buffer that every tick refills, keeping its storage for the next tick unless a
    /// large tick (catching up on a backlog: 250,000 events) left it above a mebibyte, which would
    /// otherwise stay resident for the life of the process.
    private static func clearForReuse<Element>(_ buffer: inout [Element]) {
        buffer.removeAll(keepingCapacity: buffer.capacity * MemoryLayout<Element>.stride <= 1 << 20)
    }

    /// The second pass: the compact records into the per-track counters.
    /// Where a served event's cost goes, by its time: the budget windows in progress, and the burn rate.
    struct CostSpans {
        var hourStart: Double
        var dayStart: Double
        var monthStart: Double
        /// Events before it (a gateway flushing reports it buffered while cut off) are spend, in the windows they
        /// fall in, but not the current burn rate: an hour-old flush read as burning now projected a tenant idle
        /// for an hour past its day budget (outside evaluation round 20). The classifier's long window.
        var burnSince: Double
    }

    private mutating func count(_ records: [EventRecord], _ spans: CostSpans) {
        let ok = UInt8(Outcome.ok.ordinal)
        let denied = UInt8(Outcome.deniedLocal.ordinal)
        let queued = UInt8(Outcome.queued.ordinal)
        let spendCap = UInt8(Outcome.spendCap.ordinal)
        for record in records {
            let index = Int(record.track)
            let at = record.at
            ticks[index].events += 1
            if at > ticks[index].lastSeenAt { ticks[index].lastSeenAt = at }
            if at < ticks[index].firstSeenAt { ticks[index].firstSeenAt = at }
            let firstAttempt = record.flags & EventRecord.retry == 0
            if !firstAttempt { ticks[index].retries += 1 }
            var demand = true
            switch record.outcome {
            case ok:
                ticks[index].servedRequests += 1
                ticks[index].servedTokens += record.tokens
                ticks[index].promptTokens += record.prompt
                ticks[index].completionTokens += record.completion
                if record.flags & EventRecord.nearEmpty != 0 { ticks[index].nearEmpty += 1 }
                let price = ticks[index].price
                let cost =
                    Double(record.prompt) * price.input + Double(record.completion) * price.output + price.request
                if at >= spans.hourStart {
                    ticks[index].costHour += cost
                } else if at >= spans.dayStart {
                    ticks[index].costDay += cost
                } else if at >= spans.monthStart {
                    ticks[index].costMonth += cost
                }
                if at >= spans.burnSince { ticks[index].burnCost += cost }
            case denied:
                ticks[index].denied += 1
                ticks[index].deniedTokens += record.tokens
            case queued:
                ticks[index].queued += 1
                ticks[index].queuedTokens += record.tokens
            default:
                demand = false
            }
            // The limit a denial names (only denials and `queued` events carry these flags). A request reported
            // while it waits (``AllotEnforcement``'s gateways report a batch or background request after 5 s)
            // names the limit it waits on, as a denial does: the allocation binds there now, minutes before the
            // queue lets it through or denies it. It counts like a denial in the constrained tenant's claim
            // (``TenantTrack``), not as one (`denied`).
            if record.flags & EventRecord.limitRPM != 0 { ticks[index].deniedByRPM += 1 }
            if record.flags & EventRecord.limitTPM != 0 { ticks[index].deniedByTPM += 1 }
            if record.flags & EventRecord.limitUnnamed != 0 { ticks[index].deniedUnnamed += 1 }
            if record.flags & EventRecord.limitConcurrency != 0 { ticks[index].deniedByConcurrency += 1 }
            // Demand counts each request once, at its first attempt, whatever became of it: a request
            // denied three times and then served is one request wanted, not four (clients mark their
            // retries). A spend-cap refusal is not demand the pool could meet.
            if firstAttempt, record.outcome != spendCap {
                ticks[index].newRequests += 1
                ticks[index].newTokens += record.tokens
            }
            if demand {
                ticks[index].samples += 1
                if at > ticks[index].lastActivityAt { ticks[index].lastActivityAt = at }
            }
            // A request reported waiting counts at its gateway when it is settled (attempted or denied). What a
            // gateway admitted (the drift check's measure, the gateway tracks' `served`) is every attempt it let
            // through to the upstream, whatever the answer: counted by its served calls alone, a gateway ignoring its
            // slice while the provider refused the excess was reported late and at a third of its rate (outside
            // evaluation round 28: 203 requests a minute admitted, "64 rpm" in the alert, 98 s after it began).
            if record.gateway >= 0, record.outcome != queued {
                let admitted = record.outcome != denied
                let tokens = admitted ? record.tokens : 0
                if !ticks[index].gateways.count(slot: record.gateway, demand: demand, served: admitted, tokens: tokens)
                {
                    gatewaySamples.append(
                        GatewaySample(
                            track: UInt32(index), gateway: UInt16(record.gateway), demand: demand, served: admitted,
                            tokens: tokens))
                }
            }
        }
    }

    /// What the counters need of one event (32 bytes instead of a `StoredEvent`'s several hundred).
    struct EventRecord {
        var at: Double
        /// Served: prompt + completion (else the estimate); denied and queued: their demand tokens.
        var tokens: Float
        var prompt: Float
        var completion: Float
        var track: Int32
        /// The gateway's slot, −1 when unknown.
        var gateway: Int32
        /// `Outcome.ordinal`.
        var outcome: UInt8
        var flags: UInt8

        static let retry: UInt8 = 1
        static let nearEmpty: UInt8 = 2
        /// Denied by the tenant's RPM or TPM bucket (the event's `error_type`).
        static let limitRPM: UInt8 = 4
        static let limitTPM: UInt8 = 8
        /// Denied without a named limit (a gateway that does not say): taken for either rate bucket.
        static let limitUnnamed: UInt8 = 16
        /// Denied by (or waiting for) the concurrency cap: more rate does not help.
        static let limitConcurrency: UInt8 = 32
    }

    /// One event's call of a task, buffered during the per-event loop.
    struct TaskSample {
        var hash: UInt64
        var tokens: Int64
        var at: Double
        var event: Int32
        var track: Int32
    }

    /// The track of a tenant ref and upstream ref, created on first sight; nil when the refs do not
    /// resolve (names read before the ref was registered: the event is skipped).
    private mutating func trackIndex(_ tenant: Int64, _ upstream: Int64, delta: TelemetryDelta, now: Double) -> Int? {
        if tenant >= 0, tenant < Int64(trackByTenantRef.count) {
            var index = trackByTenantRef[Int(tenant)]
            while index >= 0 {
                if trackUpstreamRef[Int(index)] == upstream { return Int(index) }
                index = nextSameTenant[Int(index)]
            }
        } else if let index = farRefs[RefPair(tenant: tenant, upstream: upstream)] {
            return index
        }
        guard let tenantName = delta.names.tenant(tenant), let upstreamName = delta.names.upstream(upstream) else {
            return nil
        }
        let at = now
        let index = track(for: AllocationKey(tenant: tenantName, upstream: upstreamName), at: at, now: now)
        trackUpstreamRef[index] = upstream
        if direct(tenant) {
            if Int(tenant) >= trackByTenantRef.count {
                trackByTenantRef.append(
                    contentsOf: repeatElement(
                        -1, count: max(Int(tenant) + 1, trackByTenantRef.count * 2) - trackByTenantRef.count))
            }
            nextSameTenant[index] = trackByTenantRef[Int(tenant)]
            trackByTenantRef[Int(tenant)] = Int32(index)
        } else {
            farRefs[RefPair(tenant: tenant, upstream: upstream)] = index
        }
        return index
    }

    /// The gateway's slot in `gatewayNames`, added on first sight.
    private mutating func gatewaySlot(_ ref: Int64, names: TelemetryNames) -> Int? {
        if ref >= 0, ref < Int64(gatewayByRef.count), gatewayByRef[Int(ref)] >= 0 { return Int(gatewayByRef[Int(ref)]) }
        guard let name = names.gateway(ref) else { return nil }
        let slot: Int
        if let known = gatewaySlotByName[name] {
            slot = known
        } else {
            guard gatewayNames.count < Int(UInt16.max) else { return nil }
            gatewayNames.append(name)
            slot = gatewayNames.count - 1
            gatewaySlotByName[name] = slot
        }
        if ref >= 0, ref < Self.directRefLimit {
            if Int(ref) >= gatewayByRef.count {
                gatewayByRef.append(contentsOf: repeatElement(-1, count: Int(ref) + 1 - gatewayByRef.count))
            }
            gatewayByRef[Int(ref)] = Int32(slot)
        }
        return slot
    }

    private mutating func track(for key: AllocationKey, at: Double, now: Double) -> Int {
        if let index = indexByKey[key] { return index }
        stored.tracks.append(TenantTrack(key: key, at: at))
        let index = stored.tracks.count - 1
        indexByKey[key] = index
        appendTransients(for: index, now: now)
        unordered.append(index)
        return index
    }

    /// Grows the per-track transient tables for track `index`.
    private mutating func appendTransients(for index: Int, now: Double) {
        let key = stored.tracks[index].key
        let (price, known) = policy.price(ofUpstream: key.upstream)
        ticks.append(TickCounts(price: TokenPrice(price, known: known)))
        trackAccount.append(account(for: key.tenant, now: now))
        trackUpstreamRef.append(.min)
        nextSameTenant.append(-1)
    }

    private mutating func account(for tenant: String, now: Double) -> Int {
        if let index = accountByTenant[tenant] { return index }
        stored.accounts.append(SpendAccount(tenant: tenant, now: now))
        accountByTenant[tenant] = stored.accounts.count - 1
        unorderedAccounts.append(stored.accounts.count - 1)
        return stored.accounts.count - 1
    }

    /// The weight of this tick's histogram samples (see ``DecayingHistogram``), rescaling every
    /// histogram when it would grow past `weightLimit`.
    private mutating func histogramWeight(now: Double) -> Float {
        let epoch = stored.histogramEpoch ?? now
        stored.histogramEpoch = epoch
        let weight = exp(max(0, now - epoch) / policy.classifier.longWindowSeconds)
        guard weight > Self.weightLimit else { return Float(weight) }
        let factor = Float(1 / weight)
        for index in stored.tracks.indices {
            stored.tracks[index].completionTokens.rescale(factor)
            stored.tracks[index].queueWait.rescale(factor)
        }
        stored.histogramEpoch = now
        return 1
    }

    /// Rebuilds every transient table from the state (the tick in progress must be empty); `tasks`
    /// replaces the task table's content.
    private mutating func reindex(tasks: [TaskTrack]? = nil) {
        let tasks = tasks ?? taskTable.tasks
        indexByKey = Dictionary(uniqueKeysWithValues: stored.tracks.enumerated().map { ($0.element.key, $0.offset) })
        accountByTenant = Dictionary(
            uniqueKeysWithValues: stored.accounts.enumerated().map { ($0.element.tenant, $0.offset) })
        trackByTenantRef = []
        farRefs = [:]
        ticks = []
        trackAccount = []
        trackUpstreamRef = []
        nextSameTenant = []
        gatewayByRef = []
        gatewayNames = []
        gatewaySlotByName = [:]
        gatewaySamples = []
        completionSamples = []
        queueSamples = []
        let now = stored.lastClassifyAt ?? 0
        for index in stored.tracks.indices { appendTransients(for: index, now: now) }
        rebuildTaskTable(tasks)
        taskBudgets = TaskClass.allCases.map { taskClass in
            policy.taskBudgets[taskClass].map { ($0.maxCalls, Int64($0.maxTokens)) } ?? (.max, .max)
        }
        accountOrder = nil
        unorderedAccounts = []
        order = nil
        unordered = []
    }

    /// Brings `order` up to date: a full sort after removals, else a merge of the new tracks.
    private mutating func sortTracks() {
        let tracks = stored.tracks
        func before(_ a: Int, _ b: Int) -> Bool { tracks[a].key < tracks[b].key }
        guard let current = order else {
            order = tracks.indices.sorted(by: before)
            unordered = []
            return
        }
        guard !unordered.isEmpty else { return }
        order = Self.merge(current, unordered.sorted(by: before), by: before)
        unordered = []
    }

    /// Two sorted lists as one.
    static func merge(_ a: [Int], _ b: [Int], by before: (Int, Int) -> Bool) -> [Int] {
        var merged: [Int] = []
        merged.reserveCapacity(a.count + b.count)
        var i = 0
        var j = 0
        while i < a.count || j < b.count {
            if j == b.count || (i < a.count && before(a[i], b[j])) {
                merged.append(a[i])
                i += 1
            } else {
                merged.append(b[j])
                j += 1
            }
        }
        return merged
    }

    private mutating func rebuildTaskTable(_ tasks: [TaskTrack]) {
        let now = stored.lastClassifyAt ?? 0
        var accounts: [String: Int] = [:]
        for task in tasks where accounts[task.tenant] == nil {
            accounts[task.tenant] = account(for: task.tenant, now: now)
        }
        taskTable = TaskTable(tasks) { accounts[$0] ?? 0 }
    }

    // MARK: Forgetting

    /// Drops tenants not seen for `forget_after_s` (the engine forgets them too). Runs before a tick's
    /// events are read, so no counters are pending.
    private mutating func forgetTracks(now: Double) {
        let horizon = now - policy.loop.forgetAfterSeconds
        guard stored.tracks.contains(where: { $0.lastSeenAt < horizon }) else { return }
        stored.tracks.removeAll { $0.lastSeenAt < horizon }
        reindex()
    }

    /// Drops spend accounts with nothing spent in any window in progress, no tenant left and no spend
    /// for `forget_after_s`.
    private mutating func forgetAccounts(now: Double) {
        var used = [Bool](repeating: false, count: stored.accounts.count)
        for account in trackAccount { used[account] = true }
        guard used.contains(false) else { return }
        let horizon = now - policy.loop.forgetAfterSeconds
        taskTable.forEachInfo { task in if let index = accountByTenant[task.tenant] { used[index] = true } }
        let idle = stored.accounts.indices.filter { index in
            !used[index] && stored.accounts[index].spent.allSatisfy { $0 == 0 }
                && (stored.accounts[index].lastSpendAt ?? -Double.infinity) < horizon
        }
        guard !idle.isEmpty else { return }
        let drop = Set(idle)
        stored.accounts = stored.accounts.enumerated().filter { !drop.contains($0.offset) }.map(\.element)
        reindex()
    }

    // MARK: Report pieces

    private mutating func spend() -> [TenantSpend] {
        let accounts = stored.accounts
        func before(_ a: Int, _ b: Int) -> Bool { accounts[a].tenant < accounts[b].tenant }
        if let current = accountOrder {
            if !unorderedAccounts.isEmpty {
                accountOrder = Self.merge(current, unorderedAccounts.sorted(by: before), by: before)
            }
        } else {
            accountOrder = accounts.indices.sorted(by: before)
        }
        unorderedAccounts = []
        var result: [TenantSpend] = []
        result.reserveCapacity(stored.accounts.count * BudgetWindow.allCases.count)
        for index in accountOrder ?? [] {
            let account = stored.accounts[index]
            for (position, window) in BudgetWindow.allCases.enumerated() {
                result.append(
                    TenantSpend(
                        tenant: account.tenant, window: window, spent: account.spent[position],
                        burnRatePerSecond: account.burnPerSecond))
            }
        }
        return result
    }

    private mutating func markUnpriced(_ upstream: String, now: Double) {
        if var usage = stored.unpriced[upstream] {
            usage.lastAt = now
            stored.unpriced[upstream] = usage
        } else {
            stored.unpriced[upstream] = UnpricedUsage(since: now, lastAt: now)
        }
    }

    /// `unpriced_upstream` while usage on a pool without a price was charged within the long window.
    private mutating func unpricedAlerts(now: Double) -> [LoopAlert] {
        let horizon = now - policy.classifier.longWindowSeconds
        stored.unpriced = stored.unpriced.filter { $0.value.lastAt >= horizon && policy.upstream($0.key)?.price == nil }
        let price = policy.costs.defaultPrice
        return stored.unpriced.keys.sorted().map { upstream in
            LoopAlert(
                kind: "unpriced_upstream", severity: .warning, upstream: upstream,
                message: "\(upstream) has no price in the policy: its usage is charged at the default price "
                    + "(\(SignalText.number(price.inputPerMillionTokens, digits: 4)) / "
                    + "\(SignalText.number(price.outputPerMillionTokens, digits: 4)) "
                    + "\(policy.costs.currency) per million input / output tokens)",
                since: stored.unpriced[upstream]?.since ?? now)
        }
    }

    /// `runaway_task` for tasks over their class's budget that were still running within the short
    /// window; forgets tasks idle for `taskExpirySeconds` and keeps at most `maximumTrackedTasks`.
    private mutating func taskAlerts(now: Double, previousTick: Double) -> [LoopAlert] {
        let expiry = now - rules.taskExpirySeconds
        // Expired tasks are swept once a minute, at the first tick of each UTC minute (a full scan of
        // the table; deterministic across restarts), overflow at once.
        let sweep = (now / 60).rounded(.down) != (previousTick / 60).rounded(.down)
        if (sweep && taskTable.oldestSeen < expiry) || taskTable.count > rules.maximumTrackedTasks,
            !taskTable.retain(seenSince: expiry, maximum: rules.maximumTrackedTasks)
        {
            // Only for a restored table holding two tasks with the same hash (see `TaskTable.retain`).
            var tasks = taskTable.tasks.filter { $0.lastSeenAt >= expiry }
            if tasks.count > rules.maximumTrackedTasks {
                let keep = tasks.indices.sorted {
                    tasks[$0].lastSeenAt != tasks[$1].lastSeenAt ? tasks[$0].lastSeenAt > tasks[$1].lastSeenAt : $0 < $1
                }.prefix(rules.maximumTrackedTasks).sorted()
                tasks = keep.map { tasks[$0] }
            }
            rebuildTaskTable(tasks)
        }
        let running = now - policy.classifier.shortWindowSeconds
        var alerts: [LoopAlert] = []
        taskTable.forEachExceeded(seenSince: running) { info, counter in
            let budget = policy.taskBudgets[info.taskClass]
            let limits = budget.map { " (budget \($0.maxCalls) calls, \($0.maxTokens) tokens)" } ?? ""
            alerts.append(
                LoopAlert(
                    kind: "runaway_task", severity: .warning, upstream: info.upstream, tenant: info.tenant,
                    message: "task \(info.task) (\(info.taskClass.rawValue)) of \(info.tenant) fanned out into "
                        + "\(counter.calls) calls and \(counter.tokens) tokens\(limits)",
                    since: counter.exceededAt))
        }
        return alerts.sorted { ($0.tenant ?? "", $0.message) < ($1.tenant ?? "", $1.message) }
    }
}

/// A tick's histogram samples grouped by track (a counting sort: two passes, no comparison sort).
struct SampleRuns {
    /// `starts[track] ..< starts[track + 1]` in `buckets`.
    private var starts: [Int32]
    private var buckets: [UInt8]

    init(_ samples: [UInt32], tracks: Int) {
        starts = [Int32](repeating: 0, count: tracks + 1)
        for sample in samples { starts[Int(sample >> 8) + 1] += 1 }
        for index in 0..<tracks { starts[index + 1] += starts[index] }
        var next = starts
        buckets = [UInt8](repeating: 0, count: samples.count)
        for sample in samples {
            let track = Int(sample >> 8)
            buckets[Int(next[track])] = UInt8(sample & 0xFF)
            next[track] += 1
        }
    }

    func forEach(track: Int, _ body: (Int) -> Void) {
        guard track + 1 < starts.count else { return }
        for position in Int(starts[track])..<Int(starts[track + 1]) { body(Int(buckets[position])) }
    }
}

/// A tick's per-gateway samples grouped by track (a counting sort, like ``SampleRuns``).
struct GatewayRuns {
    private var starts: [Int32]
    private var samples: [GatewaySample]

    init(_ buffered: [GatewaySample], tracks: Int) {
        starts = [Int32](repeating: 0, count: tracks + 1)
        for sample in buffered { starts[Int(sample.track) + 1] += 1 }
        for index in 0..<tracks { starts[index + 1] += starts[index] }
        var next = starts
        samples = buffered
        for sample in buffered {
            samples[Int(next[Int(sample.track)])] = sample
            next[Int(sample.track)] += 1
        }
    }

    func forEach(track: Int, _ body: (GatewaySample) -> Void) {
        guard track + 1 < starts.count else { return }
        for position in Int(starts[track])..<Int(starts[track + 1]) { body(samples[position]) }
    }
}

/// The decay of one tick: `1 − e^(−Δ/τ)` for the short and long windows.
struct Fold {
    var elapsed: Double
    var short: Double
    var long: Double
    /// `e^(−Δ/τ_long)`.
    var longDecay: Double
    /// `1 − e^(−Δ/τ_fast)`, `τ_fast` = ``ClassificationRules/fastWindowSeconds``.
    var fast: Double
}

/// What every track's classification needs besides its own state, for one tick.
struct TrackContext {
    let policy: Policy
    let rules: ClassificationRules
    let now: Double
    let capacities: [String: PerDimension<Double?>]
    /// The tick's fold (nil when no time passed since the previous one: nothing moves).
    var fold: Fold?
    /// Cold-start priors by tier (in `tenant`) and pool, computed once per tick.
    let priors = PriorMemo()

    /// The capacity percentages of the classifier resolve against (cold-start priors and their share): the
    /// Observer's estimate of the pool, else its declared capacity, after the safety margin; 0 where neither.
    func capacity(of upstream: String) -> PerDimension<Double> {
        let estimated = capacities[upstream] ?? PerDimension(nil)
        let declared = policy.upstream(upstream)?.capacity ?? PerDimension(nil)
        let margin = 1 - policy.allocation.safetyMargin
        return PerDimension<Double> { max(0, (estimated[$0] ?? declared[$0] ?? 0) * margin) }
    }
}

/// A memo filled during one `classify` call and dropped with it (never shared across threads).
final class PriorMemo {
    var values: [AllocationKey: PerDimension<Double>] = [:]
}

extension SpendAccount {
    /// The burn rate's EWMA over the long window.
    mutating func fold(_ fold: Fold) {
        burnPerSecond += fold.long * (tickCost / fold.elapsed - burnPerSecond)
        tickCost = 0
    }
}

extension TaskClass {
    /// Position in `allCases`: an array index.
    var ordinal: Int {
        switch self {
        case .realtime: 0
        case .interactive: 1
        case .batch: 2
        case .background: 3
        }
    }
}

extension TaskTrack {
    mutating func count(tokens: Int64, upstream: String, at: Double, budget: TaskBudgetPolicy?) {
        calls += 1
        self.tokens += tokens
        self.upstream = upstream
        if at > lastSeenAt { lastSeenAt = at }
        if exceededAt == nil, let budget, calls > budget.maxCalls || self.tokens > Int64(budget.maxTokens) {
            exceededAt = lastSeenAt  // the latest call so far, as `TaskTable.count` has it
        }
    }
}
