import AllotProtocol
import Testing

@testable import AllotEnforcement

/// Work conservation: a tenant whose own bucket is empty borrows what others leave idle on the same upstream,
/// never from the lenders' own buckets, and the gateway never admits more than its slices in the long run.
@Suite struct IdleCapacityTests {
    /// Two tenants of 60 RPM with a 1-request burst: the idle buckets refill at 120 RPM (2 per second) and
    /// hold max(5 s × 120 / 60, 1) = 10 requests.
    static let busy = TenantEntry.make(
        "busy", rpm: Bucket(rate: 60, burst: 1), tpm: Bucket(rate: 60_000, burst: 10_000))
    static let quiet = TenantEntry.make(
        "quiet", rpm: Bucket(rate: 60, burst: 1), tpm: Bucket(rate: 60_000, burst: 10_000))

    @Test func idleBucketsSumTheSlicesPerUpstreamAndSkipUnlimitedDimensions() {
        let parameters = IdleCapacity.parameters(
            for: [
                (upstream: "a", limits: .make(rpm: 60, rpmBurst: 1, tpm: 60_000, tpmBurst: 10_000)),
                (upstream: "a", limits: .make(rpm: 30, rpmBurst: 20, tpm: 1e12, tpmBurst: 1e12)),
                (upstream: "b", limits: .make(rpm: 6, rpmBurst: 1, tpm: 600, tpmBurst: 100)),
            ], window: 5)
        #expect(parameters["a"]?.rpm == Bucket(rate: 90, burst: 20))  // 5 s of 90 RPM is 7.5 < the largest burst
        #expect(parameters["a"]?.tpm == nil)  // one tenant is unlimited in tokens: nothing to lend there
        #expect(parameters["b"]?.rpm == Bucket(rate: 6, burst: 1))
        #expect(parameters["b"]?.tpm == Bucket(rate: 600, burst: 100))
    }

    /// Borrowing without a per-tenant allowance: the idle buckets alone bound it.
    static let unbounded = GatewayConfiguration(gatewayID: "gw-1", borrowShare: .infinity)

    /// A borrower whose loan used far more than it declared owes it to its allowance, not to its own buckets: its
    /// state is kept (not collected as idle at the next snapshot) until the allowance is repaid too. Collected, the
    /// debt vanished with it (round 14).
    @Test func aBorrowersAllowanceDebtOutlivesTheNextSnapshot() throws {
        let rpm = Bucket(rate: 600, burst: 100)
        let small = TenantEntry.make("small", rpm: rpm, tpm: Bucket(rate: 6_000, burst: 1_000))
        let large = TenantEntry.make("large", rpm: rpm, tpm: Bucket(rate: 60_000, burst: 10_000))
        let configuration = GatewayConfiguration(gatewayID: "gw-1", capWindow: 0)
        let enforcer = Enforcer.make(.make(expiresAt: 1e10, tenants: [small, large]), configuration: configuration)
        let own = try enforcer.mustAdmit(.make("small", tokens: 1_000), now: 1_020)
        let loan = try enforcer.mustAdmit(.make("small", tokens: 1_000), now: 1_020)
        #expect(enforcer.statistics.borrowed == 1)
        enforcer.complete(loan, AttemptResult(status: 200, promptTokens: 1_000, completionTokens: 49_000), now: 1_021)
        enforcer.complete(own, AttemptResult(status: 200, promptTokens: 500, completionTokens: 500), now: 1_021)
        // By 1,035 its own buckets are full again; its allowance (6,000/min) owes 49,000 tokens for 490 s.
        #expect(enforcer.apply(.make(version: 2, expiresAt: 1e10, tenants: [small, large]), now: 1_035) == .applied)
        #expect(enforcer.status(now: 1_035).trackedTenants == 1)
        #expect(enforcer.apply(.make(version: 3, expiresAt: 1e10, tenants: [small, large]), now: 1_600) == .applied)
        #expect(enforcer.status(now: 1_600).trackedTenants == 0)
    }

    @Test func aBusyTenantBorrowsWhatAnotherLeavesIdleAndTheLenderKeepsItsBucket() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.busy, Self.quiet]), configuration: Self.unbounded)
        // The idle buckets start empty at the snapshot (1000): busy's own burst only.
        _ = try enforcer.mustAdmit(.make("busy"), now: 1_000)
        #expect(try enforcer.mustDeny(.make("busy"), now: 1_000).limit == .rpm)
        // Ten seconds later quiet has left 10 s of its allocation idle; busy's own bucket is full again (1).
        // The idle level is −1 + 10 s × 2/s = 19, capped at 10; busy's own admission takes one (9 left), then
        // it borrows nine.
        for _ in 0..<10 { _ = try enforcer.mustAdmit(.make("busy"), now: 1_010) }
        #expect(try enforcer.mustDeny(.make("busy"), now: 1_010).limit == .rpm)
        #expect(enforcer.statistics.borrowed == 9)
        let busy = try #require(enforcer.tenantStatus(tenant: "busy", upstream: Snapshot.defaultUpstream, now: 1_010))
        #expect(busy.rpm.level == 0)  // borrowed requests are not charged to its own bucket (no debt)
        // The lender comes back: its own bucket is untouched.
        let quiet = try #require(
            enforcer.tenantStatus(tenant: "quiet", upstream: Snapshot.defaultUpstream, now: 1_010))
        #expect(quiet.rpm.level == 1)
        _ = try enforcer.mustAdmit(.make("quiet"), now: 1_010)
    }

    @Test func inTheLongRunTheGatewayAdmitsNoMoreThanItsSlices() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.busy, Self.quiet]))
        var busyAdmitted = 0
        var quietAdmitted = 0
        // busy asks ten times a second for a minute; quiet asks once every two seconds (half its allocation).
        for step in 0..<600 {
            let now = 1_000 + Double(step) / 10
            if case .admitted = enforcer.tryAdmit(.make("busy"), now: now) { busyAdmitted += 1 }
            if step % 20 == 5, case .admitted = enforcer.tryAdmit(.make("quiet"), now: now) { quietAdmitted += 1 }
        }
        // quiet gets every request it asks for: lending never takes from its own bucket.
        #expect(quietAdmitted == 30)
        // busy: its own 60 RPM (its burst of 1 at the start, then one a second) and what quiet left idle.
        #expect(busyAdmitted == 89)
        // Together never more than the slices (120 in the minute) plus busy's initial burst.
        #expect(busyAdmitted + quietAdmitted <= 121)
        #expect(enforcer.statistics.borrowed == 29)

    }

    /// A tenant's `ceiling` bounds what it borrows (outside evaluation round 19: a tenant with an 8 % ceiling,
    /// allocated it, was served twice that from what others left idle while weight-1 tenants starved). At its
    /// ceiling it borrows nothing; 15 rpm below it, 15 in the minute (its ceiling room refills at 75 − 60 = 15/min
    /// and holds 5 s of that, 1.25), and nothing beyond, though its allowance and the idle buckets hold more; a
    /// dimension without a ceiling is unaffected.
    @Test func aTenantBorrowsNoFurtherThanItsCeiling() throws {
        func admitted(ceiling: DimensionValues?) -> (busy: Int, borrowed: Int) {
            var busy = Self.busy
            busy.ceiling = ceiling
            let enforcer = Enforcer.make(.make(tenants: [busy, Self.quiet]))
            var count = 0
            // busy asks ten times a second for a minute; quiet sends nothing.
            for step in 0..<600 {
                if case .admitted = enforcer.tryAdmit(.make("busy"), now: 1_000 + Double(step) / 10) { count += 1 }
            }
            return (count, enforcer.statistics.borrowed)
        }
        let uncapped = admitted(ceiling: nil)
        #expect(uncapped.borrowed > 50)  // 1 × its slice, and beyond it what accrues
        let atCeiling = admitted(ceiling: DimensionValues(rpm: 60, tpm: .infinity))
        #expect(atCeiling.borrowed == 0)
        #expect(atCeiling.busy == 60)
        // Published at the rate, a ceiling differs from it by rounding only: no room (a bucket refilled at 1e-13 a
        // minute admitted a loan every time it was full).
        #expect(admitted(ceiling: DimensionValues(rpm: 60 + 1e-13, tpm: .infinity)).borrowed == 0)
        let below = admitted(ceiling: DimensionValues(rpm: 75, tpm: .infinity))
        #expect(below.borrowed == 15)
        #expect(below.busy == 75)
        // A ceiling in tokens only leaves requests to the usual allowance.
        let tokensOnly = admitted(ceiling: DimensionValues(rpm: .infinity, tpm: 1e9))
        #expect(tokensOnly.borrowed == uncapped.borrowed)
    }

    /// The ceiling's room times what a tenant is told and when its waiters wake: not when the idle buckets could
    /// lend again but when the room has a request's worth. slow (6 rpm, its own refill 10 s) with a ceiling of 18 rpm
    /// has a room refilled at 12 rpm (0.2/s) holding the 5-s borrow window of it (1); quiet's 60 rpm sits idle.
    @Test func theCeilingsRoomTimesTheRetryAndTheWake() throws {
        var slow = TenantEntry.make("slow", rpm: Bucket(rate: 6, burst: 1), tpm: Bucket(rate: 60_000, burst: 10_000))
        slow.ceiling = DimensionValues(rpm: 18, tpm: .infinity)
        let enforcer = Enforcer.make(.make(tenants: [slow, Self.quiet]), configuration: Self.unbounded)
        _ = try enforcer.mustAdmit(.make("slow"), now: 1_010)  // its own
        _ = try enforcer.mustAdmit(.make("slow"), now: 1_010)  // borrowed: the room is empty
        #expect(enforcer.statistics.borrowed == 1)
        // The idle buckets hold 3.5 more, but the room refills one request in 5 s, before slow's own 10 s.
        let denial = try enforcer.mustDeny(.make("slow"), now: 1_010)
        #expect(denial.limit == .rpm)
        #expect(try #require(denial.retryAfter) == 5)
        // A batch call waits for it, and wakes then, not at once.
        let log = DecisionLog()
        guard
            case .queued = enforcer.submit(.make("slow", taskClass: .batch), now: 1_010, onDecision: log.callback("b"))
        else {
            Issue.record("expected the batch call to wait for the ceiling's room")
            return
        }
        let wake = try #require(enforcer.nextWakeTime)
        #expect(abs(wake - 1_015) < 1e-9)
    }

    /// A burst credit counts against the ceiling as borrowing does (its rate is not in the tenant's): spent at once,
    /// it leaves the ceiling's room in debt, and the tenant borrows nothing on top of it until that is repaid.
    @Test func aBurstCreditCountsAgainstTheCeiling() throws {
        var busy = Self.busy
        busy.ceiling = DimensionValues(rpm: 70, tpm: .infinity)  // room 10 a minute
        busy.burstCredit = BurstCredit(calls: 10, tokens: 0, expiresAt: 1_060)
        let enforcer = Enforcer.make(.make(tenants: [busy, Self.quiet]))
        var count = 0
        for step in 0..<600 {
            if case .admitted = enforcer.tryAdmit(.make("busy"), now: 1_000 + Double(step) / 10) { count += 1 }
        }
        // Its own 60 (1 + 59.9 refilled) and the credit's 10: the room, 10 in debt, is back at 0 by the minute's end.
        #expect(count == 70)
        #expect(enforcer.statistics.borrowed == 0)
    }

    @Test func aWaiterIsAdmittedOnIdleAllocationBeforeItsOwnRefill() throws {
        // slow refills one request per 10 s, beyond the interactive class's 5 s maximum wait; fast (60 RPM)
        // sends nothing, so the idle buckets refill at 66 RPM = 1.1/s with 5.5 requests of room. Without
        // borrowing, slow's second request would be denied at once.
        let slow = TenantEntry.make("slow", rpm: Bucket(rate: 6, burst: 1))
        let fast = TenantEntry.make("fast", rpm: Bucket(rate: 60, burst: 1))
        let enforcer = Enforcer.make(.make(tenants: [slow, fast]))
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(.make("slow"), now: 1_000)  // idle level −1
        guard case .queued = enforcer.submit(.make("slow"), now: 1_000, onDecision: log.callback("slow")) else {
            Issue.record("expected the request to wait for idle allocation")
            return
        }
        // The wake is when the idle level reaches one request again: 2 / 1.1 s, long before slow's own refill.
        let wake = try #require(enforcer.nextWakeTime)
        #expect(abs(wake - (1_000 + 2 / 1.1)) < 1e-9)
        enforcer.pump(now: wake)
        let ticket = try #require(log.admission("slow")?.ticket)
        #expect(abs(ticket.waited - 2 / 1.1) < 1e-9)
        #expect(enforcer.statistics.borrowed == 1)
    }

    @Test func zeroAllocationsDenialsAndDisabledBorrowingNeverBorrow() throws {
        let zero = TenantEntry.make("zero", rpm: Bucket(rate: 0, burst: 0))
        let denied = TenantEntry.make("denied", deny: "budget_exhausted")
        let enforcer = Enforcer.make(.make(tenants: [Self.quiet, zero, denied]))
        enforcer.pump(now: 1_030)  // 30 s of quiet's allocation idle
        #expect(try enforcer.mustDeny(.make("zero"), now: 1_030).code == "zero_allocation")
        #expect(try enforcer.mustDeny(.make("denied"), now: 1_030).code == "budget_exhausted")
        #expect(enforcer.statistics.borrowed == 0)

        let isolated = Enforcer.make(
            .make(tenants: [Self.busy, Self.quiet]),
            configuration: GatewayConfiguration(gatewayID: "gw-1", borrowIdle: false))
        _ = try isolated.mustAdmit(.make("busy"), now: 1_030)
        #expect(try isolated.mustDeny(.make("busy"), now: 1_030).limit == .rpm)
    }

    @Test func aReleasedBorrowedTicketGoesBackToTheIdleBucketsNotTheOwnBucket() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.busy, Self.quiet]), configuration: Self.unbounded)
        _ = try enforcer.mustAdmit(.make("busy"), now: 1_010)  // own: idle 10 → 9
        let borrowed = try enforcer.mustAdmit(.make("busy"), now: 1_010)  // borrowed: idle 8
        #expect(enforcer.statistics.borrowed == 1)
        enforcer.release(borrowed, now: 1_010)
        let busy = try #require(enforcer.tenantStatus(tenant: "busy", upstream: Snapshot.defaultUpstream, now: 1_010))
        #expect(busy.rpm.level == 0)  // the own bucket was not refunded: it was never charged
        // The idle buckets got it back: eight more borrows fit (9 after the refund, the last leaves 0… then 1
        // more is denied).
        for _ in 0..<9 { _ = try enforcer.mustAdmit(.make("busy"), now: 1_010) }
        #expect(try enforcer.mustDeny(.make("busy"), now: 1_010).limit == .rpm)
    }

    @Test func withinTheirAllowancesTenantsBorrowFirstAndBeyondItOnlyWhatAccrues() throws {
        // Three tenants of 60 RPM (burst 1); quiet sends nothing. The idle buckets refill at 180 RPM (3/s) and hold
        // 5 s of it (15). By default a tenant's allowance is its own slice again: 60 RPM, with a burst of 5 s of
        // it (5). Beyond it, it borrows only while that leaves the idle buckets at least a quarter full (3.75).
        let other = TenantEntry.make("other", rpm: Bucket(rate: 60, burst: 1), tpm: Bucket(rate: 60_000, burst: 10_000))
        let tenants = [Self.busy, Self.quiet, other]
        let enforcer = Enforcer.make(.make(tenants: tenants))
        // Ten seconds in: idle 15. busy's own request (idle 14), five borrowed within its allowance (idle 9), five
        // beyond it (idle 4); the next would leave 3.
        for _ in 0..<11 { _ = try enforcer.mustAdmit(.make("busy"), now: 1_010) }
        let denial = try enforcer.mustDeny(.make("busy"), now: 1_010)
        #expect(denial.limit == .rpm)
        // It is told to come back when its allowance has room again (1 s), not at once.
        #expect(denial.retryAfter == 1)
        #expect(enforcer.statistics.borrowed == 10)
        // The reserve busy could not take is other's, within its allowance: its own request (idle 3), then three
        // borrowed (idle 0).
        for _ in 0..<4 { _ = try enforcer.mustAdmit(.make("other"), now: 1_010) }
        #expect(try enforcer.mustDeny(.make("other"), now: 1_010).limit == .rpm)
        #expect(enforcer.statistics.borrowed == 13)
        // Nobody asks for four seconds: the idle buckets refill to 12; busy takes its own refilled request (11),
        // borrows four within its refilled allowance (7) and three beyond it (4).
        for _ in 0..<8 { _ = try enforcer.mustAdmit(.make("busy"), now: 1_014) }
        #expect(try enforcer.mustDeny(.make("busy"), now: 1_014).limit == .rpm)

        // A tenant of the first tier (priority 0, by default) has no allowance, even when it was first seen
        // before the snapshot listed it (its state created under the default limits, with an allowance).
        let critical = TenantEntry.make(
            "busy", rpm: Bucket(rate: 60, burst: 1), tpm: Bucket(rate: 60_000, burst: 10_000), priority: 0)
        let first = Enforcer.make(.make(tenants: [Self.quiet, other]))
        _ = try first.mustAdmit(.make("busy"), now: 1_000)
        first.apply(.make(version: 2, tenants: [critical, Self.quiet, other]), now: 1_000)
        for _ in 0..<15 { _ = try first.mustAdmit(.make("busy"), now: 1_010) }
        #expect(first.statistics.borrowed == 14)

        // Unbounded, the first to ask takes it all: busy borrows all 14, other only its own request.
        let greedy = Enforcer.make(.make(tenants: tenants), configuration: Self.unbounded)
        for _ in 0..<15 { _ = try greedy.mustAdmit(.make("busy"), now: 1_010) }
        #expect(greedy.statistics.borrowed == 14)
        _ = try greedy.mustAdmit(.make("other"), now: 1_010)
        #expect(try greedy.mustDeny(.make("other"), now: 1_010).limit == .rpm)
    }

    /// A lender of 60,000 tokens a minute, and tenants of 60 (token-bound: they wait for what others leave idle).
    static let lender = TenantEntry.make(
        "quiet", rpm: Bucket(rate: 600, burst: 100), tpm: Bucket(rate: 60_000, burst: 1_000))
    static func tokenBound(_ id: String, burst: Double, maxConcurrency: Int = 1_000) -> TenantEntry {
        TenantEntry.make(
            id, rpm: Bucket(rate: 600, burst: 100), tpm: Bucket(rate: 60, burst: burst), maxConcurrency: maxConcurrency)
    }

    /// `large` (calls of 1,000 tokens) and `small` (300) have emptied their own token buckets; `quiet` lends. The
    /// idle token bucket refills at 60,120 tokens a minute (1,002/s) and starts 1,300 in debt (the two
    /// admissions). Borrowing is unbounded by allowances, so only the hold decides.
    static func largeWaitsForIdleTokens(class taskClass: TaskClass) throws -> (Enforcer, DecisionLog) {
        let quiet = Self.lender
        let large = Self.tokenBound("large", burst: 1_000)
        let small = Self.tokenBound("small", burst: 300)
        let enforcer = Enforcer.make(.make(tenants: [quiet, large, small]), configuration: Self.unbounded)
        _ = try enforcer.mustAdmit(.make("large", taskClass: taskClass, tokens: 1_000), now: 1_000)
        _ = try enforcer.mustAdmit(.make("small", tokens: 300), now: 1_000)
        let log = DecisionLog()
        // large's next call waits for idle allocation: 2,300 tokens away, 2.3 s.
        guard
            case .queued = enforcer.submit(
                .make("large", taskClass: taskClass, tokens: 1_000), now: 1_000, onDecision: log.callback("large"))
        else { throw FixtureError.unexpected }
        // Before large is looked at again, small borrows 300 of the 704 accrued (404 left)…
        _ = try enforcer.mustAdmit(.make("small", tokens: 300), now: 1_002)
        #expect(enforcer.statistics.borrowed == 1)
        // …so at its check large finds 700 of its 1,000: it holds the idle tokens for the 300 / 1,002 s they need.
        let check = try #require(enforcer.nextWakeTime)
        #expect(abs(check - (1_000 + 2_300.0 / 1_002)) < 1e-9)
        enforcer.pump(now: check)
        #expect(log.admission("large") == nil)
        return (enforcer, log)
    }

    @Test func aWaiterShortOfIdleAllocationHoldsItAgainstSmallerLaterRequests() throws {
        let (enforcer, log) = try Self.largeWaitsForIdleTokens(class: .interactive)
        let holdEnds = 1_000 + 2_300.0 / 1_002 + 300.0 / 1_002
        // 805 idle tokens would fit small's 300, but they are large's: small is told to come back when the hold ends.
        let denial = try enforcer.mustDeny(.make("small", tokens: 300), now: 1_002.4)
        #expect(denial.limit == .tpm)
        #expect(abs(try #require(denial.retryAfter) - (holdEnds - 1_002.4)) < 1e-9)
        #expect(enforcer.statistics.borrowed == 1)
        // At the hold's end large borrows its 1,000.
        let wake = try #require(enforcer.nextWakeTime)
        #expect(abs(wake - holdEnds) < 1e-9)
        enforcer.pump(now: wake)
        let ticket = try #require(log.admission("large")?.ticket)
        #expect(abs(ticket.waited - (holdEnds - 1_000)) < 1e-9)
        #expect(enforcer.statistics.borrowed == 2)
        // The hold ends with it: small borrows again once 300 have accrued.
        _ = try enforcer.mustAdmit(.make("small", tokens: 300), now: holdEnds + 300.0 / 1_002)
    }

    @Test func aHoldStopsEveryClassOfAnotherTenantButRealtime() throws {
        // large waits with a batch call: small's interactive call does not borrow through its hold either (across
        // tenants a class buys no turn but realtime's: outside evaluation round 37, whose review found the hold
        // still ranked by class)…
        let (enforcer, _) = try Self.largeWaitsForIdleTokens(class: .batch)
        _ = try enforcer.mustDeny(.make("small", taskClass: .interactive, tokens: 300), now: 1_002.4)
        _ = try enforcer.mustDeny(.make("small", taskClass: .batch, tokens: 300), now: 1_002.4)
        #expect(enforcer.statistics.borrowed == 1)
        // …but its realtime call does.
        _ = try enforcer.mustAdmit(.make("small", taskClass: .realtime, tokens: 300), now: 1_002.4)
        #expect(enforcer.statistics.borrowed == 2)
    }

    @Test func aLoanLargerThanDeclaredCountsAgainstTheBorrowAllowance() throws {
        // x: 6,000 tokens a minute (100/s), burst and allowance 1,000. The idle token bucket refills at 66,000 a
        // minute (1,100/s), holds 10,000 (quiet's burst), and lends beyond an allowance only what leaves 2,500.
        let quiet = TenantEntry.make(
            "quiet", rpm: Bucket(rate: 600, burst: 100), tpm: Bucket(rate: 60_000, burst: 10_000))
        let x = TenantEntry.make("x", rpm: Bucket(rate: 600, burst: 100), tpm: Bucket(rate: 6_000, burst: 1_000))
        let enforcer = Enforcer.make(.make(tenants: [quiet, x]))
        _ = try enforcer.mustAdmit(.make("x", tokens: 1_000), now: 1_000)  // own bucket 0, idle −1,000
        // Two seconds on (own 200, idle 1,200) it borrows a call declared at 500 within its allowance…
        let loan = try enforcer.mustAdmit(.make("x", tokens: 500), now: 1_002)
        #expect(enforcer.statistics.borrowed == 1)
        // …which used 1,000: the 500 it did not declare come off its allowance too (500 → 0), not only the idle
        // bucket.
        enforcer.complete(loan, AttemptResult(status: 200, promptTokens: 800, completionTokens: 200), now: 1_002)
        // A second later: own 300, idle 1,300, allowance 100. Another 500 would be beyond its allowance and leave
        // the idle bucket under a quarter full: denied. (Charged only what it declared, the allowance held 600.)
        #expect(try enforcer.mustDeny(.make("x", tokens: 500), now: 1_003).limit == .tpm)
        #expect(enforcer.statistics.borrowed == 1)
    }

    @Test func theWaiterAheadInServiceOrderHoldsTheIdleAllocationBeforeALaterOneTakesIt() throws {
        // `large` waits for idle tokens (as above, due at 2,300 / 1,002 s); `solo` (one call at a time) waits behind
        // its own call in flight. When that call completes at 1,002, 704 idle tokens would fit solo's 300, but
        // `large`, ahead in service order, is looked at first: it is short of them, holds them, and `solo` waits.
        let quiet = Self.lender
        let large = Self.tokenBound("large", burst: 1_000)
        let solo = Self.tokenBound("solo", burst: 300, maxConcurrency: 1)
        let enforcer = Enforcer.make(.make(tenants: [quiet, large, solo]), configuration: Self.unbounded)
        _ = try enforcer.mustAdmit(.make("large", tokens: 1_000), now: 1_000)
        let inFlight = try enforcer.mustAdmit(.make("solo", tokens: 300), now: 1_000)
        let log = DecisionLog()
        for tenant in ["large", "solo"] {
            let tokens = tenant == "large" ? 1_000 : 300
            let submitted = enforcer.submit(.make(tenant, tokens: tokens), now: 1_000, onDecision: log.callback(tenant))
            guard case .queued = submitted else { throw FixtureError.unexpected }
        }
        enforcer.complete(inFlight, AttemptResult(status: 200, promptTokens: 200, completionTokens: 100), now: 1_002)
        #expect(log.admission("solo") == nil)
        #expect(enforcer.statistics.borrowed == 0)
        // `large` borrows when its 1,000 have accrued, then `solo` once 300 more have.
        let due = 1_000 + 2_300.0 / 1_002
        enforcer.pump(now: due)
        #expect(abs(try #require(log.admission("large")?.ticket).waited - (due - 1_000)) < 1e-9)
        #expect(log.admission("solo") == nil)
        let next = try #require(enforcer.nextWakeTime)
        #expect(abs(next - (due + 300.0 / 1_002)) < 1e-9)
        enforcer.pump(now: next)
        #expect(log.admission("solo")?.ticket != nil)
        #expect(enforcer.statistics.borrowed == 2)
    }

    @Test func aCompletionThatLeavesIdleRoomLetsTheUpstreamsWaitersBorrowInServiceOrder() throws {
        // `early` (a 310-token call) waits for idle tokens; `x` has a call in flight. The idle token bucket refills
        // at 1,002/s and starts 600 in debt.
        let quiet = Self.lender
        let early = Self.tokenBound("early", burst: 300)
        let x = Self.tokenBound("x", burst: 300)
        let tenants = [quiet, early, x]
        let enforcer = Enforcer.make(.make(tenants: tenants), configuration: Self.unbounded)
        _ = try enforcer.mustAdmit(.make("early", tokens: 300), now: 1_000)
        let inFlight = try enforcer.mustAdmit(.make("x", tokens: 300), now: 1_000)
        let log = DecisionLog()
        guard case .queued = enforcer.submit(.make("early", tokens: 310), now: 1_000, onDecision: log.callback("early"))
        else { throw FixtureError.unexpected }
        // A snapshot looks at every waiter when 305 idle tokens have accrued: early, 5 short, holds them for
        // 5 / 1,002 s and is looked at again in 0.05 s (``EnforcerState/borrowRecheck``, the least a lane waits for
        // a look).
        let snapshot = 1_000 + 905.0 / 1_002
        enforcer.apply(.make(version: 2, tenants: tenants), now: snapshot)
        #expect(log.admission("early") == nil)
        // x's next call comes during the hold: it waits too (307 would fit its 300), also for 0.05 s.
        let next = enforcer.submit(.make("x", tokens: 300), now: snapshot + 0.002, onDecision: log.callback("x"))
        guard case .queued = next else { throw FixtureError.unexpected }
        // The hold over, x's call in flight completes, using what it reserved (nothing returns to the idle buckets).
        // 325 idle tokens: the loan goes to early, first in service order, not to the tenant whose completion it was.
        let used = AttemptResult(status: 200, promptTokens: 200, completionTokens: 100)
        enforcer.complete(inFlight, used, now: snapshot + 0.02)
        #expect(log.admission("early")?.ticket != nil)
        #expect(log.admission("x") == nil)
        #expect(enforcer.statistics.borrowed == 1)
    }
}
