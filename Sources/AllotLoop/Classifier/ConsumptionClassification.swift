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
///   reads them, whatever their time (late events are not lost); the first tick's `Δ` is the loop interval.
/// - **Demand** = served + denied locally + queued (SPEC 5): what the tenant wanted. Served tokens are
///   prompt + completion; denied and queued requests count their `estimated_tokens`.
/// - **Classes**, first match: `idle` (no demand event for `idle_after_s`), `cold_start` (fewer than
///   `cold_start_samples` demand events: the demand reported is `c·observed + (1 − c)·prior` with
///   `c = samples / cold_start_samples` and the prior the tier's `cold_start_demand`, a percentage
///   resolving against the pool's capacity after the safety margin), `sustained_over` (short demand
///   above the published allocation in a dimension continuously for `sustained_over_s`), `bursting`
///   (short demand at least `burstRatio` × long demand, and at least `burstMinimumRPM`), `steady`.
/// - **Starvation**: served (short) below `starvation_ratio` × allocation while demand (short) is at or
///   above the allocation, in a dimension, at every tick for `starvation_window_s` → `starved` and a
///   `starved` alert, until a tick where the condition no longer holds.
/// - **Suspect**: the three patterns of ``ClassificationRules``; each adds a reason.
/// - **Spend**: served prompt and completion tokens × the pool's price (the default price, with an
///   `unpriced_upstream` alert, when the pool has none), per tenant and UTC calendar hour, day and
///   month; the burn rate is the long-window EWMA of currency per second.
/// - **Runaway tasks**: upstream calls and tokens per `task_id` against the task class's `task_budgets`
///   entry → `runaway_task` while the task keeps running.
public struct ConsumptionClassification: Sendable {
    public private(set) var state: ClassifierState
    public private(set) var policy: Policy
    public var rules: ClassificationRules

    /// Track position by interned refs and by key (rebuilt, never persisted: refs belong to a database).
    private var indexByRefs: [RefPair: Int] = [:]
    private var indexByKey: [AllocationKey: Int] = [:]
    private var accountByTenant: [String: Int] = [:]
    /// Parallel to `state.tracks`: the spend account and the price of each track.
    private var trackAccount: [Int] = []
    private var trackPrice: [Price] = []
    private var trackPriced: [Bool] = []
    /// `state.tracks` indices in key order; nil after the set of tracks changed.
    private var order: [Int]?

    /// Histogram weights are rescaled beyond this.
    static let weightLimit = 1e20

    struct RefPair: Hashable {
        var tenant: Int64
        var upstream: Int64
    }

    public init(policy: Policy, state: ClassifierState? = nil, rules: ClassificationRules = ClassificationRules()) {
        self.policy = policy
        self.rules = rules
        self.state = state ?? ClassifierState()
        for track in self.state.tracks.indices {
            for gateway in self.state.tracks[track].gateways.indices {
                self.state.tracks[track].gateways[gateway].ref = nil
            }
        }
        reindex()
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
            state.accounts[index].roll(to: now)
            for (position, window) in BudgetWindow.allCases.enumerated() {
                if let amount = windows[window], amount.isFinite {
                    state.accounts[index].spent[position] = max(0, amount)
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
        for index in state.accounts.indices { state.accounts[index].roll(to: now) }
        let weight = histogramWeight(now: now)
        ingest(delta, now: now, weight: weight)

        let elapsed = state.lastClassifyAt.map { now - $0 } ?? policy.loop.intervalSeconds
        let fold =
            elapsed > 0
            ? Fold(
                elapsed: elapsed, short: 1 - exp(-elapsed / settings.shortWindowSeconds),
                long: 1 - exp(-elapsed / settings.longWindowSeconds),
                longDecay: exp(-elapsed / settings.longWindowSeconds))
            : nil

        forgetTracks(now: now)
        if order == nil {
            order = state.tracks.indices.sorted { state.tracks[$0].key < state.tracks[$1].key }
        }
        var tenants: [TenantObservation] = []
        var statuses: [TenantStatus] = []
        var alerts: [LoopAlert] = []
        tenants.reserveCapacity(state.tracks.count)
        statuses.reserveCapacity(state.tracks.count)
        let context = TrackContext(
            policy: policy, rules: rules, now: now, capacities: capacities)
        for index in order ?? [] {
            if let fold {
                if !trackPriced[index], state.tracks[index].tick.cost > 0 {
                    markUnpriced(state.tracks[index].key.upstream, now: now)
                }
                state.tracks[index].fold(fold, now: now, longWindow: settings.longWindowSeconds)
            }
            let allocation = allocations[state.tracks[index].key]
            let result = state.tracks[index].classify(allocation: allocation, advance: fold != nil, context: context)
            tenants.append(result.observation)
            statuses.append(result.status)
            alerts.append(contentsOf: result.alerts)
        }
        if let fold {
            for index in state.accounts.indices { state.accounts[index].fold(fold) }
            state.lastClassifyAt = now
        }
        alerts.append(contentsOf: taskAlerts(now: now))
        alerts.append(contentsOf: unpricedAlerts(now: now))
        forgetAccounts(now: now)
        return ClassifierReport(tenants: tenants, spend: spend(), statuses: statuses, alerts: alerts)
    }

    // MARK: Ingest

    private mutating func ingest(_ delta: TelemetryDelta, now: Double, weight: Float) {
        var last = RefPair(tenant: .min, upstream: .min)
        var lastIndex = -1
        let budgets = policy.taskBudgets
        let nearEmpty = rules.nearEmptyTokens
        for event in delta.events {
            let pair = RefPair(tenant: event.tenant, upstream: event.upstream)
            let index: Int
            if pair == last {
                index = lastIndex
            } else if let found = indexByRefs[pair] {
                index = found
            } else {
                // An unresolvable ref means the names were read before it was registered: skip it.
                guard let tenant = delta.names.tenant(event.tenant), let upstream = delta.names.upstream(event.upstream)
                else { continue }
                let at = min(Double(event.timestampMs) / 1000, now)
                index = track(for: AllocationKey(tenant: tenant, upstream: upstream), at: at, now: now)
                indexByRefs[pair] = index
            }
            last = pair
            lastIndex = index
            let at = min(Double(event.timestampMs) / 1000, now)
            let cost = state.tracks[index].ingest(
                event, at: at, weight: weight, nearEmpty: nearEmpty, price: trackPrice[index], names: delta.names)
            if cost > 0 { state.accounts[trackAccount[index]].charge(cost, at: at) }
            if let task = event.taskID, event.outcome.reachedUpstream {
                countTask(task, event: event, at: at, track: index, budgets: budgets)
            }
        }
    }

    private mutating func countTask(
        _ task: String, event: StoredEvent, at: Double, track: Int, budgets: [TaskClass: TaskBudgetPolicy]
    ) {
        let key = TaskKey(tenant: state.tracks[track].key.tenant, task: task)
        let tokens = (event.promptTokens ?? 0) + (event.completionTokens ?? 0)
        let upstream = state.tracks[track].key.upstream
        state.tasks[
            key, default: TaskTrack(taskClass: event.taskClass, upstream: upstream, firstSeenAt: at, lastSeenAt: at)
        ]
        .count(tokens: tokens, upstream: upstream, at: at, budget: budgets[event.taskClass])
    }

    private mutating func track(for key: AllocationKey, at: Double, now: Double) -> Int {
        if let index = indexByKey[key] { return index }
        state.tracks.append(TenantTrack(key: key, at: at))
        let index = state.tracks.count - 1
        indexByKey[key] = index
        trackAccount.append(account(for: key.tenant, now: now))
        let (price, known) = policy.price(ofUpstream: key.upstream)
        trackPrice.append(price)
        trackPriced.append(known)
        order = nil
        return index
    }

    private mutating func account(for tenant: String, now: Double) -> Int {
        if let index = accountByTenant[tenant] { return index }
        state.accounts.append(SpendAccount(tenant: tenant, now: now))
        accountByTenant[tenant] = state.accounts.count - 1
        return state.accounts.count - 1
    }

    /// The weight of this tick's histogram samples (see ``DecayingHistogram``), rescaling every
    /// histogram when it would grow past `weightLimit`.
    private mutating func histogramWeight(now: Double) -> Float {
        let epoch = state.histogramEpoch ?? now
        state.histogramEpoch = epoch
        let weight = exp(max(0, now - epoch) / policy.classifier.longWindowSeconds)
        guard weight > Self.weightLimit else { return Float(weight) }
        let factor = Float(1 / weight)
        for index in state.tracks.indices {
            state.tracks[index].completionTokens.rescale(factor)
            state.tracks[index].queueWait.rescale(factor)
        }
        state.histogramEpoch = now
        return 1
    }

    private mutating func reindex() {
        indexByRefs = [:]
        indexByKey = Dictionary(uniqueKeysWithValues: state.tracks.enumerated().map { ($0.element.key, $0.offset) })
        accountByTenant = Dictionary(
            uniqueKeysWithValues: state.accounts.enumerated().map { ($0.element.tenant, $0.offset) })
        trackAccount = []
        trackPrice = []
        trackPriced = []
        let now = state.lastClassifyAt ?? 0
        for track in state.tracks {
            trackAccount.append(account(for: track.key.tenant, now: now))
            let (price, known) = policy.price(ofUpstream: track.key.upstream)
            trackPrice.append(price)
            trackPriced.append(known)
        }
        order = nil
    }

    // MARK: Forgetting

    /// Drops tenants not seen for `forget_after_s` (the engine forgets them too).
    private mutating func forgetTracks(now: Double) {
        let horizon = now - policy.loop.forgetAfterSeconds
        guard state.tracks.contains(where: { $0.lastSeenAt < horizon }) else { return }
        state.tracks.removeAll { $0.lastSeenAt < horizon }
        reindex()
    }

    /// Drops spend accounts with nothing spent in any window in progress, no tenant left and no spend
    /// for `forget_after_s`.
    private mutating func forgetAccounts(now: Double) {
        let horizon = now - policy.loop.forgetAfterSeconds
        let idle = state.accounts.indices.filter { index in
            let account = state.accounts[index]
            return account.spent.allSatisfy { $0 == 0 } && (account.lastSpendAt ?? -Double.infinity) < horizon
                && !state.tracks.indices.contains { trackAccount[$0] == index }
        }
        guard !idle.isEmpty else { return }
        let drop = Set(idle)
        state.accounts = state.accounts.enumerated().filter { !drop.contains($0.offset) }.map(\.element)
        reindex()
    }

    // MARK: Report pieces

    private func spend() -> [TenantSpend] {
        var result: [TenantSpend] = []
        result.reserveCapacity(state.accounts.count * BudgetWindow.allCases.count)
        for account in state.accounts.sorted(by: { $0.tenant < $1.tenant }) {
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
        if var usage = state.unpriced[upstream] {
            usage.lastAt = now
            state.unpriced[upstream] = usage
        } else {
            state.unpriced[upstream] = UnpricedUsage(since: now, lastAt: now)
        }
    }

    /// `unpriced_upstream` while usage on a pool without a price was charged within the long window.
    private mutating func unpricedAlerts(now: Double) -> [LoopAlert] {
        let horizon = now - policy.classifier.longWindowSeconds
        state.unpriced = state.unpriced.filter { $0.value.lastAt >= horizon && policy.upstream($0.key)?.price == nil }
        let price = policy.costs.defaultPrice
        return state.unpriced.keys.sorted().map { upstream in
            LoopAlert(
                kind: "unpriced_upstream", severity: .warning, upstream: upstream,
                message: "\(upstream) has no price in the policy: its usage is charged at the default price "
                    + "(\(SignalText.number(price.inputPerMillionTokens, digits: 4)) / "
                    + "\(SignalText.number(price.outputPerMillionTokens, digits: 4)) "
                    + "\(policy.costs.currency) per million input / output tokens)",
                since: state.unpriced[upstream]?.since ?? now)
        }
    }

    /// `runaway_task` for tasks over their class's budget that were still running within the short
    /// window; forgets tasks idle for `taskExpirySeconds` and keeps at most `maximumTrackedTasks`.
    private mutating func taskAlerts(now: Double) -> [LoopAlert] {
        let expiry = now - rules.taskExpirySeconds
        if state.tasks.values.contains(where: { $0.lastSeenAt < expiry }) {
            state.tasks = state.tasks.filter { $0.value.lastSeenAt >= expiry }
        }
        if state.tasks.count > rules.maximumTrackedTasks {
            let keep = state.tasks.sorted {
                $0.value.lastSeenAt != $1.value.lastSeenAt
                    ? $0.value.lastSeenAt > $1.value.lastSeenAt
                    : ($0.key.tenant, $0.key.task) < ($1.key.tenant, $1.key.task)
            }.prefix(rules.maximumTrackedTasks)
            state.tasks = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
        }
        let running = now - policy.classifier.shortWindowSeconds
        var alerts: [LoopAlert] = []
        for (key, task) in state.tasks {
            guard let exceeded = task.exceededAt, task.lastSeenAt >= running else { continue }
            let budget = policy.taskBudgets[task.taskClass]
            let limits = budget.map { " (budget \($0.maxCalls) calls, \($0.maxTokens) tokens)" } ?? ""
            alerts.append(
                LoopAlert(
                    kind: "runaway_task", severity: .warning, upstream: task.upstream, tenant: key.tenant,
                    message: "task \(key.task) (\(task.taskClass.rawValue)) of \(key.tenant) fanned out into "
                        + "\(task.calls) calls and \(task.tokens) tokens\(limits)",
                    since: exceeded))
        }
        return alerts.sorted { ($0.tenant ?? "", $0.message) < ($1.tenant ?? "", $1.message) }
    }
}

/// The decay of one tick: `1 − e^(−Δ/τ)` for the short and long windows.
struct Fold {
    var elapsed: Double
    var short: Double
    var long: Double
    /// `e^(−Δ/τ_long)`.
    var longDecay: Double
}

/// What every track's classification needs besides its own state.
struct TrackContext {
    let policy: Policy
    let rules: ClassificationRules
    let now: Double
    let capacities: [String: PerDimension<Double?>]
}

extension SpendAccount {
    /// The burn rate's EWMA over the long window.
    mutating func fold(_ fold: Fold) {
        burnPerSecond += fold.long * (tickCost / fold.elapsed - burnPerSecond)
        tickCost = 0
    }
}

extension TaskTrack {
    mutating func count(tokens: Int64, upstream: String, at: Double, budget: TaskBudgetPolicy?) {
        calls += 1
        self.tokens += tokens
        self.upstream = upstream
        if at > lastSeenAt { lastSeenAt = at }
        if exceededAt == nil, let budget, calls > budget.maxCalls || self.tokens > Int64(budget.maxTokens) {
            exceededAt = at
        }
    }
}
