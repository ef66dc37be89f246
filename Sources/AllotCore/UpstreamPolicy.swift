/// An upstream provider/model pool as the policy declares it (SPEC 4, 10).
public struct UpstreamPolicy: Sendable, Hashable {
    /// The pool id, e.g. `openai/gpt-4o` (matches telemetry's `upstream`).
    public var id: String
    /// Declared capacity per minute, used until provider headers are seen; nil for a dimension the
    /// provider does not limit (it is then not allocated until an estimate exists).
    public var capacity: PerDimension<Double?>
    /// Which window each provider header family counts (`requests`, `tokens`).
    public var headerWindow: PerDimension<HeaderWindow>
    /// The price table entry; nil → the default price, with an `unknown_price` alert.
    public var price: Price?

    public init(
        id: String, capacity: PerDimension<Double?>,
        headerWindow: PerDimension<HeaderWindow> = PerDimension(.minute), price: Price? = nil
    ) {
        self.id = id
        self.capacity = capacity
        self.headerWindow = headerWindow
        self.price = price
    }
}

/// The window a provider's rate-limit header family counts (SPEC 4: per minute by default; some
/// providers count requests per day).
public enum HeaderWindow: String, Sendable, Hashable, Codable, CaseIterable {
    case minute
    case day

    /// The window's length in seconds.
    public var seconds: Double {
        switch self {
        case .minute: 60
        case .day: 86_400
        }
    }
}

/// Prices of one upstream pool, in the policy's currency.
public struct Price: Sendable, Hashable, Codable {
    /// Per million input (prompt) tokens.
    public var inputPerMillionTokens: Double
    /// Per million output (completion) tokens.
    public var outputPerMillionTokens: Double
    /// Per request, on top of tokens (0 for most providers).
    public var perRequest: Double

    public init(inputPerMillionTokens: Double, outputPerMillionTokens: Double, perRequest: Double = 0) {
        self.inputPerMillionTokens = inputPerMillionTokens
        self.outputPerMillionTokens = outputPerMillionTokens
        self.perRequest = perRequest
    }

    /// The cost of `requests` requests with these token counts.
    public func cost(inputTokens: Double, outputTokens: Double, requests: Double = 1) -> Double {
        inputTokens * inputPerMillionTokens / 1_000_000 + outputTokens * outputPerMillionTokens / 1_000_000
            + requests * perRequest
    }

    /// The price of one token for a traffic mix whose share of input tokens is `inputShare`.
    public func perToken(inputShare: Double) -> Double {
        let share = min(max(inputShare, 0), 1)
        return (inputPerMillionTokens * share + outputPerMillionTokens * (1 - share)) / 1_000_000
    }
}

/// A tenant's policy entry: its tier and optional per-tenant adjustments (SPEC 10).
public struct TenantPolicy: Sendable, Hashable {
    /// The tenant id (1–128 characters of `[A-Za-z0-9._:-]`).
    public var id: String
    /// The tier's name.
    public var tier: String
    /// Multiplies the tier weight; nil → 1.
    public var weight: Double?
    /// Replaces the tier floor per dimension where set.
    public var floor: PerDimension<Quantity?>
    /// Replaces the tier ceiling per dimension where set.
    public var ceiling: PerDimension<Quantity?>
    /// The tenant's own budgets; they replace the tier's budget for the same window.
    public var budgets: [SpendBudget]
    /// The customer the tenant belongs to (1–128 characters of `[A-Za-z0-9._:-]`), or nil. The active tenants of one
    /// group on a pool share one weight there, max-min among themselves (``PolicyEngine``), so a customer sending
    /// through many keys weighs as one tenant of its tier, not as many (outside evaluation round 37, M1: eight keys
    /// of one customer were served 22–38 % more than its entitlement as one tenant).
    public var group: String?

    public init(
        id: String, tier: String, weight: Double? = nil, floor: PerDimension<Quantity?> = PerDimension(nil),
        ceiling: PerDimension<Quantity?> = PerDimension(nil), budgets: [SpendBudget] = [], group: String? = nil
    ) {
        self.id = id
        self.tier = tier
        self.weight = weight
        self.floor = floor
        self.ceiling = ceiling
        self.budgets = budgets
        self.group = group
    }

    /// Whether `name` may be a ``group``: a tenant id's rule, which the policy loader and the simulator's scenarios
    /// both apply.
    public static func isValidGroup(_ name: String) -> Bool { PolicyLoader.isValidTenantID(name) }
}

/// A task class (SPEC 3 telemetry `task_class`).
public enum TaskClass: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case realtime
    case interactive
    case batch
    case background

    public static func < (lhs: TaskClass, rhs: TaskClass) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// Limits for one `task_id` of a task class: stops runaway agent loops (SPEC 6, cost governance).
public struct TaskBudgetPolicy: Sendable, Hashable, Codable {
    /// Most upstream calls one task may make.
    public var maxCalls: Int
    /// Most tokens (prompt + completion) one task may use.
    public var maxTokens: Int

    public init(maxCalls: Int, maxTokens: Int) {
        self.maxCalls = maxCalls
        self.maxTokens = maxTokens
    }
}
