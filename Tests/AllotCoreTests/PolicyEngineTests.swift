import AllotJSON
import Foundation
import Testing

@testable import AllotCore

/// A virtual timeline: a policy, an engine state and a clock that only moves when told to.
struct Timeline {
    static let start = 1_795_316_400.0  // 2026-11-22T03:00:00Z
    var policy: Policy
    var state = EngineState()
    var now = Timeline.start
    var capacity = PerDimension<Double?>(rpm: 1000, tpm: 100_000)
    var poolState = UpstreamState.healthy

    /// Premium (w 4), standard (w 2) and free (w 1) on one pool `p/m` of 1000 RPM and 100,000 TPM, with
    /// no safety margin or headroom, surplus held, and dampening that follows targets at once (alpha 1).
    /// - Parameter premiumBudgets: spend budgets of the premium tier (tenant `a`'s), none by default.
    static func makePolicy(
        premiumBurst: BurstPolicy = BurstPolicy(), ceilingOfA: Quantity? = nil, premiumBudgets: [SpendBudget] = []
    ) -> Policy {
        var policy = Policy(
            allocation: AllocationSettings(safetyMargin: 0, demandHeadroom: 0, surplus: .hold, burstReserve: 0.1),
            dampening: DampeningSettings(
                alpha: 1, deadband: 0.05, persistTicks: 2, maxUp: 0.25, maxDown: 0.5,
                minStep: .absolute(10)),
            defaultTier: "standard",
            tiers: [
                Tier(
                    name: "premium", priority: 1, weight: 4,
                    starvationGuard: PerDimension(rpm: .absolute(5), tpm: .absolute(500)), burst: premiumBurst,
                    budgets: premiumBudgets),
                Tier(
                    name: "standard", priority: 2, weight: 2,
                    idleAllocation: PerDimension(rpm: .absolute(2), tpm: .absolute(200))),
                Tier(name: "free", priority: 3, weight: 1),
            ],
            upstreams: [
                UpstreamPolicy(
                    id: "p/m", capacity: PerDimension(rpm: 1000, tpm: 100_000),
                    price: Price(inputPerMillionTokens: 2, outputPerMillionTokens: 8))
            ],
            tenants: [
                TenantPolicy(id: "a", tier: "premium", ceiling: PerDimension(rpm: ceilingOfA, tpm: nil)),
                TenantPolicy(id: "b", tier: "standard"),
            ])
        policy.proposals = ProposalSettings(ttlSeconds: 60, approvalTTLSeconds: 120, rejectCooldownSeconds: 60)
        policy.loop.forgetAfterSeconds = 60
        return policy
    }

    init(policy: Policy = Timeline.makePolicy()) {
        self.policy = policy
    }

    static func observe(
        _ tenant: String, rpm: Double = 1000, tpm: Double = 100_000, served: PerDimension<Double>? = nil,
        class tenantClass: TenantClass = .steady, suspect: Bool = false, upstream: String = "p/m"
    ) -> TenantObservation {
        TenantObservation(
            tenant: tenant, upstream: upstream, tenantClass: tenantClass, suspect: suspect,
            demand: PerDimension(rpm: rpm, tpm: tpm), served: served ?? PerDimension(rpm: rpm, tpm: tpm))
    }

    /// One tick at the current time, then the clock moves on by the loop interval.
    @discardableResult
    mutating func tick(
        _ tenants: [TenantObservation], spend: [TenantSpend] = [], overrides: [Override] = [],
        resolutions: [ProposalResolution] = [], bursts: [BurstRequest] = []
    ) -> Decision {
        let input = DecisionInput(
            now: now, policy: policy, pools: [PoolObservation(upstream: "p/m", capacity: capacity, state: poolState)],
            tenants: tenants, spend: spend, overrides: overrides, resolutions: resolutions, burstRequests: bursts)
        let decision = PolicyEngine.decide(input, state: &state)
        now += policy.loop.intervalSeconds
        return decision
    }
}

extension Decision {
    func rate(_ tenant: String, _ dimension: RateDimension = .rpm) -> Double? {
        allocation(tenant: tenant, upstream: "p/m")?[dimension]?.rate
    }

    func reason(_ tenant: String, _ dimension: RateDimension = .rpm) -> AllocationReason? {
        allocation(tenant: tenant, upstream: "p/m")?[dimension]?.reason
    }

    func target(_ tenant: String, _ dimension: RateDimension = .rpm) -> Double? {
        allocation(tenant: tenant, upstream: "p/m")?[dimension]?.explanation.target
    }
}

func close(_ a: Double?, _ b: Double, _ tolerance: Double = 1e-9) -> Bool {
    guard let a else { return false }
    return abs(a - b) <= tolerance * max(1, abs(b))
}

@Suite("Policy engine decisions on a virtual timeline (SPEC 6)")
struct PolicyEngineTests {
    @Test func firstTickAllocatesFairSharesWithExplanations() throws {
        var timeline = Timeline()
        let decision = timeline.tick([Timeline.observe("b"), Timeline.observe("a")])
        #expect(decision.allocations.map(\.tenant) == ["a", "b"])
        #expect(close(decision.rate("a"), 2000.0 / 3))
        #expect(close(decision.rate("b"), 1000.0 / 3))
        #expect(close(decision.rate("a", .tpm), 200_000.0 / 3))
        #expect(decision.reason("a") == .fairShare)
        let a = try #require(decision.allocation(tenant: "a", upstream: "p/m"))
        #expect(a.tier == "premium")
        #expect(a.priority == 1)
        #expect(close(a.rpm?.burst, 2000.0 / 3 * 10 / 60))
        let explanation = try #require(a.rpm?.explanation)
        #expect(explanation.capacityEstimate == 1000)
        #expect(explanation.capacity == 1000)
        #expect(explanation.weight == 4)
        #expect(explanation.demand == 1000)
        #expect(close(explanation.level, 1000.0 / 6))
        #expect(explanation.previous == nil)
        #expect(explanation.damping == .entered)
        #expect(explanation.step == explanation.published)
        let json = explanation.json
        #expect(json["weight"] == 4)
        #expect(json["ceiling"] == .null)
        #expect(json["damping"] == "entered")
        #expect(json["reason"] == "fair_share")

        let pool = try #require(decision.pool("p/m"))
        #expect(close(pool.allocated.rpm, 1000))
        #expect(pool.unallocated.rpm <= 1e-9)
        #expect(pool.degraded == PerDimension(false))
        #expect(pool.priced)
        #expect(decision.alerts.isEmpty)
    }

    @Test func decisionsAreDeterministicAndTheStateSurvivesARestart() throws {
        var first = Timeline()
        var second = Timeline()
        var restarted = Timeline()
        var random = SeededRandom(seed: 0xDEC1DE)
        for tick in 0..<40 {
            let demands = (0..<6).map { _ in random.uniform(50...600) }
            let observations = demands.enumerated().map { index, demand in
                Timeline.observe(
                    "t\(index)", rpm: demand, tpm: demand * 100,
                    class: index == 5 && tick % 10 < 3 ? .idle : .steady)
            }
            if tick == 20 { first.capacity.rpm = 600; second.capacity.rpm = 600; restarted.capacity.rpm = 600 }
            let one = first.tick(observations)
            let two = second.tick(observations.reversed())
            #expect(one.allocations == two.allocations)
            #expect(one.pools == two.pools)
            #expect(one.pools[0].allocated.rpm <= one.pools[0].capacity.rpm! + 1e-9)
            // Persist and reload the state every tick, as the loop does across restarts.
            let data = try JSONEncoder().encode(restarted.state)
            restarted.state = try JSONDecoder().decode(EngineState.self, from: data)
            let three = restarted.tick(observations)
            #expect(three.allocations == one.allocations)
        }
        #expect(first.state == second.state)
        // Encoding is deterministic too.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(try encoder.encode(first.state) == (try encoder.encode(second.state)))
    }

    @Test func aCapacityDropIsPublishedAtOnceAndTheRecoveryIsDampened() throws {
        var timeline = Timeline()
        let tenants = [Timeline.observe("a"), Timeline.observe("b")]
        timeline.tick(tenants)
        timeline.capacity.rpm = 300
        let dropped = timeline.tick(tenants)
        // 666.7 → 200 is more than max_down allows: the capacity override cuts at once.
        #expect(close(dropped.rate("a"), 200))
        #expect(close(dropped.rate("b"), 100))
        #expect(dropped.allocation(tenant: "a", upstream: "p/m")?.rpm?.explanation.damping == .cut)
        #expect(dropped.pools[0].allocated.rpm <= 300)

        timeline.capacity.rpm = 1000
        // The rise reverses the cut's direction: it waits for persist_ticks (2) first…
        let held = timeline.tick(tenants)
        #expect(close(held.target("a"), 2000.0 / 3))
        #expect(close(held.rate("a"), 200))
        #expect(held.allocation(tenant: "a", upstream: "p/m")?.rpm?.explanation.damping == .heldPersistence)
        // …then rises at most 25 % per tick.
        let rising = timeline.tick(tenants)
        #expect(close(rising.rate("a"), 250))
        #expect(close(rising.rate("b"), 125))
        #expect(rising.allocation(tenant: "a", upstream: "p/m")?.rpm?.explanation.damping == .limited)
        var last = rising
        for _ in 0..<8 { last = timeline.tick(tenants) }
        #expect(close(last.rate("a"), 2000.0 / 3))
        #expect(close(last.rate("b"), 1000.0 / 3))
    }

    /// A tenant blocked by its own bucket (pressing) whose demand surges takes its weighted fair share in
    /// one tick; the same surge unpressed climbs by max_up (25 %) a tick.
    @Test func aPressingSurgeTakesItsFairShareInOneTick() throws {
        func surge(pressing: Bool) -> [Double] {
            var timeline = Timeline()
            timeline.tick([Timeline.observe("a", rpm: 100, tpm: 10_000), Timeline.observe("b", rpm: 300, tpm: 30_000)])
            var a = Timeline.observe("a", rpm: 900, tpm: 10_000)
            a.pressing = PerDimension(rpm: pressing, tpm: false)
            let tenants = [a, Timeline.observe("b", rpm: 300, tpm: 30_000)]
            return (0..<3).map { _ in timeline.tick(tenants).rate("a") ?? -1 }
        }
        // Water-filling 1000 rpm over a (w 4, wants 900) and b (w 2, wants 300): 4f + 300 = 1000, f = 175,
        // a's fair share 700 — its target.
        #expect(surge(pressing: true) == [700, 700, 700])
        #expect(surge(pressing: false) == [125, 156.25, 195.3125])
    }

    @Test func guardrailClampsFileProposalsThatApprovalsLift() throws {
        var policy = Timeline.makePolicy()
        var premium = try #require(policy.tier(named: "premium"))
        premium.guardMax = PerDimension(rpm: .absolute(500), tpm: .unbounded)
        policy.setTier(premium)
        var timeline = Timeline(policy: policy)
        let tenants = [Timeline.observe("a"), Timeline.observe("b")]

        let clamped = timeline.tick(tenants)
        #expect(clamped.rate("a") == 500)
        #expect(clamped.rate("b") == 500)
        #expect(clamped.reason("a") == .guardrailClamped)
        let proposal = try #require(clamped.proposals.first)
        #expect(clamped.proposals.count == 1)
        #expect(proposal.kind == .raiseAboveGuardMax)
        #expect(proposal.tenant == "a")
        #expect(proposal.dimension == .rpm)
        #expect(close(proposal.value, 2000.0 / 3))
        #expect(proposal.guardrail == 500)
        #expect(proposal.status == .pending)
        #expect(proposal.evidence?.weight == 4)

        // Still clamped next tick: the same proposal is refreshed, not duplicated.
        let again = timeline.tick(tenants)
        #expect(again.proposals.map(\.id) == [proposal.id])
        #expect(again.proposals[0].filedAt == Timeline.start)

        let approved = timeline.tick(
            tenants,
            resolutions: [
                ProposalResolution(
                    proposalID: proposal.id, verdict: .approve, actor: "sre@example", at: timeline.now - 1)
            ])
        #expect(approved.resolutions.map(\.applied) == [true])
        #expect(approved.proposals.first?.status == .approved)
        #expect(close(approved.target("a"), 2000.0 / 3))
        #expect(approved.reason("a") != .guardrailClamped)
        #expect(approved.rate("a") == 625)  // dampened: +25 %

        // The approval lapses after its TTL (120 s): the guardrail clamps again and a new proposal is filed.
        var decision = approved
        while timeline.now < Timeline.start + 10 + 120 + 5 { decision = timeline.tick(tenants) }
        #expect(decision.target("a") == 500)
        #expect(decision.proposals.count == 1)
        #expect(decision.proposals[0].status == .pending)
        #expect(decision.proposals[0].id != proposal.id)
    }

    @Test func rejectedProposalsCoolDownAndUndecidedOnesExpire() throws {
        var policy = Timeline.makePolicy()
        var premium = try #require(policy.tier(named: "premium"))
        premium.guardMax = PerDimension(rpm: .absolute(500), tpm: .unbounded)
        policy.setTier(premium)
        var timeline = Timeline(policy: policy)
        let tenants = [Timeline.observe("a"), Timeline.observe("b")]
        let first = try #require(timeline.tick(tenants).proposals.first)

        // Undecided for the proposal TTL (60 s): it expires, is reported once and filed afresh.
        var decision = timeline.tick(tenants)
        while timeline.now < first.expiresAt { decision = timeline.tick(tenants) }
        #expect(decision.expiredProposals.isEmpty)
        decision = timeline.tick(tenants)
        #expect(decision.expiredProposals.map(\.id) == [first.id])
        #expect(decision.expiredProposals.first?.status == .expired)
        let second = try #require(decision.proposals.first)
        #expect(second.id != first.id)

        // Rejected: suppressed for the cool-down (60 s) while the clamp holds, then filed again.
        decision = timeline.tick(
            tenants,
            resolutions: [
                ProposalResolution(proposalID: second.id, verdict: .reject, actor: "sre", at: timeline.now)
            ])
        #expect(decision.proposals.map(\.status) == [.rejected])
        #expect(decision.rate("a") == 500)
        let rejectedAt = timeline.now - 5
        while timeline.now < rejectedAt + 60 {
            decision = timeline.tick(tenants)
            #expect(decision.proposals.map(\.status) == [.rejected])
        }
        decision = timeline.tick(tenants)
        #expect(decision.proposals.map(\.status) == [.pending])
        #expect(decision.proposals[0].id != second.id)
    }

    @Test func overridesApplyUntilTheyExpire() throws {
        var timeline = Timeline()
        let tenants = [Timeline.observe("a"), Timeline.observe("b")]
        let override = Override(
            tenant: "b", weight: 4, actor: "cs@example", reason: "launch", createdAt: Timeline.start,
            expiresAt: Timeline.start + 30)
        let during = timeline.tick(tenants, overrides: [override])
        // b's weight is 2 × 4 = 8 against a's 4.
        #expect(close(during.rate("b"), 2000.0 / 3))
        #expect(during.reason("b") == .override)
        #expect(during.reason("a") == .fairShare)
        #expect(during.allocation(tenant: "b", upstream: "p/m")?.override == override)
        var decision = during
        while timeline.now < Timeline.start + 30 { decision = timeline.tick(tenants, overrides: [override]) }
        #expect(decision.reason("b") == .override)
        decision = timeline.tick(tenants, overrides: [override])
        #expect(decision.allocation(tenant: "b", upstream: "p/m")?.override == nil)
        #expect(decision.reason("b") == .fairShare)
        #expect(close(decision.target("b"), 1000.0 / 3))
    }

    @Test func anApprovedOverrideSuspendsGuardrails() throws {
        var policy = Timeline.makePolicy()
        var standard = try #require(policy.tier(named: "standard"))
        standard.guardMax = PerDimension(.absolute(200))
        policy.setTier(standard)
        var timeline = Timeline(policy: policy)
        let tenants = [Timeline.observe("a"), Timeline.observe("b")]
        let floor = PerDimension<Quantity?>(rpm: .absolute(400), tpm: nil)
        let pending = Override(
            tenant: "b", floor: floor, actor: "cs", reason: "r", createdAt: Timeline.start,
            expiresAt: Timeline.start + 600)
        #expect(Guardrails.crossings(of: pending, policy: policy).map(\.kind) == [.floorAboveGuardMax])
        // Unapproved (the server would hold it as a proposal): the guardrail still clamps.
        #expect(timeline.tick(tenants, overrides: [pending]).target("b") == 200)
        var approved = pending
        approved.approved = true
        #expect(timeline.tick(tenants, overrides: [approved]).target("b") == 400)
    }

    /// Tenant `a` (premium) at 200 RPM / 20,000 TPM for a tick, then the tick of `burst`; with `detect_fan_out`
    /// on unless told otherwise, and a credit of at most 120 s.
    static func detectedBurst(detect: Bool = true, ceiling: Quantity? = nil, _ burst: TenantObservation) -> Decision {
        var timeline = Timeline(
            policy: Timeline.makePolicy(
                premiumBurst: BurstPolicy(maxTTLSeconds: 120, detectFanOut: detect), ceilingOfA: ceiling))
        timeline.tick([Timeline.observe("a", rpm: 200, tpm: 20_000)])
        return timeline.tick([burst])
    }

    /// `a` mid-task: bursting to 230 RPM, its tasks fanning out, its RPM bucket denying it.
    static func midTask(
        class tenantClass: TenantClass = .bursting, fansOut: Bool = true, pressing: Bool = true, suspect: Bool = false
    ) -> TenantObservation {
        var observation = Timeline.observe("a", rpm: 230, tpm: 20_000, class: tenantClass, suspect: suspect)
        observation.fansOut = fansOut
        observation.pressing = PerDimension(rpm: pressing, tpm: false)
        return observation
    }

    @Test func aTenantMidTaskIsLentCreditUnasked() throws {
        let decision = Self.detectedBurst(Self.midTask())
        // The gap between its demand and what it held (230 − 200 RPM) where its bucket denies it; none in TPM,
        // which it is not short of.
        let request = try #require(decision.detectedBursts.first)
        #expect(decision.detectedBursts.count == 1)
        #expect(request.id == "detected-a-p/m-\(Int64((Timeline.start + 5) * 1000))")
        #expect(request.calls == 60 && request.tokens == 0 && request.ttlSeconds == 120)
        let outcome = try #require(decision.burstDecisions.first)
        #expect(outcome.requestID == request.id && outcome.outcome == .granted)
        #expect(outcome.credit?.rate == PerDimension(rpm: 30, tpm: 0))
        let allocation = try #require(decision.allocation(tenant: "a", upstream: "p/m"))
        #expect(allocation.burstCredit?.expiresAt == Timeline.start + 5 + 120)
        #expect(allocation.rpm?.reason == .burstCredit)
        #expect(allocation.burstAccount.lent == 1)
        #expect(decision.pools[0].creditsLent == PerDimension(rpm: 30, tpm: 0))
    }

    /// The policy's `ceiling` bounds a tenant surplus included, and the burst reserve is surplus: a credit detected
    /// from fan-out covers what it wants up to its ceiling only (2026-11-29).
    @Test func aDetectedCreditCoversWhatATenantWantsUpToItsCeiling() throws {
        // Ceiling 210: the gap is 210 − 200, for 2 minutes.
        let request = try #require(Self.detectedBurst(ceiling: .absolute(210), Self.midTask()).detectedBursts.first)
        #expect(request.calls == 20 && request.tokens == 0)
        // At its ceiling (200), none.
        #expect(Self.detectedBurst(ceiling: .absolute(200), Self.midTask()).detectedBursts.isEmpty)
    }

    /// A spend budget's cap bounds a detected credit as a ceiling does: the credit would spend past the budget.
    @Test func aDetectedCreditCoversNoMoreThanABudgetAllows() throws {
        let policy = Timeline.makePolicy(
            premiumBurst: BurstPolicy(maxTTLSeconds: 120, detectFanOut: true),
            premiumBudgets: [SpendBudget(window: .day, amount: 100)])
        // Mid-task and short of tokens: 40,000 TPM wanted against the 20,000 held.
        var burst = Self.midTask()
        burst.demand.tpm = 40_000
        burst.pressing = PerDimension(rpm: false, tpm: true)
        func detected(_ spend: [TenantSpend]) -> [BurstRequest] {
            var timeline = Timeline(policy: policy)
            timeline.tick([Timeline.observe("a", rpm: 200, tpm: 20_000)])
            return timeline.tick([burst], spend: spend).detectedBursts
        }
        // Within its budget: the gap, 20,000 TPM for 2 minutes.
        #expect(detected([]).map(\.tokens) == [40_000])
        // Throttled (spent 58 of 100 with 21 h left, burning 4 an hour): capped near 6,667 TPM, under what it
        // holds, so no credit.
        let throttled = [TenantSpend(tenant: "a", window: .day, spent: 58, burnRatePerSecond: 4.0 / 3600)]
        #expect(detected(throttled).isEmpty)
    }

    @Test func creditIsLentUnaskedOnlyToATenantMidTaskWhoseTierDetects() {
        for (name, decision) in [
            ("detection off", Self.detectedBurst(detect: false, Self.midTask())),
            ("steady", Self.detectedBurst(Self.midTask(class: .steady))),
            ("sustained over", Self.detectedBurst(Self.midTask(class: .sustainedOver))),
            ("no fan-out", Self.detectedBurst(Self.midTask(fansOut: false))),
            ("not denied", Self.detectedBurst(Self.midTask(pressing: false))),
            ("suspect", Self.detectedBurst(Self.midTask(suspect: true))),
        ] {
            #expect(decision.detectedBursts.isEmpty, "\(name)")
            #expect(decision.burstDecisions.isEmpty, "\(name)")
            #expect(decision.allocation(tenant: "a", upstream: "p/m")?.burstCredit == nil, "\(name)")
        }
        // Nor to one that asks for no more than it holds.
        var content = Self.midTask()
        content.demand = PerDimension(rpm: 200, tpm: 20_000)
        #expect(Self.detectedBurst(content).detectedBursts.isEmpty)
        // Nor where the reserve covers less than a quarter of the gap: 600 wanted against 200 held leaves a reserve
        // of 40 (10 % of the 400 unallocated) for a gap of 400. A sliver of credit puts the tenant in debt for what
        // it is served beyond its allocation, and a tenant in debt gets no surplus.
        var large = Self.midTask()
        large.demand = PerDimension(rpm: 600, tpm: 20_000)
        let refused = Self.detectedBurst(large)
        #expect(refused.detectedBursts.isEmpty)
        #expect(refused.pools[0].burstReserve.rpm == 40)
    }

    /// A credit asked for past a spend budget is not lent (review of session 41: the gateways bound a credit by the
    /// budget's cap, so it was reserve lent for nothing): nothing at `hard`, calls without tokens under a throttle.
    @Test func aBudgetLimitsTheCreditsAsked() throws {
        let policy = Timeline.makePolicy(premiumBudgets: [SpendBudget(window: .day, amount: 100)])
        let quiet = Timeline.observe("a", rpm: 200, tpm: 20_000, served: PerDimension(rpm: 200, tpm: 20_000))
        func decided(spent: Double, calls: Double = 120) throws -> BurstDecision {
            var timeline = Timeline(policy: policy)
            timeline.tick([quiet])
            let request = BurstRequest(
                id: "burst-1", tenant: "a", upstream: "p/m", calls: calls, tokens: 12_000, ttlSeconds: 120,
                requestedAt: timeline.now)
            let spend = [TenantSpend(tenant: "a", window: .day, spent: spent, burnRatePerSecond: 4.0 / 3600)]
            return try #require(timeline.tick([quiet], spend: spend, bursts: [request]).burstDecisions.first)
        }
        #expect(try decided(spent: 0).credit?.rate == PerDimension(rpm: 60, tpm: 6000))
        let throttled = try decided(spent: 58)
        #expect(throttled.outcome == .partiallyGranted)
        #expect(throttled.credit?.rate == PerDimension(rpm: 60, tpm: 0))
        #expect(try decided(spent: 58, calls: 0).outcome == .budget)
        #expect(try decided(spent: 100).outcome == .budget)
        #expect(try decided(spent: 100).credit == nil)
    }

    @Test func burstCreditsAreLentFromTheReserveAndRepaid() throws {
        var timeline = Timeline()
        // a wants 200 RPM / 20,000 TPM of 1000 / 100,000: the surplus 800 / 80,000 is held and 10 % is reserve.
        let quiet = Timeline.observe("a", rpm: 200, tpm: 20_000)
        timeline.tick([quiet])
        let request = BurstRequest(
            id: "burst-1", tenant: "a", upstream: "p/m", calls: 120, tokens: 12_000,
            ttlSeconds: 120, taskID: "task-9", requestedAt: timeline.now)
        let lent = timeline.tick([quiet], bursts: [request])
        let outcome = try #require(lent.burstDecisions.first)
        #expect(outcome.outcome == .granted)
        #expect(outcome.credit?.rate == PerDimension(rpm: 60, tpm: 6000))
        let allocation = try #require(lent.allocation(tenant: "a", upstream: "p/m"))
        #expect(allocation.burstCredit?.expiresAt == Timeline.start + 5 + 120)
        #expect(allocation.rpm?.reason == .burstCredit)
        #expect(allocation.rpm?.explanation.burstCredit == 60)
        #expect(allocation.burstAccount.lent == 1)
        #expect(lent.pools[0].creditsLent == PerDimension(rpm: 60, tpm: 6000))
        #expect(lent.pools[0].burstReserve == PerDimension(rpm: 80, tpm: 8000))
        #expect(lent.pools[0].unallocated.rpm == 740)

        // A second request while the credit is active is refused.
        let busy = BurstRequest(
            id: "burst-2", tenant: "a", upstream: "p/m", calls: 10, tokens: 100, ttlSeconds: 60,
            requestedAt: timeline.now)
        #expect(timeline.tick([quiet], bursts: [busy]).burstDecisions.first?.outcome == .creditActive)

        // Serving 260 RPM against 200 for the rest of the credit borrows 60 per minute.
        let bursting = Timeline.observe("a", rpm: 200, tpm: 20_000, served: PerDimension(rpm: 260, tpm: 20_000))
        var decision = lent
        while timeline.now < Timeline.start + 5 + 120 { decision = timeline.tick([bursting]) }
        decision = timeline.tick([quiet])  // the credit ends
        let account = try #require(decision.allocation(tenant: "a", upstream: "p/m")?.burstAccount)
        #expect(account.credit == nil)
        #expect(account.inDebt)
        #expect(close(account.debt.rpm, 60 * 110.0 / 60))  // 22 ticks of 5 s at 60 over
        #expect(decision.allocation(tenant: "a", upstream: "p/m")?.burstCredit == nil)
        let owing = BurstRequest(
            id: "burst-3", tenant: "a", upstream: "p/m", calls: 10, tokens: 100, ttlSeconds: 60,
            requestedAt: timeline.now)
        #expect(timeline.tick([quiet], bursts: [owing]).burstDecisions.first?.outcome == .debtOutstanding)

        // Serving 140 of 200 repays 60 per minute: about two minutes to clear 110.
        let frugal = Timeline.observe("a", rpm: 200, tpm: 20_000, served: PerDimension(rpm: 140, tpm: 20_000))
        while decision.allocation(tenant: "a", upstream: "p/m")?.burstAccount.inDebt ?? false {
            decision = timeline.tick([frugal])
            #expect(timeline.now < Timeline.start + 600)
        }
        #expect(decision.allocation(tenant: "a", upstream: "p/m")?.burstAccount.repaid == 1)
        let again = BurstRequest(
            id: "burst-4", tenant: "a", upstream: "p/m", calls: 10, tokens: 100, ttlSeconds: 60,
            requestedAt: timeline.now)
        #expect(timeline.tick([quiet], bursts: [again]).burstDecisions.first?.outcome == .granted)
    }

    @Test func suspectAndSustainedOverTenantsGetNoCredit() {
        var timeline = Timeline()
        let requests =
            ["s", "o"].map {
                BurstRequest(
                    id: "r-\($0)", tenant: $0, upstream: "p/m", calls: 10, tokens: 100, ttlSeconds: 60,
                    requestedAt: timeline.now)
            } + [
                BurstRequest(
                    id: "r-x", tenant: "nobody", upstream: "p/m", calls: 1, tokens: 1, ttlSeconds: 60,
                    requestedAt: timeline.now)
            ]
        let decision = timeline.tick(
            [
                Timeline.observe("s", rpm: 10, tpm: 100, suspect: true),
                Timeline.observe("o", rpm: 10, tpm: 100, class: .sustainedOver),
            ],
            bursts: requests)
        #expect(decision.burstDecisions.map(\.outcome) == [.sustainedOver, .suspect, .unknown])
    }

    @Test func tenantsInDebtReceiveNoSurplus() throws {
        var policy = Timeline.makePolicy()
        policy.allocation.surplus = .distribute
        policy.allocation.burstReserve = 0
        var timeline = Timeline(policy: policy)
        let tenants = [Timeline.observe("a", rpm: 100, tpm: 1000), Timeline.observe("b", rpm: 100, tpm: 1000)]
        timeline.tick(tenants)
        timeline.state.tenants[TenantUpstream(tenant: "b", upstream: "p/m")]!.burst.debt = PerDimension(rpm: 50, tpm: 0)
        timeline.state.tenants[TenantUpstream(tenant: "b", upstream: "p/m")]!.burst.repayBy = timeline.now + 600
        let decision = timeline.tick(tenants)
        // The surplus 800 all goes to a (up to its weight-level); b keeps its demand.
        #expect(decision.target("b") == 100)
        #expect(decision.reason("b") == .demand)
        #expect(decision.target("a") == 900)
        #expect(decision.reason("a") == .surplus)
    }

    /// The surplus is held where it lies while every tenant has what it needs (`dampening.hold_surplus`): a
    /// demand that rises and falls back within an uncontended pool moves the allocations once, not twice.
    @Test func aSurplusIsNotReSplitWhileEveryTenantHasWhatItNeeds() throws {
        func run(hold: Bool) -> [(Double, Double)] {
            var policy = Timeline.makePolicy()
            policy.allocation.surplus = .distribute
            policy.allocation.burstReserve = 0
            policy.dampening.holdSurplus = hold
            var timeline = Timeline(policy: policy)
            var trace: [(Double, Double)] = []
            for b in [200.0, 400, 200, 200, 200, 200, 200] {
                let decision = timeline.tick([
                    Timeline.observe("a", rpm: 100, tpm: 1000), Timeline.observe("b", rpm: b, tpm: 1000),
                ])
                trace.append((decision.rate("a") ?? -1, decision.rate("b") ?? -1))
            }
            return trace
        }
        // Needs 100 (a, weight 4) and 200 (b, weight 2) of 1,000 rpm: the surplus by weight, 666.7 / 333.3. b's
        // demand rises to 400: it needs more than it has and takes it from a's surplus (600 / 400).
        let held = run(hold: true)
        #expect(close(held[0].0, 2000.0 / 3) && close(held[0].1, 1000.0 / 3))
        #expect(close(held[1].0, 600) && close(held[1].1, 400))
        // Back at 200, b still has what it needs and a too: nothing moves.
        for (a, b) in held.dropFirst(2) { #expect(close(a, 600) && close(b, 400)) }
        // Without the hold the surplus is split by weight again within a few ticks.
        let split = run(hold: false)
        #expect(close(split[1].0, 600) && close(split[1].1, 400))
        #expect(close(split.last!.0, 2000.0 / 3) && close(split.last!.1, 1000.0 / 3))
    }

    @Test func aHeldSurplusIsExplainedAsSuch() throws {
        var policy = Timeline.makePolicy()
        policy.allocation.surplus = .distribute
        policy.allocation.burstReserve = 0
        var timeline = Timeline(policy: policy)
        timeline.tick([Timeline.observe("a", rpm: 100, tpm: 1000), Timeline.observe("b", rpm: 400, tpm: 1000)])
        let decision = timeline.tick([
            Timeline.observe("a", rpm: 100, tpm: 1000), Timeline.observe("b", rpm: 200, tpm: 1000),
        ])
        let b = try #require(decision.allocation(tenant: "b", upstream: "p/m")?.rpm)
        #expect(b.explanation.damping == .heldSurplus)
        #expect(b.explanation.json["damping"] == "held_surplus")
        #expect(close(b.explanation.target, 1000.0 / 3))
        #expect(close(b.rate, 400))
        #expect(b.reason == .surplus)
        #expect(close(decision.pools[0].allocated.rpm, 1000))
    }

    @Test func budgetsThrottleThenCutAndLiftingIsDampened() throws {
        let policy = Timeline.makePolicy(premiumBudgets: [SpendBudget(window: .day, amount: 100)])
        var timeline = Timeline(policy: policy)
        let tenants = [
            Timeline.observe("a", rpm: 500, tpm: 50_000, served: PerDimension(rpm: 500, tpm: 30_000)),
            Timeline.observe("b", rpm: 500, tpm: 50_000),
        ]
        #expect(timeline.tick(tenants).rate("a", .tpm) == 50_000)

        // Spent 58 with 21 h left, burning 4 per hour: projected 142 crosses the throttle (90).
        let left = 21.0 * 3600 - 5
        let throttle = timeline.tick(
            tenants, spend: [TenantSpend(tenant: "a", window: .day, spent: 58, burnRatePerSecond: 4.0 / 3600)])
        // The allowed rate 42 / left, at 5e-6 per token (half input at 2, half output at 8 per million).
        let cap = 42 / left * 60 / 5e-6
        #expect(close(throttle.target("a", .tpm), cap))
        #expect(close(throttle.rate("a", .tpm), cap))  // applied at once, past max_down
        #expect(throttle.reason("a", .tpm) == .budget)
        #expect(throttle.reason("a", .rpm) == .demand)
        #expect(throttle.allocation(tenant: "a", upstream: "p/m")?.deny == nil)
        #expect(throttle.budgets.map(\.level) == [.throttle])
        #expect(throttle.alerts.map(\.kind) == ["budget_throttle"])
        // b may use what a leaves.
        #expect(throttle.rate("b", .tpm) == 50_000)

        let hard = timeline.tick(
            tenants, spend: [TenantSpend(tenant: "a", window: .day, spent: 100, burnRatePerSecond: 0)])
        #expect(hard.rate("a", .tpm) == 500)
        #expect(hard.rate("a", .rpm) == 5)
        #expect(hard.reason("a", .rpm) == .budget)
        // Cut to the guard, which gateways admit: no deny (that is for a cut to zero, below).
        #expect(hard.allocation(tenant: "a", upstream: "p/m")?.deny == nil)
        #expect(hard.alerts.first { $0.kind == "budget_hard" }?.severity == .critical)

        // A new day: the budget is lifted, dampened like any rise after a cut (persistence, then 25 % per tick).
        timeline.now = Timeline.start + 86_400
        let fresh = [TenantSpend(tenant: "a", window: .day, spent: 0, burnRatePerSecond: 0)]
        let lifted = timeline.tick(tenants, spend: fresh)
        #expect(lifted.target("a", .tpm) == 50_000)
        #expect(lifted.rate("a", .tpm) == 500)
        #expect(lifted.allocation(tenant: "a", upstream: "p/m")?.deny == nil)
        #expect(timeline.tick(tenants, spend: fresh).rate("a", .tpm) == 625)
    }

    /// A hard budget cuts to its `hard_action`, but never above another window's throttle cap: the lower binds
    /// (outside evaluation round 20: an hour budget reaching `hard` lifted the day budget's throttle, 201 → 4,000
    /// TPM, the starvation guard). `deny` is published for a cut to zero only, where gateways refuse everything.
    @Test func aHardCutNeverLiftsAnotherWindowsThrottle() throws {
        func decide(hardAction: HardBudgetAction) throws -> Decision {
            var policy = Timeline.makePolicy()
            var premium = try #require(policy.tier(named: "premium"))
            premium.budgets = [
                SpendBudget(window: .hour, amount: 1, hardAction: hardAction), SpendBudget(window: .day, amount: 100),
            ]
            premium.floor = PerDimension(rpm: .absolute(50), tpm: .absolute(5_000))
            policy.setTier(premium)
            var timeline = Timeline(policy: policy)
            let tenants = [
                Timeline.observe("a", rpm: 500, tpm: 50_000, served: PerDimension(rpm: 500, tpm: 30_000)),
                Timeline.observe("b", rpm: 500, tpm: 50_000),
            ]
            timeline.tick(tenants)
            // The hour's 1 spent (hard); the day's 99.5 spent with 21 h left, burning 4 an hour (throttled).
            return timeline.tick(
                tenants,
                spend: [
                    TenantSpend(tenant: "a", window: .hour, spent: 1, burnRatePerSecond: 4.0 / 3600),
                    TenantSpend(tenant: "a", window: .day, spent: 99.5, burnRatePerSecond: 4.0 / 3600),
                ])
        }
        // What is left, 0.5, over the 21 h left, at 5e-6 per token: 79 TPM, under the guard's 500.
        let throttleCap = 0.5 / (21.0 * 3600 - 5) * 60 / 5e-6
        let guarded = try decide(hardAction: .starvationGuard)
        #expect(guarded.budgets.map(\.level) == [.hard, .throttle])
        #expect(close(guarded.rate("a", .tpm), throttleCap))
        #expect(guarded.rate("a", .rpm) == 5)  // the guard
        #expect(guarded.allocation(tenant: "a", upstream: "p/m")?.deny == nil)
        // The cut holds past the lease too: the fallback is the floor (50 rpm) no higher than the cut.
        #expect(guarded.allocation(tenant: "a", upstream: "p/m")?.fallback.rpm == 5)
        let zeroed = try decide(hardAction: .zero)
        #expect(zeroed.rate("a", .tpm) == 0 && zeroed.rate("a", .rpm) == 0)
        #expect(zeroed.allocation(tenant: "a", upstream: "p/m")?.deny == "budget_exhausted")
        #expect(zeroed.allocation(tenant: "a", upstream: "p/m")?.fallback == PerDimension(0))
    }

    /// A spend budget limits a tenant in a dimension its pool has no capacity for (published unlimited otherwise):
    /// budgets are per tenant across pools, and the undeclared pool is the unpriced one (outside evaluation round 20:
    /// a tenant cut to zero elsewhere was published 10¹² there).
    @Test func aBudgetLimitsATenantWhereThePoolHasNoCapacity() throws {
        func decide(hardAction: HardBudgetAction?, spent: Double, percentGuard: Bool = false) throws
            -> TenantAllocation
        {
            var policy = Timeline.makePolicy()
            var premium = try #require(policy.tier(named: "premium"))
            premium.budgets = [SpendBudget(window: .day, amount: 100, hardAction: hardAction ?? .starvationGuard)]
            if percentGuard { premium.starvationGuard.tpm = .percent(1) }
            policy.setTier(premium)
            var pool = policy.upstreams[0]
            pool.capacity.tpm = nil  // no token capacity declared, nor observed
            policy.setUpstream(pool)
            var timeline = Timeline(policy: policy)
            timeline.capacity = PerDimension(rpm: 1000, tpm: nil)
            let tenants = [
                Timeline.observe("a", rpm: 500, tpm: 50_000, served: PerDimension(rpm: 500, tpm: 30_000)),
                Timeline.observe("b", rpm: 500, tpm: 50_000),
            ]
            timeline.tick(tenants)
            let decision = timeline.tick(
                tenants, spend: [TenantSpend(tenant: "a", window: .day, spent: spent, burnRatePerSecond: 4.0 / 3600)])
            return try #require(decision.allocation(tenant: "a", upstream: "p/m"))
        }
        // Within budget: no limit.
        #expect(try decide(hardAction: nil, spent: 0).budgetLimit.tpm == nil)
        // Throttled (58 spent, projected 142): the TPM cap, 6,667 (as in budgetsThrottleThenCutAndLiftingIsDampened).
        let throttled = try decide(hardAction: nil, spent: 58)
        #expect(throttled.tpm == nil)
        #expect(close(try #require(throttled.budgetLimit.tpm).rate, 42 / (21.0 * 3600 - 5) * 60 / 5e-6))
        // Hard, at the guard (500 TPM, burst 10 s of it); hard at zero: nothing, and denied.
        #expect(
            try decide(hardAction: .starvationGuard, spent: 100).budgetLimit.tpm
                == BudgetLimit(rate: 500, burst: 500 * 10 / 60))
        // A guard in percent has no capacity to resolve against: no limit from it, not a silent cut to zero.
        #expect(try decide(hardAction: .starvationGuard, spent: 100, percentGuard: true).budgetLimit.tpm == nil)
        let zero = try decide(hardAction: .zero, spent: 100)
        #expect(zero.budgetLimit.tpm == BudgetLimit(rate: 0, burst: 0))
        #expect(zero.rpm?.rate == 0)
        #expect(zero.deny == "budget_exhausted")

        // Throttled while it spends on a pool with capacity and not yet on one without: the throttle's split gives
        // that one no share, which is no limit there (a cap of 0 would keep it from ever starting), not 0.
        let policy = Timeline.makePolicy(premiumBudgets: [SpendBudget(window: .day, amount: 100)])
        var timeline = Timeline(policy: policy)
        let tenants = [
            Timeline.observe("a", rpm: 500, tpm: 50_000, served: PerDimension(rpm: 500, tpm: 30_000)),
            Timeline.observe("a", rpm: 5, tpm: 0, served: PerDimension(rpm: 5, tpm: 0), upstream: "new/pool"),
        ]
        timeline.tick(tenants)
        let both = timeline.tick(
            tenants, spend: [TenantSpend(tenant: "a", window: .day, spent: 58, burnRatePerSecond: 4.0 / 3600)])
        #expect(both.allocation(tenant: "a", upstream: "p/m")?.tpm?.reason == .budget)
        let idle = try #require(both.allocation(tenant: "a", upstream: "new/pool"))
        #expect(idle.tpm == nil && idle.budgetLimit.tpm == nil)
    }

    /// An absolute ceiling limits a tenant in a dimension its pool has no capacity for (published unlimited otherwise;
    /// outside evaluation round 29: an override's 50-rpm ceiling on a pool known only from telemetry was answered
    /// "applied" and the snapshot kept the tenant at 10¹²). A percentage has nothing to resolve against there.
    @Test func anAbsoluteCeilingLimitsATenantWhereThePoolHasNoCapacity() throws {
        var policy = Timeline.makePolicy()
        var pool = policy.upstreams[0]
        pool.capacity.tpm = nil
        policy.setUpstream(pool)
        var timeline = Timeline(policy: policy)
        timeline.capacity = PerDimension(rpm: 1000, tpm: nil)
        let tenants = [Timeline.observe("a", rpm: 500, tpm: 50_000), Timeline.observe("b", rpm: 500, tpm: 50_000)]
        func override(_ ceiling: Quantity) -> Override {
            Override(
                tenant: "a", upstream: "p/m", ceiling: PerDimension(rpm: nil, tpm: ceiling), actor: "cs@example",
                reason: "runaway", createdAt: Timeline.start, expiresAt: Timeline.start + 600)
        }
        let capped = try #require(
            timeline.tick(tenants, overrides: [override(.absolute(20_000))]).allocation(tenant: "a", upstream: "p/m"))
        #expect(capped.tpm == nil)
        #expect(capped.budgetLimit.tpm == BudgetLimit(rate: 20_000, burst: 20_000 * 10 / 60, reason: .override))
        #expect(capped.published(.tpm)?.rate == 20_000 && capped.published(.tpm)?.reason == .override)
        let percent = try #require(
            timeline.tick(tenants, overrides: [override(.percent(5))]).allocation(tenant: "a", upstream: "p/m"))
        #expect(percent.budgetLimit.tpm == nil)
        // The tier's own absolute ceiling, without an override: reason `ceiling`. Not the other tenant.
        var premium = try #require(policy.tier(named: "premium"))
        premium.ceiling.tpm = .absolute(30_000)
        policy.setTier(premium)
        timeline.policy = policy
        let tier = timeline.tick(tenants)
        #expect(tier.allocation(tenant: "a", upstream: "p/m")?.published(.tpm)?.reason == .ceiling)
        #expect(tier.allocation(tenant: "a", upstream: "p/m")?.published(.tpm)?.rate == 30_000)
        #expect(tier.allocation(tenant: "b", upstream: "p/m")?.published(.tpm) == nil)
        // An override's percentage does not lift it: it has nothing to resolve against, and the tier's 30,000 holds.
        let lifted = timeline.tick(tenants, overrides: [override(.percent(5))])
        #expect(lifted.allocation(tenant: "a", upstream: "p/m")?.published(.tpm)?.rate == 30_000)
        // An absolute floor above the ceiling wins, as everywhere (policies/README.md, *Floor above ceiling*).
        var floored = override(.absolute(20_000))
        floored.floor.tpm = .absolute(25_000)
        let floor = try #require(timeline.tick(tenants, overrides: [floored]).allocation(tenant: "a", upstream: "p/m"))
        #expect(floor.published(.tpm)?.rate == 25_000 && floor.published(.tpm)?.reason == .floor)
        // Below an absolute guard_min the override's ceiling crosses a guardrail there too: a proposal, not applied.
        premium.guardMin.tpm = .absolute(22_000)
        policy.setTier(premium)
        let crossings = Guardrails.crossings(
            of: override(.absolute(20_000)), policy: policy, capacities: ["p/m": PerDimension(rpm: 1000, tpm: nil)])
        #expect(crossings.map(\.kind) == [.ceilingBelowGuardMin])
        #expect(crossings.first?.value == 20_000 && crossings.first?.guardrail == 22_000)
        #expect(
            Guardrails.crossings(
                of: override(.absolute(23_000)), policy: policy, capacities: ["p/m": PerDimension(rpm: 1000, tpm: nil)]
            ).isEmpty)
    }

    @Test func idleTenantsHoldTheirIdleAllocationAndReEnterAtTarget() {
        var timeline = Timeline()
        timeline.tick([Timeline.observe("a"), Timeline.observe("b")])
        let idle = timeline.tick([Timeline.observe("a"), Timeline.observe("b", rpm: 0, tpm: 0, class: .idle)])
        #expect(idle.target("b") == 2)
        #expect(idle.reason("b") == .idle)
        #expect(close(idle.rate("b"), 1000.0 / 6))  // dampened down: max_down 50 %
        var decision = idle
        for _ in 0..<12 {
            decision = timeline.tick([Timeline.observe("a"), Timeline.observe("b", rpm: 0, tpm: 0, class: .idle)])
        }
        #expect(decision.rate("b") == 2)
        #expect(decision.rate("a") == 998)
        // Back from idle: enters at its target at once, a is cut to make room.
        let back = timeline.tick([Timeline.observe("a"), Timeline.observe("b")])
        #expect(close(back.rate("b"), 1000.0 / 3))
        #expect(close(back.rate("a"), 2000.0 / 3))
        #expect(back.allocation(tenant: "b", upstream: "p/m")?.rpm?.explanation.damping == .entered)
    }

    @Test func coldStartTenantsEnterAtTargetWithTheirReason() {
        var timeline = Timeline()
        timeline.tick([Timeline.observe("a")])
        let decision = timeline.tick([Timeline.observe("a"), Timeline.observe("new", class: .coldStart)])
        // Held to its share of the contended pool: that is the reason shown, not its newness (outside evaluation
        // round 20: 5,000 new tenants held to 2 % of what they asked all read cold_start).
        #expect(decision.reason("new") == .fairShare)
        #expect(decision.allocation(tenant: "new", upstream: "p/m")?.tenantClass == .coldStart)
        #expect(close(decision.rate("new"), 1000.0 / 3))
        #expect(decision.allocation(tenant: "new", upstream: "p/m")?.tier == "standard")
        // Given what it asks for: cold_start.
        var quiet = Timeline()
        quiet.tick([Timeline.observe("a", rpm: 100, tpm: 10_000)])
        let small = quiet.tick([
            Timeline.observe("a", rpm: 100, tpm: 10_000),
            Timeline.observe("new", rpm: 50, tpm: 5_000, class: .coldStart),
        ])
        #expect(small.reason("new") == .coldStart)
        #expect(close(small.rate("new"), 50))
    }

    @Test func tenantsAbsentFromInputAgeOut() {
        var timeline = Timeline()
        timeline.tick([Timeline.observe("a"), Timeline.observe("b")])
        for _ in 0..<12 { timeline.tick([Timeline.observe("a")]) }
        #expect(timeline.state.tenants[TenantUpstream(tenant: "b", upstream: "p/m")] != nil)  // 60 s: not yet
        timeline.tick([Timeline.observe("a")])
        #expect(timeline.state.tenants[TenantUpstream(tenant: "b", upstream: "p/m")] == nil)
        #expect(timeline.state.tenants.count == 1)
    }

    @Test func degradedModeUnknownPricesAndMissingCapacityRaiseAlerts() throws {
        var policy = Timeline.makePolicy()
        policy.setTenant(TenantPolicy(id: "a", tier: "premium", floor: PerDimension(rpm: .absolute(800), tpm: nil)))
        policy.setTenant(TenantPolicy(id: "b", tier: "standard", floor: PerDimension(rpm: .absolute(400), tpm: nil)))
        var timeline = Timeline(policy: policy)
        let decision = timeline.tick([
            Timeline.observe("a"), Timeline.observe("b"), Timeline.observe("c", upstream: "other/model"),
        ])
        #expect(decision.pools.map(\.upstream) == ["other/model", "p/m"])
        #expect(decision.pool("p/m")?.degraded == PerDimension(rpm: true, tpm: false))
        // Degraded: guards (5 and 1), then premium's floor in full, standard gets the rest.
        #expect(decision.rate("a") == 800)
        #expect(decision.rate("b") == 200)
        #expect(decision.reason("b") == .degraded)
        #expect(close(decision.allocation(tenant: "a", upstream: "p/m")?.fallback.rpm, 1000.0 * 800 / 1200))
        #expect(decision.allocation(tenant: "c", upstream: "other/model")?.rpm == nil)
        #expect(decision.alerts.map(\.kind) == ["degraded_mode", "no_capacity", "no_capacity", "unknown_price"])
        #expect(decision.alerts[0].upstream == "p/m")
        #expect(decision.alerts[0].dimension == .rpm)
    }

    /// `k1` and `k2` are one customer's keys (group `acme`, standard, weight 2), `b` a standard tenant of its own.
    private static func groupTimeline() -> Timeline {
        var policy = Timeline.makePolicy()
        policy.setTenant(TenantPolicy(id: "k1", tier: "standard", group: "acme"))
        policy.setTenant(TenantPolicy(id: "k2", tier: "standard", group: "acme"))
        return Timeline(policy: policy)
    }

    @Test func theActiveTenantsOfAGroupShareOneWeight() throws {
        var timeline = Self.groupTimeline()
        let decision = timeline.tick([Timeline.observe("k1"), Timeline.observe("k2"), Timeline.observe("b")])
        // Weights 1, 1 and 2: the group weighs what `b` does.
        #expect(close(decision.rate("k1"), 250))
        #expect(close(decision.rate("k2"), 250))
        #expect(close(decision.rate("b"), 500))
        let explanation = try #require(decision.allocation(tenant: "k1", upstream: "p/m")?.rpm?.explanation)
        #expect(explanation.weight == 1)
        #expect(explanation.group == "acme")
        #expect(explanation.groupMembers == 2)
        #expect(explanation.json["group"] == "acme")
        #expect(explanation.json["group_members"] == 2)
        let alone = try #require(decision.allocation(tenant: "b", upstream: "p/m")?.rpm?.explanation)
        #expect(alone.weight == 2)
        #expect(alone.json["group"] == .null)
        #expect(alone.json["group_members"] == .null)
    }

    @Test func aGroupMemberWantingLittleLeavesItsPartToTheGroup() throws {
        // A review of 2026-12-01: `k2` wants 50 of a 1,000-rpm pool (its upper bound; this policy has no demand
        // headroom). Divided evenly, it kept half the group's weight and the group got 316.7 + 50 against `b`'s 633.3.
        // Max-min within the group: `k2` is held at its bound and `k1` takes the rest of the group's share, so the
        // group and `b` share the pool evenly: 450 + 50 and 500.
        var timeline = Self.groupTimeline()
        let decision = timeline.tick([
            Timeline.observe("k1"), Timeline.observe("k2", rpm: 50, tpm: 5_000), Timeline.observe("b"),
        ])
        #expect(close(decision.rate("k2"), 50))
        #expect(abs((decision.rate("k1") ?? 0) - 450) < 0.01, "\(decision.rate("k1") ?? -1)")
        #expect(abs((decision.rate("b") ?? 0) - 500) < 0.01, "\(decision.rate("b") ?? -1)")
        // Each member's weight in the explanation is its part of the group's 2: its 50 ÷ the level 250, and the rest.
        let small = try #require(decision.allocation(tenant: "k2", upstream: "p/m")?.rpm?.explanation)
        let large = try #require(decision.allocation(tenant: "k1", upstream: "p/m")?.rpm?.explanation)
        #expect(abs(small.weight + large.weight - 2) < 1e-6, "\(small.weight) \(large.weight)")
        #expect(abs(small.weight - 50.0 / 250) < 1e-4, "\(small.weight)")
        #expect(small.groupMembers == 2)
    }

    @Test func aGroupSharesItsTiersGuardMinimum() throws {
        // A review of 2026-12-01: sixteen premium keys of one customer, each held at a 5 % `guard_min`, took 800 of
        // a 1,000-rpm pool against one premium tenant's 200, and a proposal was filed for every key. Shared like the
        // weight, each key's guard is 5 % ÷ 16: the customer and `solo` share the pool evenly, and nothing is clamped.
        var policy = Timeline.makePolicy()
        var premium = try #require(policy.tier(named: "premium"))
        premium.guardMin = PerDimension(rpm: .percent(5), tpm: .percent(5))
        policy.setTier(premium)
        for key in 1...16 { policy.setTenant(TenantPolicy(id: "k\(key)", tier: "premium", group: "acme")) }
        policy.setTenant(TenantPolicy(id: "solo", tier: "premium"))
        var timeline = Timeline(policy: policy)
        let decision = timeline.tick((1...16).map { Timeline.observe("k\($0)") } + [Timeline.observe("solo")])
        let keys = (1...16).reduce(0.0) { $0 + (decision.rate("k\($1)") ?? 0) }
        #expect(abs(keys - 500) < 1e-6, "\(keys)")
        #expect(abs((decision.rate("solo") ?? 0) - 500) < 1e-6, "\(decision.rate("solo") ?? -1)")
        #expect(timeline.state.proposals.all.isEmpty, "\(timeline.state.proposals.all.map(\.kind))")
        let explanation = try #require(decision.allocation(tenant: "k1", upstream: "p/m")?.rpm?.explanation)
        #expect(abs(explanation.guardMin - 50.0 / 16) < 1e-9, "\(explanation.guardMin)")
    }

    @Test func aProposalsEvidenceNamesTheGroup() throws {
        // A review of 2026-12-01: the evidence showed the shared weight without `group` and `group_members`.
        var policy = Timeline.makePolicy()
        var premium = try #require(policy.tier(named: "premium"))
        premium.guardMax = PerDimension(rpm: .absolute(100), tpm: .unbounded)
        policy.setTier(premium)
        policy.setTenant(TenantPolicy(id: "k1", tier: "premium", group: "acme"))
        policy.setTenant(TenantPolicy(id: "k2", tier: "premium", group: "acme"))
        var timeline = Timeline(policy: policy)
        let decision = timeline.tick([Timeline.observe("k1"), Timeline.observe("k2"), Timeline.observe("b")])
        let proposal = try #require(decision.proposals.first { $0.tenant == "k1" })
        #expect(proposal.kind == .raiseAboveGuardMax)
        #expect(proposal.evidence?.group == "acme")
        #expect(proposal.evidence?.groupMembers == 2)
        #expect(proposal.evidence?.json["group_members"] == 2)
    }

    @Test func anIdleMemberShowsHowManyShareItsGroupsWeight() throws {
        // A review of 2026-12-01: an idle key showed `group_members` 1 beside two active ones.
        var policy = Timeline.makePolicy()
        for key in ["k1", "k2", "k3"] { policy.setTenant(TenantPolicy(id: key, tier: "standard", group: "acme")) }
        var timeline = Timeline(policy: policy)
        let decision = timeline.tick([
            Timeline.observe("k1"), Timeline.observe("k2"), Timeline.observe("k3", rpm: 0, tpm: 0, class: .idle),
            Timeline.observe("b"),
        ])
        let idle = try #require(decision.allocation(tenant: "k3", upstream: "p/m")?.rpm?.explanation)
        #expect(idle.groupMembers == 2)
        #expect(idle.weight == 2)  // its own: it is not one of those sharing
        #expect(decision.rate("k3") == 2)
        #expect(close(decision.rate("k1"), 249.5))
        #expect(close(decision.rate("b"), 499))
    }

    @Test func anUncontendedGroupTakesTheSurplusAsOneTenant() throws {
        // Everyone wants less than the pool (110 + 100 of 1,000): nothing to balance, and the surplus is handed out by
        // the divided weights, so the group as a whole grows as much as `b` (weights of `hi ÷ f` gave it a sliver).
        var policy = Timeline.makePolicy()
        policy.allocation.surplus = .distribute
        policy.setTenant(TenantPolicy(id: "k1", tier: "standard", group: "acme"))
        policy.setTenant(TenantPolicy(id: "k2", tier: "standard", group: "acme"))
        var timeline = Timeline(policy: policy)
        let decision = timeline.tick([
            Timeline.observe("k1", rpm: 100, tpm: 10_000), Timeline.observe("k2", rpm: 10, tpm: 1_000),
            Timeline.observe("b", rpm: 100, tpm: 10_000),
        ])
        let group = (decision.rate("k1") ?? 0) + (decision.rate("k2") ?? 0)
        #expect(group > 300, "\(group)")
        #expect(abs(group - (decision.rate("b") ?? 0)) < 1e-6, "\(group) \(decision.rate("b") ?? -1)")
    }

    @Test func anUncontendedGroupsMemberAtItsCeilingLeavesItsSurplusToTheGroup() throws {
        // A third review of 2026-12-01 (N3): on an uncontended pool the surplus went by the divided weights, so `k1`,
        // held at its 120 ceiling, gave its half of the group's part to the whole pool: 120 + 293.3 against `b`'s
        // 586.7. Shared two-level, the group grows as one tenant (500 against 500) and `k2` takes what `k1` cannot.
        var policy = Timeline.makePolicy()
        policy.allocation.surplus = .distribute
        policy.allocation.burstReserve = 0
        policy.setTenant(
            TenantPolicy(
                id: "k1", tier: "standard", ceiling: PerDimension(rpm: .absolute(120), tpm: nil), group: "acme"))
        policy.setTenant(TenantPolicy(id: "k2", tier: "standard", group: "acme"))
        var timeline = Timeline(policy: policy)
        let decision = timeline.tick([
            Timeline.observe("k1", rpm: 100, tpm: 10_000), Timeline.observe("k2", rpm: 50, tpm: 5_000),
            Timeline.observe("b", rpm: 100, tpm: 10_000),
        ])
        #expect(close(decision.target("k1"), 120), "\(decision.target("k1") ?? -1)")
        #expect(close(decision.target("k2"), 380), "\(decision.target("k2") ?? -1)")
        #expect(close(decision.target("b"), 500), "\(decision.target("b") ?? -1)")
        #expect(decision.reason("k1") == .surplus)
        #expect(decision.reason("k2") == .surplus)
    }

    @Test func aGroupMemberClampedAtGuardMaxLeavesTheExcessToTheGroup() throws {
        // A third review of 2026-12-01 (N4): `k1` (standard, `guard_max` 100) and `k2` (free) are one customer beside
        // `d` (premium); all want the pool. The guarded refill spread `k1`'s excess over everyone by weight: 100, 100
        // and 800. It stays with the group, as a ceiling of 100 would keep it: the group weighs 1.5 against `d`'s 4,
        // 3,000/11 = 272.7, of which `k2` takes what `k1` cannot, 1,900/11 = 172.7; `d` 8,000/11 = 727.3.
        var policy = Timeline.makePolicy()
        var standard = try #require(policy.tier(named: "standard"))
        standard.guardMax = PerDimension(rpm: .absolute(100), tpm: .unbounded)
        policy.setTier(standard)
        policy.setTenant(TenantPolicy(id: "k1", tier: "standard", group: "acme"))
        policy.setTenant(TenantPolicy(id: "k2", tier: "free", group: "acme"))
        policy.setTenant(TenantPolicy(id: "d", tier: "premium"))
        var timeline = Timeline(policy: policy)
        let decision = timeline.tick([Timeline.observe("k1"), Timeline.observe("k2"), Timeline.observe("d")])
        #expect(close(decision.target("k1"), 100), "\(decision.target("k1") ?? -1)")
        #expect(close(decision.target("k2"), 1_900.0 / 11), "\(decision.target("k2") ?? -1)")
        #expect(close(decision.target("d"), 8_000.0 / 11), "\(decision.target("d") ?? -1)")
        #expect(decision.reason("k1") == .guardrailClamped)
        // The proposal's evidence is the two-level value without the clamp: 2/3 of the group's 3,000/11.
        let proposal = try #require(decision.proposals.first { $0.tenant == "k1" })
        #expect(proposal.kind == .raiseAboveGuardMax)
        #expect(close(proposal.value, 2_000.0 / 11), "\(proposal.value ?? -1)")
        #expect(proposal.evidence?.group == "acme")
        #expect(decision.proposals.count == 1)
    }

    @Test func aGroupAloneOnAPoolIsSharedMaxMin() throws {
        // A second review of 2026-12-01: an iteration toward the two-level result stopped short when the group was the
        // only claimant with room, and gave the key at 1,000 892.9 and the keys at 40 35.7. Max-min: 880 and 40 each.
        var policy = Timeline.makePolicy()
        for key in ["k1", "k2", "k3", "k4"] { policy.setTenant(TenantPolicy(id: key, tier: "standard", group: "acme")) }
        var timeline = Timeline(policy: policy)
        let decision = timeline.tick(
            [Timeline.observe("k1")] + ["k2", "k3", "k4"].map { Timeline.observe($0, rpm: 40, tpm: 4_000) })
        #expect(abs((decision.rate("k1") ?? 0) - 880) < 1e-6, "\(decision.rate("k1") ?? -1)")
        for key in ["k2", "k3", "k4"] { #expect(abs((decision.rate(key) ?? 0) - 40) < 1e-6, "\(key)") }
    }

    @Test func aGroupsGuardMinimumIsSharedMaxMin() throws {
        // A second review of 2026-12-01: divided by head count, a premium guard of 200 left a busy key beside two light
        // ones (10 each) guarded to 66.7, so the customer held 86.7 where one premium tenant holds 200. Shared max-min:
        // the light keys hold what they want and the busy key the rest, 180.
        var policy = Timeline.makePolicy()
        var premium = try #require(policy.tier(named: "premium"))
        premium.guardMin = PerDimension(rpm: .percent(20), tpm: .percent(20))
        policy.setTier(premium)
        for key in ["k1", "k2", "k3"] { policy.setTenant(TenantPolicy(id: key, tier: "premium", group: "acme")) }
        policy.setTenant(TenantPolicy(id: "solo", tier: "premium"))
        for index in 0..<40 { policy.setTenant(TenantPolicy(id: "f\(index)", tier: "free")) }
        var timeline = Timeline(policy: policy)
        let decision = timeline.tick(
            [Timeline.observe("k1"), Timeline.observe("k2", rpm: 10, tpm: 1_000),
             Timeline.observe("k3", rpm: 10, tpm: 1_000), Timeline.observe("solo")]
                + (0..<40).map { Timeline.observe("f\($0)") })
        let group = ["k1", "k2", "k3"].reduce(0.0) { $0 + (decision.rate($1) ?? 0) }
        #expect(abs(group - 200) < 1e-6, "\(group)")
        #expect(abs((decision.rate("k1") ?? 0) - 180) < 1e-6, "\(decision.rate("k1") ?? -1)")
        #expect(abs((decision.rate("solo") ?? 0) - 200) < 1e-6, "\(decision.rate("solo") ?? -1)")
    }

    @Test func anIdleMemberOfAGroupLeavesTheWholeWeightToTheOthers() throws {
        var timeline = Self.groupTimeline()
        let decision = timeline.tick([
            Timeline.observe("k1"), Timeline.observe("k2", rpm: 0, tpm: 0, class: .idle), Timeline.observe("b"),
        ])
        #expect(decision.rate("k2") == 2)  // the standard tier's idle allocation
        #expect(close(decision.rate("k1"), 499))
        #expect(close(decision.rate("b"), 499))
        let explanation = try #require(decision.allocation(tenant: "k1", upstream: "p/m")?.rpm?.explanation)
        #expect(explanation.weight == 2)
        #expect(explanation.groupMembers == 1)
    }
}
