import AllotLoop
import Testing

@testable import AllotCore
@testable import AllotServer

/// The rows of `GET /v1/tenants`, built from the loop's decision.
@Suite struct TenantDirectoryTests {
    /// On a pool without token capacity a spend budget's limit is the tenant's allocation there (published with
    /// reason `budget`): the summary counts it, as the tenant view and the snapshot do, instead of reading the
    /// dimension as unlimited.
    @Test func aBudgetLimitOnAPoolWithoutCapacityIsInTheSummary() throws {
        var policy = Policy(
            allocation: AllocationSettings(safetyMargin: 0, demandHeadroom: 0, surplus: .hold, burstReserve: 0),
            defaultTier: "standard",
            tiers: [
                Tier(
                    name: "standard", priority: 2, weight: 2,
                    starvationGuard: PerDimension(rpm: .absolute(5), tpm: .absolute(500)),
                    budgets: [SpendBudget(window: .day, amount: 100)])
            ],
            upstreams: [
                UpstreamPolicy(
                    id: "p/m", capacity: PerDimension(rpm: 1000, tpm: nil),
                    price: Price(inputPerMillionTokens: 2, outputPerMillionTokens: 8))
            ])
        policy.loop.forgetAfterSeconds = 600
        let tenants = [
            TenantObservation(
                tenant: "acme", upstream: "p/m", tenantClass: .steady, demand: PerDimension(rpm: 500, tpm: 50_000),
                served: PerDimension(rpm: 500, tpm: 50_000))
        ]
        var state = EngineState()
        func decide(spent: Double, at now: Double) -> Decision {
            PolicyEngine.decide(
                DecisionInput(
                    now: now, policy: policy,
                    pools: [PoolObservation(upstream: "p/m", capacity: PerDimension(rpm: 1000, tpm: nil))],
                    tenants: tenants,
                    spend: [TenantSpend(tenant: "acme", window: .day, spent: spent, burnRatePerSecond: 0)]),
                state: &state)
        }
        func summary(_ decision: Decision) throws -> TenantSummary {
            let view = LoopView(decision: decision, policy: policy, policyVersion: "v")
            return try #require(
                TenantDirectory(view: view, policy: policy, registry: [], overrides: []).summaries["acme"])
        }
        let start = 1_795_316_400.0
        // Within budget: unlimited in tokens (nothing to sum), its requests' fair share.
        let within = try summary(decide(spent: 0, at: start))
        #expect(within.allocation.tpm == nil)
        // At the hard threshold: held to the starvation guard, 500 TPM there, as published.
        let hard = decide(spent: 100, at: start + 5)
        #expect(hard.allocation(tenant: "acme", upstream: "p/m")?.budgetLimit.tpm?.rate == 500)
        let cut = try summary(hard)
        #expect(cut.allocation.tpm == 500)
        #expect(cut.reason.tpm == .budget)
        #expect(cut.reasons.contains("budget"))
    }
}
