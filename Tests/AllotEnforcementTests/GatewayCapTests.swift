import AllotProtocol
import Testing

@testable import AllotEnforcement

/// The gateway's own cap per upstream: slices rounded up to whole requests cannot add up to a burst above
/// `capWindow` seconds of the sum of the gateway's slices.
@Suite struct GatewayCapTests {
    /// Thirty tenants whose slices are 0.6 RPM each, every bucket rounded up to one whole request: together
    /// 30 requests of burst for 18 RPM. The cap refills at 18 RPM (0.3 per second) and holds
    /// max(10 s × 0.3, 1) = 3 requests.
    static let small = (0..<30).map { TenantEntry.make("s\($0)", rpm: Bucket(rate: 0.6, burst: 1)) }
    static let message =
        "this gateway's share of openai/gpt-4o for all its tenants, 18 requests/min (burst 3) has no room for a "
        + "request; retry in 3.333 s"

    @Test func theSlicesRoundedUpToWholeRequestsBurstNoMoreThanTheCap() throws {
        let enforcer = Enforcer.make(.make(tenants: Self.small))
        for index in 0..<3 { _ = try enforcer.mustAdmit(.make("s\(index)"), now: 1_000) }
        for index in 3..<30 {
            let denial = try enforcer.mustDeny(.make("s\(index)"), now: 1_000)
            #expect(denial.code == "gateway_rate_limited")
            #expect(denial.limit == .rpm)
            #expect(approx(denial.retryAfter, 1 / 0.3))
            #expect(denial.message == Self.message)
        }
        // One request per 1 / 0.3 s after that, whoever asks.
        _ = try enforcer.mustAdmit(.make("s6"), now: 1_000 + 1 / 0.3)
        #expect(try enforcer.mustDeny(.make("s7"), now: 1_000 + 1 / 0.3).code == "gateway_rate_limited")

        // Without the cap every tenant's rounded-up bucket admits its request.
        let uncapped = Enforcer.make(
            .make(tenants: Self.small), configuration: GatewayConfiguration(gatewayID: "gw-1", capWindow: 0))
        for index in 0..<30 { _ = try uncapped.mustAdmit(.make("s\(index)"), now: 1_000) }
    }

    @Test func theCapIsAtLeastTheLargestBurstAndEachUpstreamHasItsOwn() throws {
        // One tenant of 3 RPM with a burst of 4: 10 s of 3 RPM is half a request, the cap holds its burst of 4.
        let lone = TenantEntry.make("lone", rpm: Bucket(rate: 3, burst: 4))
        let other = TenantEntry.make("lone", upstream: "anthropic/claude", rpm: Bucket(rate: 3, burst: 4))
        let enforcer = Enforcer.make(.make(tenants: [lone, other]))
        for _ in 0..<4 { _ = try enforcer.mustAdmit(.make("lone"), now: 1_000) }
        #expect(try enforcer.mustDeny(.make("lone"), now: 1_000).code == "rate_limited")  // its own bucket first
        for _ in 0..<4 { _ = try enforcer.mustAdmit(.make("lone", upstream: "anthropic/claude"), now: 1_000) }
    }

    @Test func whereTheGatewayHoldsNoSliceNewcomersShareAThirdOfTheUpstream() throws {
        // A fresh installation's first snapshot lists nobody: sixty newcomers on `default` (6 RPM, burst 2) on an
        // upstream of 300 RPM. Nothing summed bounded them together (each default bucket admits a request at
        // once: 60 at once here); the cap refills at a tenth of the upstream here, 30 RPM (0.5/s), and holds
        // max(10 s × 0.5, 2) = 5 requests.
        let upstream = UpstreamEntry(
            id: Snapshot.defaultUpstream, state: "healthy", capacity: DimensionValues(rpm: 300, tpm: 1_000_000))
        let enforcer = Enforcer.make(
            .make(upstreams: [upstream]), configuration: GatewayConfiguration(gatewayID: "gw-1", newcomerCapShare: 0.1))
        for index in 0..<5 { _ = try enforcer.mustAdmit(.make("n\(index)"), now: 1_000) }
        for index in 5..<60 {
            let denial = try enforcer.mustDeny(.make("n\(index)"), now: 1_000)
            #expect(denial.code == "gateway_rate_limited")
            #expect(denial.limit == .rpm)
            #expect(approx(denial.retryAfter, 2))
        }
        _ = try enforcer.mustAdmit(.make("n5"), now: 1_002)
        #expect(try enforcer.mustDeny(.make("n6"), now: 1_002).code == "gateway_rate_limited")

        // Once the snapshot gives the gateway a slice there, the cap is the sum of slices again: a tenant of
        // 60 RPM with a burst of 10 makes it 1/s holding 10 (its level kept, so full again only 10 s on).
        let listed = TenantEntry.make("acme", rpm: Bucket(rate: 60, burst: 10))
        enforcer.apply(.make(version: 2, tenants: [listed], upstreams: [upstream]), now: 1_002)
        for index in 10..<20 { _ = try enforcer.mustAdmit(.make("n\(index)"), now: 1_020) }
        #expect(try enforcer.mustDeny(.make("n20"), now: 1_020).code == "gateway_rate_limited")

        // Off, and on an upstream the snapshot gives no capacity for: every newcomer's `default` admits it.
        let open = Enforcer.make(
            .make(upstreams: [upstream]), configuration: GatewayConfiguration(gatewayID: "gw-1", newcomerCapShare: 0))
        for index in 0..<60 { _ = try open.mustAdmit(.make("n\(index)"), now: 1_000) }
        let unknown = Enforcer.make(.make())
        for index in 0..<60 { _ = try unknown.mustAdmit(.make("n\(index)"), now: 1_000) }
        // By default a third (0.34): 102 RPM, holding 10 s of it, 17 requests.
        let third = Enforcer.make(.make(upstreams: [upstream]))
        for index in 0..<17 { _ = try third.mustAdmit(.make("n\(index)"), now: 1_000) }
        #expect(try third.mustDeny(.make("n17"), now: 1_000).code == "gateway_rate_limited")
    }

    @Test func realtimeCallsMayUseTheReserveTheOtherClassesLeave() throws {
        let enforcer = Enforcer.make(.make(tenants: Self.small))
        // A realtime call takes the cap from 3 to 2; from now on the other classes leave room for realtime calls:
        // a tenth of the burst (0.3 of a request), but at least one request.
        _ = try enforcer.mustAdmit(.make("s0", taskClass: .realtime), now: 1_000)
        _ = try enforcer.mustAdmit(.make("s1"), now: 1_000)  // 2 ≥ 1 + 1
        let held = try enforcer.mustDeny(.make("s2"), now: 1_000)  // 1 < 2
        #expect(held.code == "gateway_rate_limited")
        #expect(approx(held.retryAfter, 1 / 0.3))
        #expect(
            held.message
                == "this gateway's share of openai/gpt-4o for all its tenants, 18 requests/min (burst 3) has no room "
                + "for a request beside the room kept for realtime calls; retry in 3.333 s")
        // A realtime call within its own allocation may use the reserve…
        _ = try enforcer.mustAdmit(.make("s3", taskClass: .realtime), now: 1_000)
        // …but not overdraw it: with the cap empty it is held like any other call, and its maximum wait (0.5 s)
        // is shorter than the refill, so it is denied with the refill as its retry-after.
        let empty = try enforcer.mustDeny(.make("s4", taskClass: .realtime), now: 1_000)
        #expect(empty.code == "gateway_rate_limited")
        #expect(approx(empty.retryAfter, 1 / 0.3))
        #expect(empty.message == Self.message)
    }

    @Test func aBorrowedRealtimeCallLeavesTheReserveLikeTheOthers() throws {
        // Idle buckets of 20 s (6 requests), full after 20 s without admissions; each tenant may borrow one
        // request within its allowance.
        let enforcer = Enforcer.make(
            .make(tenants: Self.small), configuration: GatewayConfiguration(gatewayID: "gw-1", borrowWindow: 20))
        _ = try enforcer.mustAdmit(.make("s0", taskClass: .realtime), now: 1_030)  // its own request: cap 3 → 2
        // Its own bucket is empty; it borrows, and a borrowed call leaves the reserve: 2 ≥ 1 + 1, cap → 1.
        _ = try enforcer.mustAdmit(.make("s0", taskClass: .realtime), now: 1_030)
        let borrowed = try enforcer.mustDeny(.make("s0", taskClass: .realtime), now: 1_030)  // 1 < 2
        #expect(borrowed.code == "gateway_rate_limited")
        #expect(borrowed.message.hasSuffix("beside the room kept for realtime calls; retry in 3.333 s"))
        // Another tenant's realtime call within its own allocation takes the last request.
        _ = try enforcer.mustAdmit(.make("s1", taskClass: .realtime), now: 1_030)
    }

    @Test func theReserveIsKeptForItsMemoryAfterTheLastRealtimeCallAndCanBeTurnedOff() throws {
        // A memory of 60 s (300 by default; the snapshot here expires 300 s on).
        let enforcer = Enforcer.make(
            .make(tenants: Self.small), configuration: GatewayConfiguration(gatewayID: "gw-1", capRealtimeMemory: 60))
        _ = try enforcer.mustAdmit(.make("s0", taskClass: .realtime), now: 1_000)
        // 60 s on the cap is full again (3): two calls leave 1, and the reserve still holds the third back.
        for index in 1...2 { _ = try enforcer.mustAdmit(.make("s\(index)"), now: 1_060) }
        #expect(try enforcer.mustDeny(.make("s3"), now: 1_060).code == "gateway_rate_limited")
        // Half a second later (60.5 s after the realtime call) nothing is kept: a level of 1.15 admits a call.
        _ = try enforcer.mustAdmit(.make("s3"), now: 1_060.5)

        // With the reserve off a realtime call keeps nothing back, and is held by an empty cap all the same.
        let off = Enforcer.make(
            .make(tenants: Self.small),
            configuration: GatewayConfiguration(gatewayID: "gw-1", capRealtimeReserve: 0))
        _ = try off.mustAdmit(.make("s0", taskClass: .realtime), now: 1_000)
        for index in 1...2 { _ = try off.mustAdmit(.make("s\(index)"), now: 1_000) }
        #expect(try off.mustDeny(.make("s3", taskClass: .realtime), now: 1_000).code == "gateway_rate_limited")
    }

    @Test func tenantsOnTheDefaultEntryAreHeldAndChargedButNotSummed() throws {
        // A gateway's snapshot lists the tenants it has a slice of; a tenant new to it is on `default`, which is
        // not sliced (every gateway has all of it), so its rate is in no sum, but what it admits is charged.
        let enforcer = Enforcer.make(.make(tenants: Self.small))
        for index in 0..<2 { _ = try enforcer.mustAdmit(.make("s\(index)"), now: 1_000) }
        _ = try enforcer.mustAdmit(.make("stranger-1"), now: 1_000)
        #expect(try enforcer.mustDeny(.make("stranger-2"), now: 1_000).code == "gateway_rate_limited")
        #expect(try enforcer.mustDeny(.make("s5"), now: 1_000).code == "gateway_rate_limited")
    }

    @Test func aShadowTenantIsCountedNotHeldByTheCap() throws {
        // Shadow mode counts what enforcing would deny and admits uncharged, the cap like its own buckets.
        let watcher = TenantEntry.make("s0", rpm: Bucket(rate: 0.6, burst: 1), mode: "shadow")
        let enforcer = Enforcer.make(.make(tenants: [watcher] + Self.small.dropFirst()))
        for index in 1..<4 { _ = try enforcer.mustAdmit(.make("s\(index)"), now: 1_000) }
        let ticket = try enforcer.mustAdmit(.make("s0"), now: 1_000)
        #expect(ticket.shadowDenial == .rpm)
        #expect(enforcer.statistics.shadowWouldDeny[.rpm] == 1)
        // Uncharged: the cap refills one request in 1 / 0.3 s for the others, as if s0 had not asked.
        _ = try enforcer.mustAdmit(.make("s7"), now: 1_000 + 1 / 0.3)
    }

    @Test func burstCreditIsNeitherHeldNorCharged() throws {
        // The credit is lent from the pool's reserve, which no slice includes.
        let lender = TenantEntry.make(
            "s0", rpm: Bucket(rate: 0.6, burst: 1),
            burstCredit: BurstCredit(calls: 3, tokens: 3_000, expiresAt: 1_300))
        let enforcer = Enforcer.make(.make(tenants: [lender] + Self.small.dropFirst()))
        for index in 0..<3 { _ = try enforcer.mustAdmit(.make("s\(index)"), now: 1_000) }
        // s0's own request is spent; its next three come from the credit although the cap is empty.
        for _ in 0..<3 { _ = try enforcer.mustAdmit(.make("s0"), now: 1_000) }
        #expect(try enforcer.mustDeny(.make("s0"), now: 1_000).code == "rate_limited")
        _ = try enforcer.mustAdmit(.make("s6"), now: 1_000 + 1 / 0.3)
    }

    @Test func aWaiterIsAdmittedWhenTheCapRefillsAndAReleaseGivesItBack() throws {
        let enforcer = Enforcer.make(.make(tenants: Self.small))
        var tickets: [Ticket] = []
        for index in 0..<3 { tickets.append(try enforcer.mustAdmit(.make("s\(index)"), now: 1_000)) }
        let log = DecisionLog()
        guard case .queued = enforcer.submit(.make("s6"), now: 1_000, onDecision: log.callback("s6")) else {
            Issue.record("expected the request to wait for the cap")
            return
        }
        #expect(approx(enforcer.nextWakeTime, 1_000 + 1 / 0.3))
        enforcer.pump(now: 1_000 + 1 / 0.3)
        let ticket = try #require(log.admission("s6")?.ticket)
        #expect(approx(ticket.waited, 1 / 0.3))
        // A ticket handed back unsent returns its request to the cap.
        #expect(try enforcer.mustDeny(.make("s7"), now: 1_000 + 1 / 0.3).code == "gateway_rate_limited")
        enforcer.release(tickets[0], now: 1_000 + 1 / 0.3)
        _ = try enforcer.mustAdmit(.make("s7"), now: 1_000 + 1 / 0.3)
    }

    @Test func aQuotaRefusalHoldsTheCapUntilItsRetryAfter() throws {
        // The cap holds 3 requests and refills 0.3 a second. One admitted leaves 2; the provider refuses it
        // (429, retry after 5 s) half a second later: the cap is drawn down to -0.5, where it admits the next
        // request 5 s on, although 2.15 requests of its burst were left and s1's own bucket is full.
        let refusal = AttemptResult(status: 429, latency: 0.5, headers: [("retry-after", "5")])
        let enforcer = Enforcer.make(.make(tenants: Self.small))
        enforcer.complete(try enforcer.mustAdmit(.make("s0"), now: 1_000), refusal, now: 1_000.5)
        let denial = try enforcer.mustDeny(.make("s1"), now: 1_000.5)
        #expect(denial.code == "gateway_rate_limited")
        #expect(approx(denial.retryAfter, 5))
        #expect(try enforcer.mustDeny(.make("s1"), now: 1_005.4).code == "gateway_rate_limited")
        _ = try enforcer.mustAdmit(.make("s1"), now: 1_005.5)

        // A refusal without a retry-after empties the cap: the next request comes one refill (3.333 s) later.
        let bare = Enforcer.make(.make(tenants: Self.small))
        bare.complete(try bare.mustAdmit(.make("s0"), now: 1_000), AttemptResult(status: 429), now: 1_000.5)
        #expect(approx(try bare.mustDeny(.make("s1"), now: 1_000.5).retryAfter, 1 / 0.3))
        _ = try bare.mustAdmit(.make("s1"), now: 1_000.5 + 1 / 0.3)

        // A retry-after beyond a minute holds it a minute; a success, or the setting off, holds nothing.
        let long = Enforcer.make(.make(tenants: Self.small))
        long.complete(
            try long.mustAdmit(.make("s0"), now: 1_000), AttemptResult(status: 429, headers: [("retry-after", "3600")]),
            now: 1_000.5)
        #expect(approx(try long.mustDeny(.make("s1"), now: 1_000.5).retryAfter, 60))
        // A negative or unreadable retry-after is none: the cap is emptied.
        for headers in [[("retry-after", "-5")], [("retry-after", "soon"), ("retry-after-ms", "NaN")]] {
            let hostile = Enforcer.make(.make(tenants: Self.small))
            hostile.complete(
                try hostile.mustAdmit(.make("s0"), now: 1_000), AttemptResult(status: 429, headers: headers),
                now: 1_000.5)
            #expect(approx(try hostile.mustDeny(.make("s1"), now: 1_000.5).retryAfter, 1 / 0.3), "\(headers)")
        }
        let served = Enforcer.make(.make(tenants: Self.small))
        served.complete(try served.mustAdmit(.make("s0"), now: 1_000), AttemptResult(status: 200), now: 1_000.5)
        _ = try served.mustAdmit(.make("s1"), now: 1_000.5)
        let off = Enforcer.make(
            .make(tenants: Self.small),
            configuration: GatewayConfiguration(gatewayID: "gw-1", capHoldsAfterRefusal: false))
        off.complete(try off.mustAdmit(.make("s0"), now: 1_000), refusal, now: 1_000.5)
        _ = try off.mustAdmit(.make("s1"), now: 1_000.5)
    }

    /// A refusal's hold is a wait: a snapshot that cuts the rate (the upstream collapsed) leaves at most the longest
    /// hold (60 s) of refill at the new rate. Kept in tokens, a 60-s hold at 1.2M tokens/min took 6,000 s at
    /// 12,000/min, and the gateway sent nothing after the upstream recovered (round 14).
    @Test func aRefusalsHoldIsAtMostAMinuteAtTheNewRateAfterACut() throws {
        /// s0 refused at 1,000.5 with `retryAfter`, then at 1,001 every slice cut to `rate` (per minute).
        func cut(retryAfter: String, to rate: Double) throws -> Enforcer {
            let refusal = AttemptResult(status: 429, latency: 0.5, headers: [("retry-after", retryAfter)])
            let enforcer = Enforcer.make(.make(expiresAt: 1e10, tenants: Self.small))
            enforcer.complete(try enforcer.mustAdmit(.make("s0"), now: 1_000), refusal, now: 1_000.5)
            let cut = (0..<30).map { TenantEntry.make("s\($0)", rpm: Bucket(rate: rate, burst: 1)) }
            #expect(enforcer.apply(.make(version: 2, expiresAt: 1e10, tenants: cut), now: 1_001) == .applied)
            return enforcer
        }
        // Held at 1 − 0.3/s × 60 s = −17 requests. Cut a hundredfold (0.003/s), it owes at most 60 s of that,
        // 0.18: one request is back 1.18 / 0.003 = 393 s on (kept in requests, 6,000 s).
        let enforcer = try cut(retryAfter: "60", to: 0.006)
        #expect(approx(try enforcer.mustDeny(.make("s1"), now: 1_001).retryAfter, 1.18 / 0.003, tolerance: 1e-6))
        _ = try enforcer.mustAdmit(.make("s1"), now: 1_001 + 1.18 / 0.003 + 1e-3)
        // A hold shorter than a minute at the new rate is kept as it is (tenfold: 0.35 owed, 1.17 s at 0.3/s).
        let other = try cut(retryAfter: "5", to: 0.06)
        #expect(approx(try other.mustDeny(.make("s1"), now: 1_001).retryAfter, 1.35 / 0.03, tolerance: 1e-6))
    }

    @Test func aNewSnapshotKeepsTheCapsLevel() throws {
        let enforcer = Enforcer.make(.make(tenants: Self.small))
        for index in 0..<3 { _ = try enforcer.mustAdmit(.make("s\(index)"), now: 1_000) }
        #expect(enforcer.apply(.make(version: 2, tenants: Self.small), now: 1_001) == .applied)
        #expect(try enforcer.mustDeny(.make("s6"), now: 1_001).code == "gateway_rate_limited")
        _ = try enforcer.mustAdmit(.make("s6"), now: 1_000 + 1 / 0.3)
    }

    @Test func aTokenHeavyRequestWaitsForTheTokenCap() throws {
        // Two tenants of 600 tokens/min with bursts of 1,000 (rounded up above 10 s of their rate): the token
        // cap refills at 1,200/min (20/s) and holds max(10 s × 20, 1,000) = 1,000 tokens.
        let heavy = (0..<2).map {
            TenantEntry.make("h\($0)", rpm: Bucket(rate: 60, burst: 10), tpm: Bucket(rate: 600, burst: 1_000))
        }
        let enforcer = Enforcer.make(.make(tenants: heavy))
        _ = try enforcer.mustAdmit(.make("h0", tokens: 800), now: 1_000)
        let denial = try enforcer.mustDeny(.make("h1", tokens: 800), now: 1_000)
        #expect(denial.code == "gateway_rate_limited")
        #expect(denial.limit == .tpm)
        #expect(approx(denial.retryAfter, 600.0 / 20))
        #expect(
            denial.message
                == "this gateway's share of openai/gpt-4o for all its tenants, 1200 tokens/min (burst 1000) has no "
                + "room for 800 tokens; retry in 30 s")
    }
    /// Two tenants of 600 tokens/min with bursts of 1,000: the token cap and the idle buckets both refill at
    /// 1,200/min (20/s) and hold 1,000 tokens; by t = 1,100 the idle buckets have filled (they start empty at the
    /// snapshot).
    static let pair = ["big", "small"].map {
        TenantEntry.make($0, rpm: Bucket(rate: 600, burst: 100), tpm: Bucket(rate: 600, burst: 1_000))
    }

    @Test func whileTheCapHoldsARequestWithRoomOfItsOwnNobodyBorrowsInThatDimension() throws {
        let enforcer = Enforcer.make(.make(tenants: Self.pair), configuration: IdleCapacityTests.unbounded)
        _ = try enforcer.mustAdmit(.make("small", tokens: 1_000), now: 1_100)  // cap and idle now empty
        // big's own bucket is full, the cap is not: held for (900 − 0) / 20 = 45 s.
        let held = try enforcer.mustDeny(.make("big", tokens: 900), now: 1_100)
        #expect(held.code == "gateway_rate_limited")
        #expect(held.limit == .tpm)
        #expect(approx(held.retryAfter, 45))
        // At 1,130 the cap and the idle buckets hold 600 and small's own bucket 300: small's 400 would fit
        // borrowed, but the idle allocation is big's, which the cap holds back. Told its own refill: 10 s.
        let denied = try enforcer.mustDeny(.make("small", tokens: 400), now: 1_130)
        #expect(denied.code == "rate_limited")
        #expect(approx(denied.retryAfter, 10))
        #expect(enforcer.statistics.borrowed == 0)
        // big gets its turn when the cap has refilled 900.
        _ = try enforcer.mustAdmit(.make("big", tokens: 900), now: 1_145)
        // The hold is over: at 1,195 the idle buckets and the cap are full again (50 s × 20) and small's own bucket
        // holds 300 + 65 s × 10 = 950, so a request of 980 is borrowed.
        _ = try enforcer.mustAdmit(.make("small", tokens: 980), now: 1_195)
        #expect(enforcer.statistics.borrowed == 1)
    }

    /// A borrower leaves one request of room in the cap for the tenants it borrows from: their own buckets are whole,
    /// and a lender coming back must not find the cap emptied by its borrower. Two tenants of 12 RPM with a
    /// 1-request burst (a slice behind many gateways): the cap and, with a 10-s borrow window, the idle buckets refill
    /// at 24 RPM (0.4 per second) and hold 4 requests.
    @Test func aBorrowerLeavesTheLenderARequestInTheCap() throws {
        let tenants = ["hog", "lender"].map { TenantEntry.make($0, rpm: Bucket(rate: 12, burst: 1)) }
        let enforcer = Enforcer.make(
            .make(tenants: tenants),
            configuration: GatewayConfiguration(gatewayID: "gw-1", borrowWindow: 10, borrowShare: .infinity))
        // Twenty seconds after the snapshot the cap and the idle buckets are full (4). The hog's own request
        // takes both to 3, two borrowed ones to 1; a third would leave the cap empty.
        for _ in 0..<3 { _ = try enforcer.mustAdmit(.make("hog"), now: 1_020) }
        #expect(enforcer.statistics.borrowed == 2)
        let held = try enforcer.mustDeny(.make("hog"), now: 1_020)
        #expect(held.code == "gateway_rate_limited")
        #expect(approx(held.retryAfter, 2.5))
        #expect(
            held.message
                == "this gateway's share of openai/gpt-4o for all its tenants, 24 requests/min (burst 4) has no room "
                + "for a request beside the room kept for the tenants it borrows from; retry in 2.5 s")
        // The lender's own request finds its bucket whole and the cap's last request.
        _ = try enforcer.mustAdmit(.make("lender"), now: 1_020)
        #expect(try enforcer.mustDeny(.make("lender"), now: 1_020).code == "rate_limited")
    }

    @Test func withoutARequestHeldBackTheSameBorrowGoesThrough() throws {
        let enforcer = Enforcer.make(.make(tenants: Self.pair), configuration: IdleCapacityTests.unbounded)
        _ = try enforcer.mustAdmit(.make("small", tokens: 1_000), now: 1_100)
        _ = try enforcer.mustAdmit(.make("small", tokens: 400), now: 1_130)
        #expect(enforcer.statistics.borrowed == 1)
    }
}
