/// A request for burst credit (SPEC 6.5): a tenant mid-task asks for extra calls and tokens for a
/// while (`POST /v1/tenants/{id}/bursts`, or detected by the classifier from `task_id` fan-out).
public struct BurstRequest: Sendable, Hashable, Codable {
    /// An id the server assigns, echoed in the decision.
    public var id: String
    public var tenant: String
    public var upstream: String
    /// Extra calls wanted over the TTL.
    public var calls: Double
    /// Extra tokens wanted over the TTL.
    public var tokens: Double
    /// How long the credit is wanted, seconds (capped at the tier's `max_ttl_s`).
    public var ttlSeconds: Double
    public var taskID: String?
    public var requestedAt: Double

    public init(
        id: String, tenant: String, upstream: String, calls: Double, tokens: Double, ttlSeconds: Double,
        taskID: String? = nil, requestedAt: Double
    ) {
        self.id = id
        self.tenant = tenant
        self.upstream = upstream
        self.calls = calls
        self.tokens = tokens
        self.ttlSeconds = ttlSeconds
        self.taskID = taskID
        self.requestedAt = requestedAt
    }
}

/// A time-limited credit lent from a pool's burst reserve: capacity reserved at `rate` per minute
/// until `expiresAt`, on top of the tenant's allocation.
public struct BurstCredit: Sendable, Hashable, Codable {
    /// The request's id.
    public var id: String
    public var tenant: String
    public var upstream: String
    public var taskID: String?
    /// The reserved rate per dimension, per minute (what the pool holds back for it).
    public var rate: PerDimension<Double>
    public var grantedAt: Double
    public var expiresAt: Double

    public init(
        id: String, tenant: String, upstream: String, taskID: String?, rate: PerDimension<Double>, grantedAt: Double,
        expiresAt: Double
    ) {
        self.id = id
        self.tenant = tenant
        self.upstream = upstream
        self.taskID = taskID
        self.rate = rate
        self.grantedAt = grantedAt
        self.expiresAt = expiresAt
    }

    /// What is left of the credit at `now`: calls (`rate.rpm` × minutes left) and tokens — the
    /// allowance a snapshot publishes for gateways to spend on top of the buckets.
    public func remaining(at now: Double) -> (calls: Double, tokens: Double) {
        let minutes = max(0, expiresAt - now) / 60
        return (rate.rpm * minutes, rate.tpm * minutes)
    }
}

/// The outcome of one burst request.
public struct BurstDecision: Sendable, Hashable, Codable {
    /// Why a request was or was not granted.
    public enum Outcome: String, Sendable, Hashable, Codable {
        case granted
        /// Granted, but less than asked: the reserve or the tier's `max_credit` limited it.
        case partiallyGranted = "partially_granted"
        case suspect
        case sustainedOver = "sustained_over"
        /// Previous credit is not repaid yet.
        case debtOutstanding = "debt_outstanding"
        /// A credit defaulted within the tier's `default_cooldown_s`.
        case recentDefault = "recent_default"
        /// A credit is already active for this tenant and pool.
        case creditActive = "credit_active"
        /// The tier does not lend (`burst.enabled` is false).
        case disabled
        /// The pool's burst reserve is used up (or the pool is degraded).
        case noReserve = "no_reserve"
        /// The tenant or pool is not part of this decision.
        case unknown
        /// The request asked for nothing, or for a non-positive TTL.
        case invalid
        /// A spend budget caps the tenant there (`hard`; or `throttle`, for a request of tokens only): the credit
        /// would spend past it, and the gateways, which bound a credit by the budget's cap, could not use it.
        case budget
    }

    public var requestID: String
    public var tenant: String
    public var upstream: String
    public var outcome: Outcome
    public var credit: BurstCredit?

    public var granted: Bool { credit != nil }
}

/// A tenant's burst account on one pool (SPEC 6.10): the active credit, the debt it ran up and the
/// repayment record that decides the next loan. Part of `EngineState`; visible in the decision.
///
/// - While a credit is active, what the tenant serves above its allocation is borrowed: the debt
///   grows by `(served − allocation) × minutes`, at most the credit's rate.
/// - Afterwards, unused allocation repays it: the debt shrinks by `(allocation − served) × minutes`.
///   While it owes anything, the tenant receives no surplus growth headroom.
/// - Debt fully repaid within the tier's `repay_within_s` of the credit's end counts as repaid;
///   otherwise the credit defaults: the debt is written off, the default recorded, and no credit
///   is lent for `default_cooldown_s`.
public struct BurstAccount: Sendable, Hashable, Codable {
    /// The credit in force, if any.
    public var credit: BurstCredit?
    /// Calls (`rpm`) and tokens (`tpm`) owed.
    public var debt: PerDimension<Double>
    /// When the current debt must be repaid by (set when a credit with debt ends).
    public var repayBy: Double?
    /// Credits lent, repaid on time and defaulted, over the account's life.
    public var lent: Int
    public var repaid: Int
    public var defaulted: Int
    public var lastDefaultAt: Double?

    public init() {
        credit = nil
        debt = PerDimension(0)
        repayBy = nil
        lent = 0
        repaid = 0
        defaulted = 0
        lastDefaultAt = nil
    }

    /// Whether the tenant owes anything.
    public var inDebt: Bool { debt.rpm > 0 || debt.tpm > 0 }

    /// Advances the account by `minutes` of traffic ending at `now`: accrues borrowing while a
    /// credit is active, repays from unused allocation afterwards, and settles repayment or default.
    public mutating func account(
        allocation: PerDimension<Double>, served: PerDimension<Double>, minutes: Double, now: Double,
        policy: BurstPolicy
    ) {
        let elapsed = max(0, minutes)
        if let credit {
            for dimension in RateDimension.allCases {
                let over = max(0, served[dimension] - allocation[dimension])
                debt[dimension] += min(over, credit.rate[dimension]) * elapsed
            }
            if now >= credit.expiresAt {
                self.credit = nil
                if inDebt { repayBy = now + policy.repayWithinSeconds } else { repaid += 1 }
            }
            return
        }
        guard inDebt else { return }
        for dimension in RateDimension.allCases {
            let unused = max(0, allocation[dimension] - served[dimension])
            debt[dimension] = max(0, debt[dimension] - unused * elapsed)
        }
        if !inDebt {
            repaid += 1
            repayBy = nil
        } else if let repayBy, now >= repayBy {
            defaulted += 1
            lastDefaultAt = now
            debt = PerDimension(0)
            self.repayBy = nil
        }
    }

    /// Why a new credit cannot be lent now, or nil when the tenant is eligible (SPEC 6.5: a good
    /// repayment record, not `suspect`, not `sustained_over`).
    public func refusal(
        tenantClass: TenantClass, suspect: Bool, now: Double, policy: BurstPolicy
    ) -> BurstDecision.Outcome? {
        if !policy.enabled { return .disabled }
        if suspect { return .suspect }
        if tenantClass == .sustainedOver { return .sustainedOver }
        if credit != nil { return .creditActive }
        if inDebt { return .debtOutstanding }
        if let lastDefaultAt, now < lastDefaultAt + policy.defaultCooldownSeconds { return .recentDefault }
        return nil
    }

    /// The credit to lend for `request` given the reserve still `available` per dimension and the
    /// tier's `maxCredit` resolved against `capacity`; nil when nothing can be lent.
    public static func lend(
        _ request: BurstRequest, available: PerDimension<Double>, capacity: PerDimension<Double>, now: Double,
        policy: BurstPolicy
    ) -> (credit: BurstCredit, partial: Bool)? {
        let ttl = min(request.ttlSeconds, policy.maxTTLSeconds)
        guard ttl > 0 else { return nil }
        let wanted = PerDimension(rpm: max(0, request.calls), tpm: max(0, request.tokens)).map { $0 / (ttl / 60) }
        var rate = PerDimension<Double>(0)
        var partial = ttl < request.ttlSeconds
        for dimension in RateDimension.allCases where wanted[dimension] > 0 {
            let limit = min(
                max(0, available[dimension]),
                policy.maxCredit[dimension].resolved(capacity: capacity[dimension]))
            rate[dimension] = min(wanted[dimension], limit)
            if rate[dimension] < wanted[dimension] { partial = true }
        }
        guard rate.rpm > 0 || rate.tpm > 0 else { return nil }
        // A credit for calls without the tokens they need (or the reverse) helps nobody.
        for dimension in RateDimension.allCases where wanted[dimension] > 0 && rate[dimension] <= 0 { return nil }
        let credit = BurstCredit(
            id: request.id, tenant: request.tenant, upstream: request.upstream, taskID: request.taskID, rate: rate,
            grantedAt: now, expiresAt: now + ttl)
        return (credit, partial)
    }
}
