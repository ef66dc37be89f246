/// Where a tenant stands against one spend budget (SPEC 6, cost governance).
public struct BudgetStatus: Sendable, Hashable, Codable {
    /// The highest threshold crossed.
    public enum Level: String, Sendable, Hashable, Codable, Comparable {
        case ok
        /// Projected spend ≥ `soft`: alert only.
        case soft
        /// Projected spend ≥ `throttle`: TPM capped so the window lands on its budget.
        case throttle
        /// Spend so far ≥ `hard`: cut to the starvation guard (or zero); gateways deny.
        case hard

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rank < rhs.rank }

        private var rank: Int {
            switch self {
            case .ok: 0
            case .soft: 1
            case .throttle: 2
            case .hard: 3
            }
        }
    }

    public var tenant: String
    public var budget: SpendBudget
    /// Spent so far in the window.
    public var spent: Double
    /// `spent + burn rate × time left`.
    public var projected: Double
    /// The window's end (seconds since the Unix epoch).
    public var windowEnd: Double
    public var level: Level
    /// At `throttle`: the spend rate (currency per second) that lands the window exactly on `amount`.
    public var allowedBurnRatePerSecond: Double?
}

/// The spend maths of cost governance: pricing usage, projecting a window and turning a budget
/// into caps. Pure functions of their inputs.
public enum CostGovernance {
    /// The cost of usage on `upstream`: the price table entry, or the default price with
    /// `priced == false` (the caller raises an `unknown_price` alert: an unknown model is never free).
    public static func cost(
        upstream: String, inputTokens: Double, outputTokens: Double, requests: Double, policy: Policy
    ) -> (amount: Double, priced: Bool) {
        let (price, known) = policy.price(ofUpstream: upstream)
        return (price.cost(inputTokens: inputTokens, outputTokens: outputTokens, requests: requests), known)
    }

    /// Evaluates each budget of a tenant against its spend at `now`. A budget without a spend
    /// observation for its window counts as nothing spent.
    public static func evaluate(
        tenant: String, budgets: [SpendBudget], spend: [TenantSpend], now: Double
    ) -> [BudgetStatus] {
        budgets.map { budget in
            let observed = spend.first { $0.tenant == tenant && $0.window == budget.window }
            let spent = max(0, observed?.spent ?? 0)
            let burn = max(0, observed?.burnRatePerSecond ?? 0)
            let end = budget.window.interval(containing: now).end
            let left = max(0, end - now)
            let projected = spent + burn * left
            var level = BudgetStatus.Level.ok
            var allowed: Double?
            if spent >= budget.hardAmount {
                level = .hard
            } else if projected >= budget.throttleAmount {
                level = .throttle
                allowed = left > 0 ? max(0, budget.amount - spent) / left : 0
            } else if projected >= budget.softAmount {
                level = .soft
            }
            return BudgetStatus(
                tenant: tenant, budget: budget, spent: spent, projected: projected, windowEnd: end,
                level: level, allowedBurnRatePerSecond: allowed)
        }
    }

    /// One pool's share of a throttled tenant's traffic, for splitting its allowed spend rate.
    public struct PoolUsage: Sendable, Hashable {
        public var upstream: String
        /// Served (else demanded) tokens per minute on the pool.
        public var tokensPerMinute: Double
        /// The price of one token for the tenant's input/output mix on that pool.
        public var pricePerToken: Double

        public init(upstream: String, tokensPerMinute: Double, pricePerToken: Double) {
            self.upstream = upstream
            self.tokensPerMinute = tokensPerMinute
            self.pricePerToken = pricePerToken
        }
    }

    /// The TPM cap per pool that makes a throttled tenant spend at `allowedRate` (currency per
    /// second) in total — i.e. land the window exactly on its budget if its traffic mix holds. The
    /// allowed rate is split across pools in proportion to what the tenant currently spends on each
    /// (equally when it spends nothing), then converted to tokens at each pool's price.
    public static func throttleCaps(allowedRate: Double, usage: [PoolUsage]) -> [String: Double] {
        guard !usage.isEmpty else { return [:] }
        let spendRates = usage.map { max(0, $0.tokensPerMinute) * max(0, $0.pricePerToken) }
        let total = spendRates.reduce(0, +)
        var caps: [String: Double] = [:]
        for (index, pool) in usage.enumerated() {
            let share = total > 0 ? spendRates[index] / total : 1 / Double(usage.count)
            let perMinute = max(0, allowedRate) * 60 * share
            caps[pool.upstream] = pool.pricePerToken > 0 ? perMinute / pool.pricePerToken : .infinity
        }
        return caps
    }
}
