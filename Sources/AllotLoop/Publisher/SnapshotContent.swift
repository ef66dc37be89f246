import AllotCore
import AllotProtocol

/// What one snapshot version says, before it gets its version and lease: the global view (SPEC 7
/// JSON, through AllotProtocol's `Snapshot`) and how it is split between gateways.
public struct SnapshotContent: Sendable, Equatable {
    /// The global view. `version`, `generatedAt` and `expiresAt` are set when it is published.
    public var snapshot: Snapshot
    /// Per-gateway slices, parallel to `snapshot.tenants`.
    public var plan: SlicePlan

    public init(snapshot: Snapshot, plan: SlicePlan) {
        self.snapshot = snapshot
        self.plan = plan
    }

    /// The rate published for a dimension the pool has no capacity for (no declared capacity and
    /// no estimate yet): the engine does not allocate it, so gateways must not limit it. JSON has no
    /// infinity and the wire model requires a number; 10¹² per minute is beyond any real limit.
    public static let unlimited = 1e12
}

/// Builds a snapshot's content from one tick's decision and reports (SPEC 7). Pure.
public enum SnapshotAssembler {
    /// The gateways a tick knows of, for the slice plan.
    public struct Gateways: Sendable {
        /// Gateways that polled recently (they enforce slices).
        public var active: [String]
        /// Gateways that polled before but not recently: left out of every split, so their share
        /// goes to the others (SPEC 7: a gateway leaving triggers a re-split at the next tick).
        public var gone: Set<String>

        public init(active: [String] = [], gone: Set<String> = []) {
            self.active = active
            self.gone = gone
        }
    }

    /// The demand shares a tenant's slices follow: the Classifier's, except for a tenant first seen less
    /// than a short window ago (``TenantStatus/young``), which is spread evenly over every gateway that
    /// reports a tenant of its upstream (and any other that reported it). Its first calls reached one or two
    /// gateways by chance in its first tick; its slices followed them, and every other gateway held it to
    /// `default` until later ticks had seen it there: 200 tenants arriving at once at 150 % of a pool
    /// behind three gateways starved 44.6 tenant-minutes in ten minutes (seeds 1–8; spread, 24.7;
    /// `static`, 18.4), nearly all in the first two minutes. A tenant whose calls keep to the gateways
    /// that saw them (sticky routing) stops being young after five requests per such gateway.
    static func shares(of status: TenantStatus, upstreamGateways: Set<String>?) -> [String: Double] {
        guard status.young, let upstreamGateways, !upstreamGateways.isEmpty else {
            return status.gatewayShares
        }
        var spread = upstreamGateways
        spread.formUnion(status.gatewayShares.keys)
        let even = 1 / Double(spread.count)
        var shares = [String: Double](minimumCapacity: spread.count)
        for gateway in spread { shares[gateway] = even }
        return shares
    }

    /// The content for `decision`.
    ///
    /// - Parameters:
    ///   - observer: Upstream states, circuits and task classes to shed (nil: from the decision only).
    ///   - classifier: Token estimates and gateway demand shares (nil: no token estimates, even splits).
    ///   - minimumShare: The smallest share of a tenant a gateway that serves it gets.
    public static func content(
        decision: Decision, observer: ObserverReport?, classifier: ClassifierReport?, policy: Policy,
        policyVersion: String, gateways: Gateways, minimumShare: Double
    ) -> SnapshotContent {
        let now = decision.now
        var statusByUpstream: [String: UpstreamStatus] = [:]
        for status in observer?.upstreams ?? [] { statusByUpstream[status.upstream] = status }

        let upstreams = decision.pools.map { pool in
            let status = statusByUpstream[pool.upstream]
            return UpstreamEntry(
                id: pool.upstream, state: pool.state.rawValue,
                capacity: DimensionValues(
                    rpm: pool.capacity.rpm ?? SnapshotContent.unlimited,
                    tpm: pool.capacity.tpm ?? SnapshotContent.unlimited),
                circuitOpen: status?.circuitOpen ?? (pool.state == .overloaded), shed: status?.shed ?? [])
        }

        // The statuses are sorted by key, like the allocations: walk both in step instead of hashing
        // (sorted again here if a classifier ever hands them over unsorted).
        var statuses = classifier?.statuses ?? []
        if zip(statuses, statuses.dropFirst()).contains(where: { !($0.key < $1.key) }) {
            statuses.sort { $0.key < $1.key }
        }
        var statusCursor = 0

        // Gateways of this version: the active ones. A gateway id that reports telemetry but has never polled
        // enforces nothing: given a share while others poll, that part of its tenants' allocations was enforced
        // nowhere (outside evaluation round 22: a third of every new tenant's for as long as its split stayed even).
        // Before any gateway has polled (a fresh start), every one with demand shares, minus the gone.
        var gatewaySet = Set(gateways.active)
        if gatewaySet.isEmpty {
            for status in statuses { for gateway in status.gatewayShares.keys { gatewaySet.insert(gateway) } }
            gatewaySet.subtract(gateways.gone)
        }
        let gatewayIDs = gatewaySet.sorted()
        var gatewayIndex: [String: Int32] = [:]
        for (position, id) in gatewayIDs.enumerated() { gatewayIndex[id] = Int32(position) }
        // Per upstream, the gateways that report any of its tenants: where a new tenant's calls will land.
        var upstreamGateways: [String: Set<String>] = [:]
        for status in statuses where !status.gatewayShares.isEmpty {
            upstreamGateways[status.key.upstream, default: []].formUnion(status.gatewayShares.keys)
        }
        var spansPlanMemo: [String: Bool] = [:]
        func spansPlan(_ upstream: String) -> Bool {
            if let known = spansPlanMemo[upstream] { return known }
            let universe = upstreamGateways[upstream] ?? []
            let spans = !universe.isEmpty && gatewayIDs.allSatisfy { universe.contains($0) }
            spansPlanMemo[upstream] = spans
            return spans
        }

        var tenants: [TenantEntry] = []
        var fallback: [FallbackEntry] = []
        var slices: [[SlicePlan.Slice]?] = []
        tenants.reserveCapacity(decision.allocations.count)
        slices.reserveCapacity(decision.allocations.count)
        var bucketSeconds: [String: Double] = [:]
        for allocation in decision.allocations {
            let key = AllocationKey(tenant: allocation.tenant, upstream: allocation.upstream)
            while statusCursor < statuses.count, statuses[statusCursor].key < key { statusCursor += 1 }
            let status =
                statusCursor < statuses.count && statuses[statusCursor].key == key ? statuses[statusCursor] : nil
            let seconds =
                bucketSeconds[allocation.tier]
                ?? {
                    let value = policy.tier(named: allocation.tier)?.bucketSeconds ?? 10
                    bucketSeconds[allocation.tier] = value
                    return value
                }()
            let entry = tenantEntry(allocation, status: status, now: now)
            tenants.append(entry)
            if allocation.fallback.rpm > 0 || allocation.fallback.tpm > 0 {
                fallback.append(
                    FallbackEntry(
                        id: allocation.tenant, upstream: allocation.upstream,
                        rpm: bucket(rate: allocation.fallback.rpm, bucketSeconds: seconds, requests: true),
                        tpm: bucket(rate: allocation.fallback.tpm, bucketSeconds: seconds, requests: false)))
            }
            slices.append(
                status.flatMap { status in
                    // Spread over every gateway of the version: the plan's even split, without a list of slices
                    // (10,000 new tenants behind many gateways would otherwise each carry one per gateway).
                    if status.young, spansPlan(key.upstream) { return nil }
                    let shares = Self.shares(of: status, upstreamGateways: upstreamGateways[key.upstream])
                    return SlicePlan.split(
                        rpm: entry.rpm.rate, tpm: entry.tpm.rate, shares: shares, index: gatewayIndex,
                        minimumShare: minimumShare)
                })
        }

        let defaultTier = policy.tier(named: policy.defaultTier)
        let defaultSeconds = defaultTier?.bucketSeconds ?? 10
        var defaultRates = PerDimension<Double?>(nil)
        var fallbackDefault = PerDimension<Double?>(nil)
        for pool in decision.pools {
            for dimension in RateDimension.allCases {
                guard let capacity = pool.capacity[dimension] else { continue }
                defaultRates[dimension] = min(defaultRates[dimension] ?? .infinity, pool.defaultAllocation[dimension])
                let floor = defaultTier?.floor[dimension].resolved(capacity: capacity) ?? 0
                fallbackDefault[dimension] = min(fallbackDefault[dimension] ?? .infinity, floor)
            }
        }
        let defaultGuard = defaultTier?.starvationGuard ?? Tier.defaultStarvationGuard
        let defaults = RateLimits(
            rpm: bucket(
                rate: defaultRates.rpm ?? defaultGuard.rpm.resolved(capacity: 0), bucketSeconds: defaultSeconds,
                requests: true),
            tpm: bucket(
                rate: defaultRates.tpm ?? defaultGuard.tpm.resolved(capacity: 0), bucketSeconds: defaultSeconds,
                requests: false))
        let fallbackDefaults = RateLimits(
            rpm: bucket(rate: fallbackDefault.rpm ?? 0, bucketSeconds: defaultSeconds, requests: true),
            tpm: bucket(rate: fallbackDefault.tpm ?? 0, bucketSeconds: defaultSeconds, requests: false))

        var budgets: [String: TaskBudget] = [:]
        for (taskClass, budget) in policy.taskBudgets {
            budgets[taskClass.rawValue] = TaskBudget(maxCalls: budget.maxCalls, maxTokens: budget.maxTokens)
        }
        let snapshot = Snapshot(
            version: 0, generatedAt: now, expiresAt: now + policy.loop.leaseSeconds,
            refreshMs: refreshMilliseconds(policy), policyVersion: policyVersion, upstreams: upstreams,
            tenants: tenants, defaultLimits: defaults,
            fallback: Fallback(tenants: fallback, defaultLimits: fallbackDefaults), taskBudgets: budgets)
        return SnapshotContent(snapshot: snapshot, plan: SlicePlan(gateways: gatewayIDs, tenants: slices))
    }

    /// `refresh_ms`: the loop interval, which is how often a new version can appear.
    ///
    /// A policy may set any positive interval: the refresh is capped at 2³¹ − 1 ms (24.8 days), the most a
    /// gateway's timer commonly holds, so an interval past Int.max milliseconds does not trap the conversion.
    public static func refreshMilliseconds(_ policy: Policy) -> Int {
        max(1, Int(min((policy.loop.intervalSeconds * 1000).rounded(), Double(Int32.max))))
    }

    /// One tenant's entry (SPEC 7).
    ///
    /// - `deny` is published only when the allocation is zero: the engine sets `budget_exhausted` for a
    ///   hard budget that cuts to zero, and a gateway that denied everything while a rate is still being
    ///   dampened down to it would refuse traffic the engine still allows.
    /// - `burst_credit` is what is left of the credit now (calls and tokens), since the credit's
    ///   rate is not included in `rate`.
    static func tenantEntry(_ allocation: TenantAllocation, status: TenantStatus?, now: Double) -> TenantEntry {
        // A dimension the pool has no capacity for is unlimited, unless a spend budget or an absolute ceiling limits
        // the tenant there.
        let rpm = allocation.published(.rpm)
        let tpm = allocation.published(.tpm)
        let rates = [rpm?.rate, tpm?.rate].compactMap { $0 }
        let zero = !rates.isEmpty && rates.allSatisfy { $0 <= 0 }
        var credit: AllotProtocol.BurstCredit?
        if let granted = allocation.burstCredit, granted.expiresAt > now {
            let left = granted.remaining(at: now)
            credit = AllotProtocol.BurstCredit(calls: left.calls, tokens: left.tokens, expiresAt: granted.expiresAt)
        }
        var estimate: TokenEstimate?
        if let p50 = status?.completionTokensP50, let p95 = status?.completionTokensP95, p50.isFinite, p95.isFinite {
            estimate = TokenEstimate(p50: p50, p95: p95)
        }
        return TenantEntry(
            id: allocation.tenant, upstream: allocation.upstream, tier: allocation.tier, priority: allocation.priority,
            rpm: bucket(rpm), tpm: bucket(tpm), queueWeight: finite(allocation.queueWeight),
            reason: Reasons(
                rpm: rpm?.reason.rawValue ?? noCapacityReason, tpm: tpm?.reason.rawValue ?? noCapacityReason),
            burstCredit: credit, mode: allocation.mode.rawValue, maxConcurrency: allocation.maxConcurrency,
            tokenEstimate: estimate, deny: zero ? allocation.deny : nil, ceiling: ceiling(allocation))
    }

    /// A dimension's bucket as ``TenantAllocation/published(_:)`` has it, else unlimited.
    private static func bucket(_ published: (rate: Double, burst: Double, reason: AllocationReason)?) -> Bucket {
        Bucket(
            rate: finite(published?.rate ?? SnapshotContent.unlimited),
            burst: finite(published?.burst ?? SnapshotContent.unlimited))
    }

    /// `ceiling`: per dimension the tenant's ceiling (the policy's, after overrides), never below its lower bound
    /// or the rate published (a floor above the ceiling wins, as in the engine, also while the allocation climbs to
    /// it); nil when neither dimension has one. Gateways lend a tenant idle allocation only up to it (outside
    /// evaluation round 19: a tenant with an 8 % ceiling, allocated it, was served twice that from what others left
    /// idle, while weight-1 tenants starved). A spend budget's cap bounds it too, never below the rate published
    /// (a budget binds over a floor): a tenant throttled to land on its budget borrowed past the cap before.
    static func ceiling(_ allocation: TenantAllocation) -> DimensionValues? {
        func bound(_ dimension: DimensionAllocation?, _ limit: BudgetLimit?) -> Double {
            guard let dimension else { return limit.map { finite($0.rate) } ?? .infinity }
            let explanation = dimension.explanation
            var bound = Double.infinity
            if let cap = explanation.ceiling, cap.isFinite, cap < SnapshotContent.unlimited {
                bound = max(finite(cap), finite(explanation.lower), finite(dimension.rate))
            }
            if let cap = explanation.budgetCap, cap.isFinite, cap < SnapshotContent.unlimited {
                bound = min(bound, max(finite(cap), finite(dimension.rate)))
            }
            return bound
        }
        let ceiling = DimensionValues(
            rpm: bound(allocation.rpm, allocation.budgetLimit.rpm),
            tpm: bound(allocation.tpm, allocation.budgetLimit.tpm))
        return ceiling.rpm.isFinite || ceiling.tpm.isFinite ? ceiling : nil
    }

    /// The reason published for a dimension the pool has no capacity for (rate ``SnapshotContent/unlimited``);
    /// the same word as the engine's `no_capacity` alert.
    public static let noCapacityReason = "no_capacity"

    /// A bucket for `rate` per minute: `rate × bucket_s / 60`, at least one request for RPM so that a
    /// small positive rate can admit anything at all (the engine's rule, SPEC 7 `burst`).
    static func bucket(rate: Double, bucketSeconds: Double, requests: Bool) -> Bucket {
        let rate = finite(rate)
        guard rate > 0 else { return Bucket(rate: 0, burst: 0) }
        return Bucket(rate: rate, burst: max(rate * bucketSeconds / 60, requests ? 1 : 0))
    }

    /// Non-finite values never reach the wire (JSON cannot carry them; gateways would reject the document).
    static func finite(_ value: Double) -> Double {
        value.isFinite ? max(0, value) : (value > 0 ? SnapshotContent.unlimited : 0)
    }
}
