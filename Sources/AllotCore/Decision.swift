/// The Policy Engine's output for one tick: what to publish, and why.
///
/// The Publisher turns `allocations` into a snapshot (SPEC 7): each `TenantAllocation` carries the
/// per-dimension rate, bucket size and reason, the burst credit, the deny reason, the gateway mode,
/// `max_concurrency`, the queue weight and the floors-only `fallback`. Every list is sorted (pools
/// and allocations by upstream then tenant, proposals by id, alerts by kind then subject), so equal
/// inputs give equal decisions.
public struct Decision: Sendable {
    /// The tick's time.
    public var now: Double
    /// Per tenant and pool.
    public var allocations: [TenantAllocation]
    /// Per pool: capacity, sums, degraded flags, fair-share levels, burst reserve.
    public var pools: [PoolSummary]
    /// Every proposal the engine holds (pending, approved, rejected in cool-down), by id.
    public var proposals: [Proposal]
    /// Proposals that expired this tick undecided (reported once).
    public var expiredProposals: [Proposal]
    /// What became of each proposal resolution given this tick.
    public var resolutions: [ResolutionOutcome]
    /// What became of each burst request given this tick.
    public var burstDecisions: [BurstDecision]
    /// The burst credits the engine lent unasked, to tenants detected mid-task (SPEC 6.5), as the requests it
    /// made for them (id `detected-…`); their outcomes are in `burstDecisions`. By pool, then tenant.
    public var detectedBursts: [BurstRequest]
    /// Every evaluated budget of every tenant in the decision.
    public var budgets: [BudgetStatus]
    /// Conditions to raise: degraded mode, budgets, unknown prices, missing capacity, defaults.
    public var alerts: [EngineAlert]

    /// The allocation of `tenant` on `upstream`.
    public func allocation(tenant: String, upstream: String) -> TenantAllocation? {
        allocations.first { $0.tenant == tenant && $0.upstream == upstream }
    }

    /// The summary of `upstream`.
    public func pool(_ upstream: String) -> PoolSummary? { pools.first { $0.upstream == upstream } }
}

/// Whether a proposal resolution was applied (false: unknown id, already decided, or expired).
public struct ResolutionOutcome: Sendable, Hashable, Codable {
    public var resolution: ProposalResolution
    public var applied: Bool
}

/// One tenant's allocation on one pool.
public struct TenantAllocation: Sendable, Hashable {
    public var tenant: String
    public var upstream: String
    /// The tier in force (after overrides) and its priority (0 = most important).
    public var tier: String
    public var priority: Int
    public var tenantClass: TenantClass
    /// Requests per minute; nil when the pool has no capacity for the dimension.
    public var rpm: DimensionAllocation?
    /// Tokens per minute; nil when the pool has no capacity for the dimension.
    public var tpm: DimensionAllocation?
    /// The active burst credit, with its rate reserved on top of the allocation.
    public var burstCredit: BurstCredit?
    /// Burst debt and repayment record (SPEC 6.10: visible).
    public var burstAccount: BurstAccount
    /// `budget_exhausted` while a `hard` budget threshold with `hard_action: zero` is reached: the reason
    /// gateways give when they deny this tenant everything (its allocation is zero). At the default
    /// `starvation_guard` there is none: gateways admit the guard's rate (outside evaluation round 20: the
    /// operator view said denied while the snapshot, published only when zero, did not).
    public var deny: String?
    /// From the tier: `enforce` or `shadow`, `max_concurrency`, queue weight.
    public var mode: GatewayMode
    public var maxConcurrency: Int
    public var queueWeight: Double
    /// What gateways fall back to after the lease expires: the tenant's floors, scaled down
    /// proportionally when the pool's floors exceed its capacity.
    public var fallback: PerDimension<Double>
    /// The override in force, if any.
    public var override: Override?
    /// Per dimension the pool has no capacity for (``rpm`` or ``tpm`` nil, published unlimited): the limit a spend
    /// budget puts on the tenant there (a throttle's TPM cap, a hard cut) or its absolute ceiling, nil when none.
    /// Budgets are per tenant across pools, and the pool nobody declared is the one nobody priced (outside
    /// evaluation round 20: a tenant cut to zero elsewhere was published 10¹² rpm and tpm there); an override's
    /// ceiling on a pool known only from telemetry was answered "applied" and not enforced (round 29).
    public var budgetLimit = PerDimension<BudgetLimit?>(rpm: nil, tpm: nil)

    /// The allocation of `dimension`.
    public subscript(dimension: RateDimension) -> DimensionAllocation? {
        switch dimension {
        case .rpm: rpm
        case .tpm: tpm
        }
    }
}

extension TenantAllocation {
    /// What gateways are given for `dimension`: the allocation, or where the pool has no capacity for the dimension
    /// the limit a spend budget or an absolute ceiling puts on the tenant (``budgetLimit``, reason `budget`,
    /// `ceiling`, `override` or `floor`); nil where the tenant is unlimited there. For the operator views and metrics,
    /// which show what the snapshot publishes.
    public func published(_ dimension: RateDimension) -> (rate: Double, burst: Double, reason: AllocationReason)? {
        if let value = self[dimension] { return (value.rate, value.burst, value.reason) }
        if let limit = budgetLimit[dimension] { return (limit.rate, limit.burst, limit.reason) }
        return nil
    }
}

/// The limit on a dimension the pool has no capacity for (``TenantAllocation/budgetLimit``): a spend budget's, or
/// the tenant's absolute ceiling (its tier's, its own or an override's), whichever is lower.
public struct BudgetLimit: Sendable, Hashable {
    /// Per minute.
    public var rate: Double
    /// Token-bucket capacity, as a dimension allocation's: `rate × bucket_s / 60`, at least one request for RPM
    /// (none at rate 0).
    public var burst: Double
    /// `budget`, `ceiling` or `override` (a ceiling an override set).
    public var reason: AllocationReason

    public init(rate: Double, burst: Double, reason: AllocationReason = .budget) {
        self.rate = rate
        self.burst = burst
        self.reason = reason
    }

    /// A limit of `rate` with the bucket a dimension allocation of the tier would have.
    init(rate: Double, tier: Tier, dimension: RateDimension, reason: AllocationReason) {
        let rate = max(0, rate)
        self.init(
            rate: rate, burst: rate > 0 ? max(rate * tier.bucketSeconds / 60, dimension == .rpm ? 1 : 0) : 0,
            reason: reason)
    }
}

/// One dimension of a tenant's allocation.
public struct DimensionAllocation: Sendable, Hashable {
    /// The published rate, per minute.
    public var rate: Double
    /// Token-bucket capacity: `rate × bucket_s / 60`, at least one request for RPM.
    public var burst: Double
    public var reason: AllocationReason
    /// Every input and step behind `rate` (SPEC 6.9).
    public var explanation: AllocationExplanation
}

/// One pool after a decision.
public struct PoolSummary: Sendable, Hashable {
    public var upstream: String
    public var state: UpstreamState
    /// `C_est` per dimension (nil: not allocated).
    public var capacityEstimate: PerDimension<Double?>
    /// `C` per dimension, after the safety margin.
    public var capacity: PerDimension<Double?>
    /// Σ published allocations (excluding burst credits).
    public var allocated: PerDimension<Double>
    /// Burst credit rates reserved.
    public var creditsLent: PerDimension<Double>
    /// `C − allocated − credits`, never negative.
    public var unallocated: PerDimension<Double>
    /// The burst reserve this tick (what credits may use).
    public var burstReserve: PerDimension<Double>
    /// Degraded mode per dimension (SPEC 6.4).
    public var degraded: PerDimension<Bool>
    /// The fair-share level `f` per dimension (nil: not allocated).
    public var level: PerDimension<Double?>
    /// Limits for tenants the snapshot does not list: the default tier's starvation guard (small
    /// by design, and not reserved: the next tick registers and allocates such tenants properly).
    public var defaultAllocation: PerDimension<Double>
    /// Tenants allocated on the pool.
    public var tenantCount: Int
    /// Whether the policy prices this pool (false: default price, `unknown_price` alert).
    public var priced: Bool
}

/// A condition the engine raises for `/v1/alerts`, logs and metrics. Level-triggered: present in
/// every decision while the condition holds; the server tracks when each started and ended.
public struct EngineAlert: Sendable, Hashable, Codable, Comparable {
    public enum Severity: String, Sendable, Hashable, Codable {
        case info
        case warning
        case critical
    }

    /// `degraded_mode`, `no_capacity`, `unknown_price`, `budget_soft`, `budget_throttle`,
    /// `budget_hard`, `burst_default`, `guardrail_proposal`.
    public var kind: String
    public var severity: Severity
    public var upstream: String?
    public var tenant: String?
    public var dimension: RateDimension?
    public var message: String

    public init(
        kind: String, severity: Severity, upstream: String? = nil, tenant: String? = nil,
        dimension: RateDimension? = nil,
        message: String
    ) {
        self.kind = kind
        self.severity = severity
        self.upstream = upstream
        self.tenant = tenant
        self.dimension = dimension
        self.message = message
    }

    public static func < (lhs: EngineAlert, rhs: EngineAlert) -> Bool {
        (lhs.kind, lhs.upstream ?? "", lhs.tenant ?? "", lhs.dimension?.rawValue ?? "", lhs.message)
            < (rhs.kind, rhs.upstream ?? "", rhs.tenant ?? "", rhs.dimension?.rawValue ?? "", rhs.message)
    }
}
