import AllotJSON
import Foundation
import Testing

@testable import AllotCore

@Suite("Guardrails, proposals and overrides (SPEC 6.7, 6.8)")
struct GuardrailTests {
    static let settings = ProposalSettings(ttlSeconds: 600, approvalTTLSeconds: 3600, rejectCooldownSeconds: 1800)

    static let evidence = AllocationExplanation(
        capacityEstimate: 1000, capacity: 950, weight: 4, floor: 0, ceiling: nil, demand: 900, lower: 0, upper: 1080,
        level: 200, surplusLevel: nil, unclamped: 800, guardMin: 0, guardMax: 400, budgetCap: nil, burstCredit: 0,
        target: 400, previous: nil, published: 400, damping: .none, degraded: false, baseReason: .guardrailClamped,
        reason: .guardrailClamped)

    static func fileRaise(_ book: inout ProposalBook, value: Double = 800, now: Double) -> Proposal? {
        book.file(
            kind: .raiseAboveGuardMax, tenant: "acme", upstream: "p/m", dimension: .rpm, value: value,
            guardrail: 400, evidence: evidence, now: now, settings: settings)
    }

    @Test func proposalsHaveDeterministicIdsAndRefreshWhilePending() throws {
        var book = ProposalBook()
        let filed = try #require(Self.fileRaise(&book, now: 1000))
        #expect(filed.id == ProposalID.make("acme", "p/m", "rpm", "raise_above_guard_max", "", 1000))
        #expect(filed.id.hasPrefix("p-") && filed.id.count == 18)
        #expect(filed.status == .pending)
        #expect(filed.expiresAt == 1600)
        #expect(filed.reason == "raise acme on p/m to 800 rpm, above guard_max (400)")
        var again = ProposalBook()
        #expect(Self.fileRaise(&again, now: 1000)?.id == filed.id)

        let refreshed = try #require(Self.fileRaise(&book, value: 850, now: 1005))
        #expect(refreshed.id == filed.id)
        #expect(refreshed.value == 850)
        #expect(refreshed.filedAt == 1000)
        #expect(book.all.count == 1)
    }

    @Test func approvalSuspendsTheGuardrailForItsTTL() throws {
        var book = ProposalBook()
        let filed = try #require(Self.fileRaise(&book, now: 1000))
        let outcome = book.resolve(
            [ProposalResolution(proposalID: filed.id, verdict: .approve, actor: "sre@x", at: 1010)], now: 1012,
            settings: Self.settings)
        #expect(outcome.map(\.applied) == [true])
        #expect(book.isApproved(tenant: "acme", upstream: "p/m", dimension: .rpm, kind: .raiseAboveGuardMax))
        #expect(book.all.first?.decidedBy == "sre@x")
        #expect(book.all.first?.expiresAt == 4610.0)  // from the decision, as the API answered
        // While approved, filing again does nothing.
        #expect(Self.fileRaise(&book, now: 1100) == nil)
        // A second decision on the same proposal is not applied.
        #expect(
            book.resolve(
                [ProposalResolution(proposalID: filed.id, verdict: .reject, actor: "b", at: 1200)],
                now: 1200, settings: Self.settings
            ).map(\.applied) == [false])
        #expect(book.expire(now: 4609).isEmpty)
        #expect(book.isApproved(tenant: "acme", upstream: "p/m", dimension: .rpm, kind: .raiseAboveGuardMax))
        #expect(book.expire(now: 4610).isEmpty)  // the approval lapses silently
        #expect(!book.isApproved(tenant: "acme", upstream: "p/m", dimension: .rpm, kind: .raiseAboveGuardMax))
        #expect(book.all.isEmpty)
    }

    @Test func rejectionSuppressesTheSameProposalForTheCoolDown() throws {
        var book = ProposalBook()
        let filed = try #require(Self.fileRaise(&book, now: 1000))
        _ = book.resolve(
            [ProposalResolution(proposalID: filed.id, verdict: .reject, actor: "sre", at: 1001)],
            now: 1001, settings: Self.settings)
        #expect(Self.fileRaise(&book, now: 2000) == nil)
        #expect(book.all.first?.status == .rejected)
        _ = book.expire(now: 2801)
        let refiled = try #require(Self.fileRaise(&book, now: 2801))
        #expect(refiled.status == .pending)
        #expect(refiled.id != filed.id)
    }

    @Test func undecidedProposalsExpire() throws {
        var book = ProposalBook()
        let filed = try #require(Self.fileRaise(&book, now: 1000))
        #expect(book.expire(now: 1599).isEmpty)
        let expired = book.expire(now: 1600)
        #expect(expired.map(\.id) == [filed.id])
        #expect(expired.first?.status == .expired)
        #expect(book.all.isEmpty)
        #expect(
            book.resolve(
                [ProposalResolution(proposalID: filed.id, verdict: .approve, actor: "late", at: 1700)],
                now: 1700, settings: Self.settings
            ).map(\.applied) == [false])
    }

    @Test func aDecisionMadeBeforeTheExpiryAppliesAtATickAfterIt() throws {
        // The tick that reads a decision may come after the proposal's expiry (the SRE decided in the
        // last interval): the decision stands, and the proposal is neither expired nor filed again.
        var book = ProposalBook()
        let approved = try #require(Self.fileRaise(&book, now: 1000))
        #expect(approved.expiresAt == 1600)
        let outcome = book.resolve(
            [ProposalResolution(proposalID: approved.id, verdict: .approve, actor: "sre", at: 1599)], now: 1602,
            settings: Self.settings)
        #expect(outcome.map(\.applied) == [true])
        #expect(book.expire(now: 1602).isEmpty)
        #expect(book.isApproved(tenant: "acme", upstream: "p/m", dimension: .rpm, kind: .raiseAboveGuardMax))
        #expect(book.all.first?.expiresAt == 1599 + 3600.0)
        #expect(Self.fileRaise(&book, now: 1602) == nil)

        var rejecting = ProposalBook()
        let rejected = try #require(Self.fileRaise(&rejecting, now: 1000))
        _ = rejecting.resolve(
            [ProposalResolution(proposalID: rejected.id, verdict: .reject, actor: "sre", at: 1599.9)], now: 1605,
            settings: Self.settings)
        #expect(rejecting.expire(now: 1605).isEmpty)
        #expect(rejecting.all.first?.status == .rejected)
        #expect(Self.fileRaise(&rejecting, now: 1605) == nil)  // the cool-down holds

        // A decision stamped at the expiry itself comes too late.
        var late = ProposalBook()
        let expiring = try #require(Self.fileRaise(&late, now: 1000))
        #expect(
            late.resolve(
                [ProposalResolution(proposalID: expiring.id, verdict: .approve, actor: "sre", at: 1600)], now: 1602,
                settings: Self.settings
            ).map(\.applied) == [false])
        #expect(late.expire(now: 1602).map(\.id) == [expiring.id])

        // Read after a long shutdown, a decision stands but its approval counts from when it was made: over
        // already, it lapses at that tick.
        var restarted = ProposalBook()
        let old = try #require(Self.fileRaise(&restarted, now: 1000))
        #expect(
            restarted.resolve(
                [ProposalResolution(proposalID: old.id, verdict: .approve, actor: "sre", at: 1599)], now: 9000,
                settings: Self.settings
            ).map(\.applied) == [true])
        #expect(restarted.expire(now: 9000).isEmpty)  // an approval lapses silently
        #expect(!restarted.isApproved(tenant: "acme", upstream: "p/m", dimension: .rpm, kind: .raiseAboveGuardMax))
    }

    // MARK: Overrides

    static let policy: Policy = {
        var policy = Policy(tiers: [
            Tier(
                name: "premium", priority: 1, weight: 4, floor: PerDimension(.percent(1)),
                guardMin: PerDimension(.percent(2)), guardMax: PerDimension(.percent(40))),
            Tier(name: "standard", priority: 2, weight: 2, guardMax: PerDimension(.percent(20))),
        ])
        policy.setTenant(TenantPolicy(id: "acme", tier: "standard", weight: 3))
        policy.setUpstream(UpstreamPolicy(id: "p/m", capacity: PerDimension(rpm: 1000, tpm: 100_000)))
        policy.allocation.safetyMargin = 0
        return policy
    }()

    @Test func overridesApplyUntilTheyExpire() {
        let override = Override(
            tenant: "acme", tier: "premium", weight: 1, floor: PerDimension(rpm: .absolute(50), tpm: nil),
            actor: "cs@x", reason: "launch week", createdAt: 100, expiresAt: 200)
        let before = Self.policy.terms(ofTenant: "acme", upstream: "p/m", overrides: [override], now: 99)
        #expect(before.tier.name == "standard")
        #expect(before.weight == 6)
        #expect(before.override == nil)
        let during = Self.policy.terms(ofTenant: "acme", upstream: "p/m", overrides: [override], now: 150)
        #expect(during.tier.name == "premium")
        #expect(during.weight == 4)
        #expect(during.floor == PerDimension(rpm: .absolute(50), tpm: .percent(1)))
        #expect(during.override == override)
        let after = Self.policy.terms(ofTenant: "acme", upstream: "p/m", overrides: [override], now: 200)
        #expect(after.tier.name == "standard")
        #expect(after.override == nil)
    }

    @Test func theNewestActiveOverrideWinsWhateverTheInputOrder() {
        let older = Override(tenant: "acme", weight: 2, actor: "a", reason: "r", createdAt: 10, expiresAt: 1000)
        let newer = Override(tenant: "acme", weight: 5, actor: "b", reason: "r", createdAt: 20, expiresAt: 1000)
        let elsewhere = Override(
            tenant: "acme", upstream: "other/pool", weight: 9, actor: "c", reason: "r",
            createdAt: 30, expiresAt: 1000)
        for overrides in [[older, newer, elsewhere], [elsewhere, newer, older]] {
            #expect(Self.policy.terms(ofTenant: "acme", upstream: "p/m", overrides: overrides, now: 50).weight == 10)
        }
    }

    /// A tenant-wide override and a pool's combine field by field there, the pool's winning where both set one,
    /// whichever came first (outside evaluation round 20: the one written last replaced the other, silently).
    @Test func aTenantWideOverrideAndAPoolsCombineFieldByField() {
        let wide = Override(
            tenant: "acme", weight: 2, ceiling: PerDimension(rpm: .absolute(10), tpm: nil), actor: "cs", reason: "cap",
            createdAt: 20, expiresAt: 1000)
        let pool = Override(
            tenant: "acme", upstream: "p/m", weight: 3, floor: PerDimension(rpm: .absolute(20), tpm: nil), actor: "cs",
            reason: "pool floor", createdAt: 10, expiresAt: 1000)
        for overrides in [[wide, pool], [pool, wide]] {
            let here = Self.policy.terms(ofTenant: "acme", upstream: "p/m", overrides: overrides, now: 50)
            #expect(here.floor.rpm == .absolute(20))
            #expect(here.ceiling.rpm == .absolute(10))
            #expect(here.weight == 2 * 3)  // standard's 2 × the pool's 3, though the tenant-wide one is newer
            #expect(here.override?.reason == "pool floor")
            let elsewhere = Self.policy.terms(ofTenant: "acme", upstream: "other/pool", overrides: overrides, now: 50)
            #expect(elsewhere.ceiling.rpm == .absolute(10))
            #expect(elsewhere.weight == 2 * 2)
            #expect(elsewhere.override == wide)
        }
        // Guardrails are suspended only if every part contributing a field was approved: an approved tenant-wide
        // override does not lift them off an unapproved pool override.
        var approvedWide = wide
        approvedWide.approved = true
        var approvedPool = pool
        approvedPool.approved = true
        func suspended(_ overrides: [Override]) -> Bool {
            Self.policy.terms(ofTenant: "acme", upstream: "p/m", overrides: overrides, now: 50).guardrailsSuspended
        }
        #expect(!suspended([approvedWide, pool]))
        #expect(!suspended([wide, approvedPool]))  // the wide one's ceiling comes through unapproved
        #expect(suspended([approvedWide, approvedPool]))
        let wholePool = Override(
            tenant: "acme", upstream: "p/m", weight: 3, floor: PerDimension(rpm: .absolute(20), tpm: .absolute(1)),
            ceiling: PerDimension(rpm: .absolute(30), tpm: .absolute(2)), actor: "cs", reason: "all of it",
            createdAt: 10, expiresAt: 1000, approved: true)
        #expect(suspended([wide, wholePool]))  // the wide one contributes nothing there
    }

    @Test func crossingsCompareAgainstTheTenantsOwnTierGuardrails() {
        // standard's guard_max is 20 % of 1000 = 200 rpm.
        let big = Override(
            tenant: "acme", floor: PerDimension(rpm: .absolute(300), tpm: nil), actor: "cs",
            reason: "r", createdAt: 0, expiresAt: 10)
        #expect(
            Guardrails.crossings(of: big, policy: Self.policy) == [
                Guardrails.Crossing(
                    kind: .floorAboveGuardMax, upstream: "p/m", dimension: .rpm, value: 300, guardrail: 200)
            ])
        let small = Override(
            tenant: "acme", floor: PerDimension(rpm: .absolute(150), tpm: nil), actor: "cs",
            reason: "r", createdAt: 0, expiresAt: 10)
        #expect(Guardrails.crossings(of: small, policy: Self.policy).isEmpty)
        // A premium customer capped below premium's guard_min (2 %) needs approval; capacity from the estimate.
        let capped = Override(
            tenant: "vip", tier: "premium", ceiling: PerDimension(rpm: nil, tpm: .absolute(1000)),
            actor: "cs", reason: "r", createdAt: 0, expiresAt: 10)
        var policy = Self.policy
        policy.setTenant(TenantPolicy(id: "vip", tier: "premium"))
        let crossings = Guardrails.crossings(
            of: capped, policy: policy, capacities: ["p/m": PerDimension(rpm: 500, tpm: 80_000)])
        #expect(
            crossings == [
                Guardrails.Crossing(
                    kind: .ceilingBelowGuardMin, upstream: "p/m", dimension: .tpm, value: 1000, guardrail: 1600)
            ])
        let proposal = Proposal.forOverride(capped, crossings: crossings, settings: Self.settings)
        #expect(proposal.kind == .override)
        #expect(proposal.status == .pending)
        // With its override, at 10, not after proposals.ttl_s (600): approved later it would apply nothing.
        #expect(proposal.expiresAt == 10)
        var lasting = capped
        lasting.expiresAt = 5_000
        #expect(Proposal.forOverride(lasting, crossings: crossings, settings: Self.settings).expiresAt == 600)
        #expect(proposal.reason == "override by cs (r) crosses guardrails: ceiling_below_guard_min on p/m tpm")
    }

    /// A tier change is checked against the guardrails of both tiers, the strictest of each: the tenant's own
    /// (a floor cannot be laundered past standard's guard_max by moving to premium) and the new one's (a ceiling
    /// below premium's guard_min is not applied unseen by moving a standard tenant to premium).
    @Test func aTierChangeIsCheckedAgainstTheStrictestOfBothTiers() {
        // premium's guard_min is 2 % of 1000 = 20 rpm; standard has none.
        let promotedAndCapped = Override(
            tenant: "acme", tier: "premium", ceiling: PerDimension(rpm: .absolute(10), tpm: nil), actor: "cs",
            reason: "r", createdAt: 0, expiresAt: 10)
        #expect(
            Guardrails.crossings(of: promotedAndCapped, policy: Self.policy) == [
                Guardrails.Crossing(
                    kind: .ceilingBelowGuardMin, upstream: "p/m", dimension: .rpm, value: 10, guardrail: 20)
            ])
        // standard's guard_max (200 rpm) still binds a floor set while moving to premium (guard_max 400).
        let promotedWithFloor = Override(
            tenant: "acme", tier: "premium", floor: PerDimension(rpm: .absolute(300), tpm: nil), actor: "cs",
            reason: "r", createdAt: 0, expiresAt: 10)
        #expect(
            Guardrails.crossings(of: promotedWithFloor, policy: Self.policy) == [
                Guardrails.Crossing(
                    kind: .floorAboveGuardMax, upstream: "p/m", dimension: .rpm, value: 300, guardrail: 200)
            ])
        // A premium tenant moved to standard with a floor above standard's guard_max (200 rpm).
        var policy = Self.policy
        policy.setTenant(TenantPolicy(id: "vip", tier: "premium"))
        let demoted = Override(
            tenant: "vip", tier: "standard", floor: PerDimension(rpm: .absolute(300), tpm: nil), actor: "cs",
            reason: "r", createdAt: 0, expiresAt: 10)
        #expect(
            Guardrails.crossings(of: demoted, policy: policy) == [
                Guardrails.Crossing(
                    kind: .floorAboveGuardMax, upstream: "p/m", dimension: .rpm, value: 300, guardrail: 200)
            ])
        // Within both tiers' guardrails: applies directly.
        let fine = Override(
            tenant: "acme", tier: "premium", ceiling: PerDimension(rpm: .absolute(100), tpm: nil), actor: "cs",
            reason: "r", createdAt: 0, expiresAt: 10)
        #expect(Guardrails.crossings(of: fine, policy: Self.policy).isEmpty)
    }

    @Test func overrideBodiesAreParsedAndValidated() throws {
        let parsed = try Override.parse(
            try JSON.parse(#"{"tier": "premium", "floor": {"rpm": "2%"}, "reason": "launch", "ttl_s": 3600}"#),
            tenant: "acme", actor: "cs@x", now: 1000, policy: Self.policy)
        #expect(parsed.tier == "premium")
        #expect(parsed.floor == PerDimension(rpm: .percent(2), tpm: nil))
        #expect(parsed.expiresAt == 4600)
        #expect(parsed.actor == "cs@x")
        #expect(!parsed.approved)

        func error(_ text: String) -> InputError? {
            do {
                _ = try Override.parse(try JSON.parse(text), tenant: "acme", actor: "a", now: 1000, policy: Self.policy)
                return nil
            } catch let error as InputError {
                return error
            } catch {
                return nil
            }
        }
        #expect(
            error(#"{"weight": 2, "ttl_s": 60}"#)
                == InputError(
                    code: "missing_field", message: #"reason: missing required field "reason""#, field: "reason"))
        #expect(error(#"{"weight": 2, "reason": "r"}"#)?.field == "ttl_s")
        #expect(
            error(#"{"reason": "r", "ttl_s": 60}"#)?.message
                == "an override sets at least one of tier, weight, floor or ceiling")
        #expect(error(#"{"tier": "gold", "reason": "r", "ttl_s": 60}"#)?.code == "unknown_tier")
        #expect(
            error(#"{"weight": 2, "reason": "r", "expires_at": 10}"#)?.message == "expires_at: must be in the future")
        #expect(
            error(#"{"floor": {"rpm": 9}, "ceiling": {"rpm": 5}, "reason": "r", "ttl_s": 5}"#)?.code
                == "floor_above_ceiling")
        #expect(
            error(#"{"wieght": 2, "reason": "r", "ttl_s": 5}"#)?.message
                == #"wieght: unknown field "wieght"; did you mean "weight"?"#)
        #expect(
            error(#"{"weight": 2, "reason": "r", "ttl_s": 60, "expires_at": 5000}"#)
                == InputError(
                    code: "invalid_value", message: #"expires_at: give "ttl_s" or "expires_at", not both"#,
                    field: "expires_at"))
        #expect(
            error(#"{"weight": 2, "reason": "r", "ttl_s": 60, "upstream": "p/n"}"#)
                == InputError(
                    code: "unknown_upstream", message: #"upstream: unknown upstream "p/n"; did you mean "p/m"?"#,
                    field: "upstream"))
        // A pool the loop tracks from telemetry alone may be named, as may one the policy declares.
        let tracked = try Override.parse(
            try JSON.parse(#"{"weight": 2, "reason": "r", "ttl_s": 60, "upstream": "q/x"}"#), tenant: "acme",
            actor: "a", now: 1000, policy: Self.policy, tracked: ["q/x"])
        #expect(tracked.upstream == "q/x")
        #expect(error(#"{"weight": 2, "reason": "r", "ttl_s": 60, "upstream": "p/m"}"#) == nil)
    }

    @Test func overridesRoundTripThroughCodableWithUnboundedCeilings() throws {
        let override = Override(
            tenant: "t", ceiling: PerDimension(rpm: .unbounded, tpm: .percent(5)), actor: "a",
            reason: "r", createdAt: 1, expiresAt: 2)
        let data = try JSONEncoder().encode(override)
        #expect(try JSONDecoder().decode(Override.self, from: data) == override)
    }
}
