/// The business's priority policy (SPEC 10): tiers, upstream pools, tenants, budgets and the loop's
/// tuning, as loaded from `policies/*.json` by `Policy.load(files:)` (see `policies/README.md` for
/// every field, its unit and its default).
///
/// A `Policy` is an immutable value: the server swaps in a new one on reload, and every decision
/// and plan is a pure function of the policy it is given. Lookups by name are O(1); the listing
/// properties are sorted (tiers by priority then name, everything else by id) so that nothing a
/// policy produces depends on dictionary order. `canonicalBytes` gives a stable form to hash into
/// `policy_version`.
public struct Policy: Sendable, Hashable {
    /// Loop timing.
    public var loop: LoopSettings
    /// Allocation settings: safety margin, demand headroom, surplus mode, burst reserve.
    public var allocation: AllocationSettings
    /// Dampening parameters (SPEC 6.6).
    public var dampening: DampeningSettings
    /// The tier of tenants the policy does not list.
    public var defaultTier: String
    /// Currency and the default price.
    public var costs: CostSettings
    /// Per task class, the most calls and tokens one `task_id` may use.
    public var taskBudgets: [TaskClass: TaskBudgetPolicy]
    /// Alert thresholds.
    public var alerts: AlertThresholds
    /// Proposal lifetimes.
    public var proposals: ProposalSettings
    /// Classifier windows and thresholds (used by the Tenant Consumption Classifier, SPEC 5).
    public var classifier: ClassifierSettings
    /// Observer windows, factors and thresholds (used by the Upstream Capacity Observer, SPEC 4).
    public var observer: ObserverSettings

    private var tiersByName: [String: Tier]
    private var upstreamsByID: [String: UpstreamPolicy]
    private var tenantsByID: [String: TenantPolicy]

    /// Creates a policy. The defaults are the built-in values `policies/README.md` documents; with
    /// no tiers given, a single `standard` tier (priority 2) exists so the policy is usable.
    public init(
        loop: LoopSettings = LoopSettings(), allocation: AllocationSettings = AllocationSettings(),
        dampening: DampeningSettings = DampeningSettings(), defaultTier: String = "standard",
        tiers: [Tier] = [Tier(name: "standard", priority: 2)], upstreams: [UpstreamPolicy] = [],
        tenants: [TenantPolicy] = [], costs: CostSettings = CostSettings(),
        taskBudgets: [TaskClass: TaskBudgetPolicy] = [:], alerts: AlertThresholds = AlertThresholds(),
        proposals: ProposalSettings = ProposalSettings(), classifier: ClassifierSettings = ClassifierSettings(),
        observer: ObserverSettings = ObserverSettings()
    ) {
        self.loop = loop
        self.allocation = allocation
        self.dampening = dampening
        self.defaultTier = defaultTier
        self.costs = costs
        self.taskBudgets = taskBudgets
        self.alerts = alerts
        self.proposals = proposals
        self.classifier = classifier
        self.observer = observer
        self.tiersByName = Dictionary(tiers.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
        self.upstreamsByID = Dictionary(upstreams.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        self.tenantsByID = Dictionary(tenants.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// The tiers, most important first (priority, then name).
    public var tiers: [Tier] {
        tiersByName.values.sorted { $0.priority != $1.priority ? $0.priority < $1.priority : $0.name < $1.name }
    }

    /// The declared upstream pools, by id.
    public var upstreams: [UpstreamPolicy] { upstreamsByID.values.sorted { $0.id < $1.id } }

    /// The tenants the policy assigns, by id.
    public var tenants: [TenantPolicy] { tenantsByID.values.sorted { $0.id < $1.id } }

    /// The tier called `name`.
    public func tier(named name: String) -> Tier? { tiersByName[name] }

    /// The policy's entry for tenant `id`, if it lists one.
    public func tenant(_ id: String) -> TenantPolicy? { tenantsByID[id] }

    /// The declared upstream pool `id`.
    public func upstream(_ id: String) -> UpstreamPolicy? { upstreamsByID[id] }

    /// Why an operator's request may not name `upstream`: nil when the policy declares it or it is among
    /// `tracked` (pools the loop follows from telemetry without a declaration), else the message, with the
    /// nearest known name. An override or a burst for a misspelt pool was stored and never applied.
    public func unknownUpstreamMessage(_ upstream: String, tracked: [String]) -> String? {
        if upstreamsByID[upstream] != nil || tracked.contains(upstream) { return nil }
        let known = Set(upstreamsByID.keys).union(tracked).sorted()
        return NameSuggestion.unknownMessage("upstream", upstream, known: known)
    }

    /// The tier a tenant belongs to: its policy assignment, else the default tier.
    /// (Overrides are applied on top by the engine.)
    public func tierName(ofTenant id: String) -> String { tenantsByID[id]?.tier ?? defaultTier }

    /// Adds or replaces a tier.
    public mutating func setTier(_ tier: Tier) { tiersByName[tier.name] = tier }

    /// Adds or replaces an upstream pool.
    public mutating func setUpstream(_ upstream: UpstreamPolicy) { upstreamsByID[upstream.id] = upstream }

    /// Adds or replaces a tenant entry.
    public mutating func setTenant(_ tenant: TenantPolicy) { tenantsByID[tenant.id] = tenant }

    /// The rank of each tier in priority order (0 = most important): degraded mode honours floors
    /// rank by rank. Tiers of equal priority share a rank: where capacity runs out their tenants share
    /// what is left in proportion to their floors, as the tenants of one tier do, and as the gateways
    /// (whose borrowing exemption reads the priority number) already treated them. Ordering them by
    /// name had put "gold" before "silver" of the same priority for no reason anyone had written down.
    public var tierRanks: [String: Int] {
        let priorities = Set(tiersByName.values.map(\.priority)).sorted()
        let rank = Dictionary(uniqueKeysWithValues: priorities.enumerated().map { ($0.element, $0.offset) })
        return tiersByName.mapValues { rank[$0.priority] ?? 0 }
    }

    /// The price of an upstream pool, and whether it was priced (false → the default price applies
    /// and the usage must raise an `unknown_price` alert: an unknown model is never free).
    public func price(ofUpstream id: String) -> (price: Price, known: Bool) {
        if let price = upstreamsByID[id]?.price { return (price, true) }
        return (costs.defaultPrice, false)
    }

    /// The budgets that apply to a tenant in `tierName`: its own, plus its tier's for any window it
    /// does not define itself. Sorted by window.
    public func budgets(ofTenant id: String, tierName: String) -> [SpendBudget] {
        let own = tenantsByID[id]?.budgets ?? []
        var byWindow: [BudgetWindow: SpendBudget] = [:]
        for budget in tiersByName[tierName]?.budgets ?? [] { byWindow[budget.window] = budget }
        for budget in own { byWindow[budget.window] = budget }
        return byWindow.values.sorted { $0.window < $1.window }
    }
}

/// Loop timing (SPEC 2, 7).
public struct LoopSettings: Sendable, Hashable, Codable {
    /// Seconds between ticks.
    public var intervalSeconds: Double
    /// Snapshot lease: gateways enforce a snapshot for this long, then fall back to floors.
    public var leaseSeconds: Double
    /// A tenant absent from the classifier's input this long is dropped from the engine state
    /// (dampers, debt, record).
    public var forgetAfterSeconds: Double

    public init(intervalSeconds: Double = 5, leaseSeconds: Double = 300, forgetAfterSeconds: Double = 3600) {
        self.intervalSeconds = intervalSeconds
        self.leaseSeconds = leaseSeconds
        self.forgetAfterSeconds = forgetAfterSeconds
    }
}

/// Dampening parameters (SPEC 6.6). Fractions are of the tenant's currently published value, with
/// `minStep` as the smallest step allowance so a tenant near zero can still move.
public struct DampeningSettings: Sendable, Hashable {
    /// EWMA weight of the newest target, in `(0, 1]` (1 = no smoothing).
    public var alpha: Double
    /// Target moves smaller than this fraction of the published value are ignored.
    public var deadband: Double
    /// A direction change applies only after the target stayed on the new side this many ticks.
    public var persistTicks: Int
    /// Largest rise per tick as a fraction of the published value.
    public var maxUp: Double
    /// Largest fall per tick as a fraction of the published value (capacity drops, ceilings and
    /// budget caps bypass it).
    public var maxDown: Double
    /// The step allowance never goes below this (absolute, or a percentage of `C`); also the
    /// reference size for the deadband of values near zero.
    public var minStep: Quantity
    /// A tenant whose published value covers what it needs (its allocation before the surplus) keeps it
    /// while the pool's surplus is re-divided: the surplus moves only as far as other tenants' needs, the
    /// capacity and the surplus left unallocated require (``Dampening``, step 0).
    public var holdSurplus: Bool

    public init(
        alpha: Double = 0.3, deadband: Double = 0.05, persistTicks: Int = 3, maxUp: Double = 0.25,
        maxDown: Double = 0.5, minStep: Quantity = .percent(1), holdSurplus: Bool = true
    ) {
        self.alpha = alpha
        self.deadband = deadband
        self.persistTicks = persistTicks
        self.maxUp = maxUp
        self.maxDown = maxDown
        self.minStep = minStep
        self.holdSurplus = holdSurplus
    }
}

/// Currency and the fallback price (SPEC 6, cost governance).
public struct CostSettings: Sendable, Hashable {
    /// ISO 4217 code the prices and budgets are in.
    public var currency: String
    /// The price of an upstream the price table does not list: deliberately not free.
    public var defaultPrice: Price

    public init(
        currency: String = "USD",
        defaultPrice: Price = Price(inputPerMillionTokens: 10, outputPerMillionTokens: 30, perRequest: 0)
    ) {
        self.currency = currency
        self.defaultPrice = defaultPrice
    }
}

/// Alert thresholds (SPEC 5, 7, 9).
public struct AlertThresholds: Sendable, Hashable, Codable {
    /// `starved`: served below this fraction of the allocation while demand is at or above it…
    public var starvationRatio: Double
    /// …for this many seconds.
    public var starvationWindowSeconds: Double
    /// `gateway_lag`: a gateway enforcing a version this many versions behind…
    public var gatewayLagVersions: Int
    /// …or not having polled for this many seconds.
    public var gatewayLagSeconds: Double
    /// `drift`: what all gateways admitted for a tenant exceeds its allocation by this fraction…
    public var driftRatio: Double
    /// …over this many seconds.
    public var driftWindowSeconds: Double
    /// `upstream_errors`: share of attempts failing with server errors or timeouts.
    public var upstreamErrorRate: Double

    public init(
        starvationRatio: Double = 0.7, starvationWindowSeconds: Double = 300, gatewayLagVersions: Int = 3,
        gatewayLagSeconds: Double = 30, driftRatio: Double = 0.1, driftWindowSeconds: Double = 60,
        upstreamErrorRate: Double = 0.05
    ) {
        self.starvationRatio = starvationRatio
        self.starvationWindowSeconds = starvationWindowSeconds
        self.gatewayLagVersions = gatewayLagVersions
        self.gatewayLagSeconds = gatewayLagSeconds
        self.driftRatio = driftRatio
        self.driftWindowSeconds = driftWindowSeconds
        self.upstreamErrorRate = upstreamErrorRate
    }
}

/// Proposal lifetimes (SPEC 6.7).
public struct ProposalSettings: Sendable, Hashable, Codable {
    /// A pending proposal nobody decided on expires after this many seconds.
    public var ttlSeconds: Double
    /// An approval holds for this many seconds.
    public var approvalTTLSeconds: Double
    /// A rejected proposal is not filed again for this many seconds.
    public var rejectCooldownSeconds: Double

    public init(ttlSeconds: Double = 3600, approvalTTLSeconds: Double = 86_400, rejectCooldownSeconds: Double = 3600) {
        self.ttlSeconds = ttlSeconds
        self.approvalTTLSeconds = approvalTTLSeconds
        self.rejectCooldownSeconds = rejectCooldownSeconds
    }
}

/// Classifier windows and thresholds (SPEC 5), carried by the policy so that one file tunes the loop.
public struct ClassifierSettings: Sendable, Hashable, Codable {
    /// Short EWMA window, seconds.
    public var shortWindowSeconds: Double
    /// Long EWMA window, seconds.
    public var longWindowSeconds: Double
    /// No demand for this long → `idle`.
    public var idleAfterSeconds: Double
    /// Fewer samples than this → `cold_start` (the tier prior is blended in).
    public var coldStartSamples: Int
    /// Demand above allocation for this long → `sustained_over`.
    public var sustainedOverSeconds: Double
    /// The share of a pool's capacity, in `[0, 1]`, its `cold_start` tenants' guessed demand (what their tier priors
    /// and their first readings add beyond the evidence) may always take together, however much the established
    /// tenants want; beyond the room those leave, and this, each newcomer's guess is scaled down alike (a flood of
    /// new tenants does not take the pool from tenants with evidence).
    public var coldStartShare: Double

    public init(
        shortWindowSeconds: Double = 60, longWindowSeconds: Double = 900, idleAfterSeconds: Double = 300,
        coldStartSamples: Int = 30, sustainedOverSeconds: Double = 300, coldStartShare: Double = 0.25
    ) {
        self.shortWindowSeconds = shortWindowSeconds
        self.longWindowSeconds = longWindowSeconds
        self.idleAfterSeconds = idleAfterSeconds
        self.coldStartSamples = coldStartSamples
        self.sustainedOverSeconds = sustainedOverSeconds
        self.coldStartShare = coldStartShare
    }

    private enum CodingKeys: String, CodingKey {
        case shortWindowSeconds, longWindowSeconds, idleAfterSeconds, coldStartSamples, sustainedOverSeconds
        case coldStartShare
    }

    /// Settings encoded before `coldStartShare` existed decode with the default.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        shortWindowSeconds = try container.decode(Double.self, forKey: .shortWindowSeconds)
        longWindowSeconds = try container.decode(Double.self, forKey: .longWindowSeconds)
        idleAfterSeconds = try container.decode(Double.self, forKey: .idleAfterSeconds)
        coldStartSamples = try container.decode(Int.self, forKey: .coldStartSamples)
        sustainedOverSeconds = try container.decode(Double.self, forKey: .sustainedOverSeconds)
        coldStartShare = try container.decodeIfPresent(Double.self, forKey: .coldStartShare) ?? 0.25
    }
}
