/// A service tier (SPEC 10): its share of capacity, its guarantees and its guardrails.
///
/// Tier names are data (`critical`, `premium`, `standard`, `free` ship by default). Every
/// per-dimension value is a `Quantity`: absolute per minute, or a percentage of the pool's `C`.
public struct Tier: Sendable, Hashable {
    /// The tier's name, e.g. `premium`.
    public var name: String
    /// Lower is more important (0 = highest). Orders degraded mode and gateway admission queues.
    public var priority: Int
    /// Weight multiplier in the water-filling (`w_i` = tier weight × tenant weight). `> 0`.
    public var weight: Double
    /// Guaranteed floor `lo_i` per dimension.
    public var floor: PerDimension<Quantity>
    /// Ceiling `ce_i` per dimension.
    public var ceiling: PerDimension<Quantity>
    /// The engine never moves a tenant below this on its own (SPEC 6.7); crossing files a proposal.
    public var guardMin: PerDimension<Quantity>
    /// The engine never moves a tenant above this on its own (SPEC 6.7); crossing files a proposal.
    public var guardMax: PerDimension<Quantity>
    /// What every active tenant keeps in degraded mode (SPEC 6.4), and the `hard` budget cut.
    public var starvationGuard: PerDimension<Quantity>
    /// What an idle tenant holds (SPEC 6.1).
    public var idleAllocation: PerDimension<Quantity>
    /// The demand prior the classifier blends with a new tenant's first observations (SPEC 5).
    public var coldStartDemand: PerDimension<Quantity>
    /// Burst credit lending rules (SPEC 6.5, 6.10).
    public var burst: BurstPolicy
    /// Queue-wait objective at the gateway, milliseconds (SLO attainment is reported per tier).
    public var queueWaitSLOMilliseconds: Double
    /// Weight of this tier's requests in a gateway's admission queue; nil → the tier weight.
    public var queueWeight: Double?
    /// `enforce`, or `shadow` (count would-be denials without denying).
    public var mode: GatewayMode
    /// Most concurrent in-flight requests per tenant at one gateway.
    public var maxConcurrency: Int
    /// Token-bucket capacity as seconds of rate: `burst = rate × bucket_s / 60` (at least 1 request).
    public var bucketSeconds: Double
    /// Spend budgets every tenant of the tier has (each tenant its own), unless it defines a budget
    /// for the same window itself.
    public var budgets: [SpendBudget]

    public init(
        name: String, priority: Int, weight: Double = 1,
        floor: PerDimension<Quantity> = PerDimension(.zero),
        ceiling: PerDimension<Quantity> = PerDimension(.unbounded),
        guardMin: PerDimension<Quantity> = PerDimension(.zero),
        guardMax: PerDimension<Quantity> = PerDimension(.unbounded),
        starvationGuard: PerDimension<Quantity> = Tier.defaultStarvationGuard,
        idleAllocation: PerDimension<Quantity> = Tier.defaultIdleAllocation,
        coldStartDemand: PerDimension<Quantity> = Tier.defaultColdStartDemand,
        burst: BurstPolicy = BurstPolicy(), queueWaitSLOMilliseconds: Double = 5000, queueWeight: Double? = nil,
        mode: GatewayMode = .enforce, maxConcurrency: Int = 256, bucketSeconds: Double = 10,
        budgets: [SpendBudget] = []
    ) {
        self.name = name
        self.priority = priority
        self.weight = weight
        self.floor = floor
        self.ceiling = ceiling
        self.guardMin = guardMin
        self.guardMax = guardMax
        self.starvationGuard = starvationGuard
        self.idleAllocation = idleAllocation
        self.coldStartDemand = coldStartDemand
        self.burst = burst
        self.queueWaitSLOMilliseconds = queueWaitSLOMilliseconds
        self.queueWeight = queueWeight
        self.mode = mode
        self.maxConcurrency = maxConcurrency
        self.bucketSeconds = bucketSeconds
        self.budgets = budgets
    }

    /// 1 request and 1,000 tokens per minute: enough to keep a starved tenant's work trickling.
    public static let defaultStarvationGuard = PerDimension<Quantity>(rpm: .absolute(1), tpm: .absolute(1000))
    /// 1 request and 1,000 tokens per minute: an idle tenant can still send its first request.
    public static let defaultIdleAllocation = PerDimension<Quantity>(rpm: .absolute(1), tpm: .absolute(1000))
    /// 1 % of capacity in each dimension.
    public static let defaultColdStartDemand = PerDimension<Quantity>(rpm: .percent(1), tpm: .percent(1))

    /// The queue weight gateways use: `queue_weight`, or the tier weight.
    public var effectiveQueueWeight: Double { queueWeight ?? weight }
}

/// How gateways treat a tenant's limits (SPEC 7).
public enum GatewayMode: String, Sendable, Hashable, Codable, CaseIterable {
    /// Deny (or queue) requests over the limits.
    case enforce
    /// Count would-be denials without denying: safe roll-out of a new policy.
    case shadow
}

/// Burst credit lending rules of a tier (SPEC 6.5, 6.10).
public struct BurstPolicy: Sendable, Hashable {
    /// Whether tenants of the tier may borrow at all.
    public var enabled: Bool
    /// The largest credit, as a rate per dimension (absolute per minute or a percentage of `C`).
    public var maxCredit: PerDimension<Quantity>
    /// The longest credit, seconds.
    public var maxTTLSeconds: Double
    /// Debt must be repaid within this many seconds of the credit's end, or the credit defaults.
    public var repayWithinSeconds: Double
    /// After a default, no new credit for this many seconds (the repayment record).
    public var defaultCooldownSeconds: Double
    /// Whether the engine lends credit unasked to a tenant detected mid-task from its `task_id` fan-out (SPEC 6.5;
    /// `PoolTick.lendDetected`). On by default, as SPEC 6.5 has it.
    public var detectFanOut: Bool

    public init(
        enabled: Bool = true, maxCredit: PerDimension<Quantity> = PerDimension(.percent(10)),
        maxTTLSeconds: Double = 600, repayWithinSeconds: Double = 900, defaultCooldownSeconds: Double = 3600,
        detectFanOut: Bool = true
    ) {
        self.detectFanOut = detectFanOut
        self.enabled = enabled
        self.maxCredit = maxCredit
        self.maxTTLSeconds = maxTTLSeconds
        self.repayWithinSeconds = repayWithinSeconds
        self.defaultCooldownSeconds = defaultCooldownSeconds
    }
}
