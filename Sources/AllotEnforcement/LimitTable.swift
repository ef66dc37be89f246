import AllotProtocol

/// A (tenant, upstream) pair: the unit Allot allocates and a gateway's buckets are kept for.
struct TenantKey: Hashable, Sendable {
    let tenant: String
    let upstream: String
    /// Hashed once: the key is looked up several times per request, and hashing two strings each time was
    /// most of admission's cost.
    private let hash: Int

    init(tenant: String, upstream: String) {
        self.tenant = tenant
        self.upstream = upstream
        var hasher = Hasher()
        hasher.combine(tenant)
        hasher.combine(upstream)
        hash = hasher.finalize()
    }

    static func == (lhs: TenantKey, rhs: TenantKey) -> Bool {
        lhs.hash == rhs.hash && lhs.tenant == rhs.tenant && lhs.upstream == rhs.upstream
    }

    func hash(into hasher: inout Hasher) { hasher.combine(hash) }
}

/// What is in force for one (tenant, upstream): the snapshot's entry reduced to what admission reads.
struct TenantPolicy: Sendable, Equatable {
    var limits: RateLimits
    var queueWeight: Double
    var shadow: Bool
    var maxConcurrency: Int?
    var tokenEstimate: TokenEstimate?
    var deny: String?
    var burstCredit: BurstCredit?
    /// The tier's priority (0 first); `Int.max` when the snapshot lists no tenant entry (defaults, bootstrap).
    var priority = Int.max
    /// The entry's `ceiling` (its own allocation, what it borrows and its burst credit together; `.infinity` in a
    /// dimension without one), nil when it has none: ``TenantState/ceilingRoom``.
    var ceiling: DimensionValues?

    /// Whether it is a tenant's own entry of the snapshot (not `default`, fallback defaults or bootstrap limits).
    var isListed: Bool { priority != Int.max }
}

/// The limits a gateway enforces right now, derived from one snapshot: either its lease allocations or, once
/// `expires_at` has passed, its `fallback` floors (SPEC §7 "Leases / fail static").
///
/// Built once per snapshot (and once more at lease expiry), so admission only does dictionary lookups.
struct LimitTable: Sendable {
    /// The snapshot it came from; nil before the first snapshot (bootstrap or nothing).
    var snapshot: Snapshot?
    var inFallback: Bool
    var tenants: [TenantKey: TenantPolicy]
    /// For tenants the snapshot does not list: `default` (or `fallback.default`), with the gateway's defaults.
    var defaultPolicy: TenantPolicy?
    var upstreams: [String: UpstreamEntry]
    var taskBudgets: PerTaskClass<TaskBudget?>
    /// When only a new snapshot can change a denial (budget, circuit, zero allocation), retry after this.
    var refreshInterval: Double

    /// Whether any upstream's circuit is open (admission skips the upstream lookup otherwise).
    private(set) var hasOpenCircuit = false

    var version: Int64? { snapshot?.version }

    func policy(for key: TenantKey) -> TenantPolicy? {
        tenants[key] ?? defaultPolicy
    }

    /// Before any snapshot: the bootstrap limits for everyone, or nothing (requests wait for a snapshot).
    static func bootstrap(_ configuration: GatewayConfiguration) -> LimitTable {
        LimitTable(
            snapshot: nil, inFallback: false, tenants: [:],
            defaultPolicy: configuration.bootstrapLimits.map {
                TenantPolicy(
                    limits: $0, queueWeight: 1, shadow: false, maxConcurrency: configuration.defaultMaxConcurrency,
                    tokenEstimate: nil, deny: nil, burstCredit: nil)
            },
            upstreams: [:], taskBudgets: PerTaskClass(all: nil), refreshInterval: configuration.defaultRetryAfter)
    }

    /// The snapshot's lease allocations.
    static func lease(_ snapshot: Snapshot, _ configuration: GatewayConfiguration) -> LimitTable {
        var tenants: [TenantKey: TenantPolicy] = [:]
        tenants.reserveCapacity(snapshot.tenants.count)
        for entry in snapshot.tenants {
            tenants[TenantKey(tenant: entry.id, upstream: entry.upstream)] = TenantPolicy(
                limits: RateLimits(rpm: entry.rpm, tpm: entry.tpm), queueWeight: entry.queueWeight,
                shadow: entry.mode == "shadow", maxConcurrency: entry.maxConcurrency,
                tokenEstimate: entry.tokenEstimate,
                deny: entry.deny, burstCredit: entry.burstCredit, priority: entry.priority, ceiling: entry.ceiling)
        }
        return LimitTable(
            snapshot: snapshot, inFallback: false, tenants: tenants,
            defaultPolicy: defaultPolicy(snapshot.defaultLimits, configuration),
            upstreams: upstreams(snapshot), taskBudgets: taskBudgets(snapshot),
            refreshInterval: refreshInterval(snapshot, configuration)
        ).indexed()
    }

    /// The snapshot's `fallback` floors, for after its lease. Floors replace the rates; what is not a rate
    /// (mode, `max_concurrency`, token estimates, `deny`, queue weight, upstream states, task budgets) stays as
    /// the snapshot said: fail static, the ceiling too. Burst credits end with the lease. A tenant listed in the
    /// snapshot but not
    /// in `fallback` gets `fallback.default`.
    static func fallback(_ snapshot: Snapshot, _ configuration: GatewayConfiguration) -> LimitTable {
        var tenants: [TenantKey: TenantPolicy] = [:]
        let floors = Dictionary(
            snapshot.fallback.tenants.map { (TenantKey(tenant: $0.id, upstream: $0.upstream), $0) },
            uniquingKeysWith: { _, last in last })
        for entry in snapshot.tenants {
            let key = TenantKey(tenant: entry.id, upstream: entry.upstream)
            let floor = floors[key]
            tenants[key] = TenantPolicy(
                limits: floor.map { RateLimits(rpm: $0.rpm, tpm: $0.tpm) } ?? snapshot.fallback.defaultLimits,
                queueWeight: entry.queueWeight, shadow: entry.mode == "shadow", maxConcurrency: entry.maxConcurrency,
                tokenEstimate: entry.tokenEstimate, deny: entry.deny, burstCredit: nil, priority: entry.priority,
                ceiling: entry.ceiling)
        }
        for (key, floor) in floors where tenants[key] == nil {
            tenants[key] = TenantPolicy(
                limits: RateLimits(rpm: floor.rpm, tpm: floor.tpm), queueWeight: 1, shadow: false,
                maxConcurrency: configuration.defaultMaxConcurrency, tokenEstimate: nil, deny: nil, burstCredit: nil)
        }
        return LimitTable(
            snapshot: snapshot, inFallback: true, tenants: tenants,
            defaultPolicy: defaultPolicy(snapshot.fallback.defaultLimits, configuration),
            upstreams: upstreams(snapshot), taskBudgets: taskBudgets(snapshot),
            refreshInterval: refreshInterval(snapshot, configuration)
        ).indexed()
    }

    private static func defaultPolicy(_ limits: RateLimits, _ configuration: GatewayConfiguration) -> TenantPolicy {
        TenantPolicy(
            limits: limits, queueWeight: 1, shadow: false, maxConcurrency: configuration.defaultMaxConcurrency,
            tokenEstimate: nil, deny: nil, burstCredit: nil)
    }

    /// The table with the listed tenants' limits on each braked upstream scaled by its fractions (rates and
    /// bursts; a burst of at least one request stays at least one).
    func braked(_ brakes: [String: DimensionValues]) -> LimitTable {
        var table = self
        for (key, policy) in tenants {
            guard let brake = brakes[key.upstream] else { continue }
            var scaled = policy
            scaled.limits = RateLimits(
                rpm: Bucket(
                    rate: policy.limits.rpm.rate * brake.rpm,
                    burst: max(policy.limits.rpm.burst * brake.rpm, min(1, policy.limits.rpm.burst))),
                tpm: Bucket(rate: policy.limits.tpm.rate * brake.tpm, burst: policy.limits.tpm.burst * brake.tpm))
            // The ceiling by the same fraction: unscaled, the room above the braked rate would grow by what the
            // brake took.
            scaled.ceiling = policy.ceiling.map { DimensionValues(rpm: $0.rpm * brake.rpm, tpm: $0.tpm * brake.tpm) }
            table.tenants[key] = scaled
        }
        return table
    }

    /// The table with ``hasOpenCircuit`` filled in.
    private func indexed() -> LimitTable {
        var table = self
        table.hasOpenCircuit = upstreams.values.contains { $0.circuitOpen }
        return table
    }

    private static func upstreams(_ snapshot: Snapshot) -> [String: UpstreamEntry] {
        Dictionary(snapshot.upstreams.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
    }

    private static func taskBudgets(_ snapshot: Snapshot) -> PerTaskClass<TaskBudget?> {
        var budgets = PerTaskClass<TaskBudget?>(all: nil)
        for (name, budget) in snapshot.taskBudgets {
            if let taskClass = TaskClass(rawValue: name) { budgets[taskClass] = budget }
        }
        return budgets
    }

    private static func refreshInterval(_ snapshot: Snapshot, _ configuration: GatewayConfiguration) -> Double {
        snapshot.refreshMs > 0 ? Double(snapshot.refreshMs) / 1_000 : configuration.defaultRetryAfter
    }
}
