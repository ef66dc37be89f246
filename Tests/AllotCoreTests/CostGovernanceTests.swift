import Testing

@testable import AllotCore

@Suite("Cost governance (SPEC 6)")
struct CostGovernanceTests {
    static let now = 1_795_316_400.0  // 2026-11-22T03:00:00Z; the day ends 21 h later

    @Test func usageIsPricedAndUnknownUpstreamsAreNeverFree() {
        var policy = Policy()
        policy.setUpstream(
            UpstreamPolicy(
                id: "p/m", capacity: PerDimension(nil),
                price: Price(inputPerMillionTokens: 2.5, outputPerMillionTokens: 10, perRequest: 0.001)))
        let priced = CostGovernance.cost(
            upstream: "p/m", inputTokens: 1_000_000, outputTokens: 200_000, requests: 100, policy: policy)
        #expect(priced.priced)
        #expect(abs(priced.amount - 4.6) < 1e-12)
        let unknown = CostGovernance.cost(
            upstream: "new/model", inputTokens: 1_000_000, outputTokens: 0, requests: 1, policy: policy)
        #expect(!unknown.priced)
        #expect(unknown.amount == 10)  // the default price: 10 per million input tokens
    }

    @Test func thresholdsUseProjectionAndSpendSoFar() {
        let budget = SpendBudget(window: .day, amount: 100)
        func level(spent: Double, burn: Double) -> BudgetStatus.Level {
            CostGovernance.evaluate(
                tenant: "t", budgets: [budget],
                spend: [TenantSpend(tenant: "t", window: .day, spent: spent, burnRatePerSecond: burn)],
                now: Self.now)[0].level
        }
        let left = 21.0 * 3600
        #expect(level(spent: 10, burn: 0) == .ok)
        #expect(level(spent: 10, burn: 75 / left) == .soft)  // projected 85
        #expect(level(spent: 10, burn: 85 / left) == .throttle)  // projected 95
        #expect(level(spent: 100, burn: 0) == .hard)
        #expect(level(spent: 99, burn: 1) == .throttle)  // hard looks at spend so far
        #expect(CostGovernance.evaluate(tenant: "t", budgets: [budget], spend: [], now: Self.now)[0].level == .ok)
    }

    @Test func throttleLandsTheWindowExactlyOnBudget() throws {
        let budget = SpendBudget(window: .day, amount: 100)
        let left = 21.0 * 3600
        let status = CostGovernance.evaluate(
            tenant: "t", budgets: [budget],
            spend: [TenantSpend(tenant: "t", window: .day, spent: 58, burnRatePerSecond: 4 / 3600)],
            now: Self.now)[0]
        #expect(status.level == .throttle)  // projected 58 + 84 = 142
        let allowed = try #require(status.allowedBurnRatePerSecond)
        #expect(abs(allowed - 42 / left) < 1e-15)
        // Two pools: the tenant spends 3x as much per minute on the first.
        let usage = [
            CostGovernance.PoolUsage(upstream: "a", tokensPerMinute: 30_000, pricePerToken: 6e-6),
            CostGovernance.PoolUsage(upstream: "b", tokensPerMinute: 60_000, pricePerToken: 1e-6),
        ]
        let caps = CostGovernance.throttleCaps(allowedRate: allowed, usage: usage)
        let capA = try #require(caps["a"])
        let capB = try #require(caps["b"])
        // At the caps the tenant spends exactly the allowed rate, in the same 3:1 split.
        #expect(abs((capA * 6e-6 + capB * 1e-6) / 60 - allowed) < 1e-15)
        #expect(abs(capA * 6e-6 / (capB * 1e-6) - 3) < 1e-9)
        // Spending the allowed rate for the rest of the day lands exactly on the budget.
        #expect(abs(58 + allowed * left - 100) < 1e-9)
    }
}
