import AllotProtocol
import AllotSignals
import Testing

@testable import AllotEnforcement

/// Dual buckets, hot swaps, leases and the snapshot's per-tenant settings, on explicit `now` values.
@Suite struct EnforcerLimitsTests {
    /// acme: 60 RPM (1/s) burst 2; 6,000 TPM (100/s) burst 1,000.
    static let acme = TenantEntry.make(rpm: Bucket(rate: 60, burst: 2), tpm: Bucket(rate: 6_000, burst: 1_000))

    @Test func rpmBucketDeniesWithRetryAfterFromTheRefill() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.acme]))
        _ = try enforcer.mustAdmit(now: 1_000)
        _ = try enforcer.mustAdmit(now: 1_000)
        let denial = try enforcer.mustDeny(now: 1_000.25)
        #expect(denial.limit == .rpm)
        #expect(denial.code == "rate_limited")
        #expect(denial.retryAfter == 0.75)
        #expect(denial.retryAfterHeader == "1")
        #expect(denial.snapshotVersion == 1)
        #expect(denial.suggestedStatus == 429)
        #expect(!denial.fallback)
        _ = try enforcer.mustAdmit(now: 1_001)
        let status = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_001))
        #expect(status.rpm.level == 0)
        // 1,000 - 100 - 100 at t=1000, +100 refill, -100 at t=1001.
        #expect(status.tpm.level == 800)
    }

    @Test func tpmBucketDeniesWhenTheEstimateDoesNotFit() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.acme]))
        _ = try enforcer.mustAdmit(.make(tokens: 900), now: 1_000)
        let denial = try enforcer.mustDeny(.make(tokens: 300), now: 1_000)
        #expect(denial.limit == .tpm)
        #expect(denial.retryAfter == 2)  // 200 tokens missing at 100 per second
        #expect(denial.message.contains("300 tokens"))
        _ = try enforcer.mustAdmit(.make(tokens: 300), now: 1_002)
    }

    @Test func whenBothBucketsAreShortTheLongerWaitIsReported() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.acme]))
        _ = try enforcer.mustAdmit(.make(tokens: 500), now: 1_000)
        _ = try enforcer.mustAdmit(.make(tokens: 500), now: 1_000)
        // RPM needs 1 s, TPM needs 5 s for 500 tokens.
        let denial = try enforcer.mustDeny(.make(tokens: 500), now: 1_000)
        #expect(denial.limit == .tpm)
        #expect(denial.retryAfter == 5)
    }

    @Test func unknownTenantsGetTheDefaultEachInTheirOwnBuckets() throws {
        // default: 6 RPM burst 2.
        let enforcer = Enforcer.make(.make(tenants: [Self.acme]))
        _ = try enforcer.mustAdmit(.make("newco", tokens: 10), now: 1_000)
        _ = try enforcer.mustAdmit(.make("newco", tokens: 10), now: 1_000)
        let denial = try enforcer.mustDeny(.make("newco", tokens: 10), now: 1_000)
        #expect(denial.limit == .rpm)
        // Its own bucket refills in 10 s, but acme's idle allocation (60 RPM, started empty and charged with
        // newco's two requests: −2) has a request to lend after 3 s: the sooner of the two is advised.
        #expect(denial.retryAfter == 3)
        #expect(denial.message.contains("10 s"))
        _ = try enforcer.mustAdmit(.make("other", tokens: 10), now: 1_000)
        let status = try #require(
            enforcer.tenantStatus(tenant: "newco", upstream: Snapshot.defaultUpstream, now: 1_000))
        #expect(!status.listed)
        #expect(status.limits == .make(rpm: 6, rpmBurst: 2, tpm: 600, tpmBurst: 200))
        // A listed tenant on another upstream is unknown there.
        let elsewhere = try #require(enforcer.tenantStatus(tenant: "acme", upstream: "anthropic/claude", now: 1_000))
        #expect(!elsewhere.listed)
    }

    @Test func anUnlistedTenantRetriesAtTheNextSnapshotAndStartsItsOwnBucketsFullLessWhatItUsed() throws {
        // default: 6 RPM burst 2, 600 TPM burst 200; nobody listed, so nothing to borrow.
        let enforcer = Enforcer.make(.make(tenants: []))
        _ = try enforcer.mustAdmit(.make("newco", tokens: 10), now: 1_000)
        _ = try enforcer.mustAdmit(.make("newco", tokens: 10), now: 1_000)
        // The default bucket refills a request in 10 s; the next snapshot (refresh 5 s) may list newco.
        let denial = try enforcer.mustDeny(.make("newco", tokens: 10), now: 1_000)
        #expect(denial.limit == .rpm)
        #expect(denial.code == "rate_limited")
        #expect(denial.retryAfter == 5)
        #expect(
            denial.message
                == "tenant newco on \(Snapshot.defaultUpstream) is not in the snapshot yet: the default rpm limit "
                + "6 requests/min (burst 2) has no room for a request; retry after the next snapshot, in 5 s")
        // A listed tenant is told its own refill, however long.
        let slow = TenantEntry.make("slow", rpm: Bucket(rate: 1, burst: 1))
        let listing = Enforcer.make(.make(tenants: [slow]))
        _ = try listing.mustAdmit(.make("slow", tokens: 10), now: 1_000)
        #expect(try listing.mustDeny(.make("slow", tokens: 10), now: 1_000).retryAfter == 60)

        // Listed a second later with its own allocation: its buckets are full less what it used on the default
        // entry (1.9 requests: 2 taken, 0.1 refilled; 10 tokens: 20 taken, 10 refilled), not the default bucket's
        // level (a swap between two entries of the snapshot never refills).
        let newco = TenantEntry.make("newco", rpm: Bucket(rate: 60, burst: 10), tpm: Bucket(rate: 60_000, burst: 10_000))
        #expect(enforcer.apply(.make(version: 2, tenants: [newco]), now: 1_001) == .applied)
        let status = try #require(enforcer.tenantStatus(tenant: "newco", upstream: Snapshot.defaultUpstream, now: 1_001))
        #expect(status.listed)
        #expect(approx(status.rpm.level, 8.1))
        #expect(approx(status.tpm.level, 9_990))
        for _ in 0..<8 { _ = try enforcer.mustAdmit(.make("newco", tokens: 10), now: 1_001) }
        #expect(try enforcer.mustDeny(.make("newco", tokens: 10), now: 1_001).limit == .rpm)
    }

    @Test func hotSwapLoweringTheRateClampsAndDoesNotRefill() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.acme]))
        _ = try enforcer.mustAdmit(.make(tokens: 100), now: 1_000)  // TPM 900, RPM 1
        let lowered = TenantEntry.make(rpm: Bucket(rate: 6, burst: 1), tpm: Bucket(rate: 600, burst: 300))
        #expect(enforcer.apply(.make(version: 2, tenants: [lowered]), now: 1_000.5) == .applied)
        let status = try #require(
            enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_000.5))
        #expect(status.tpm.level == 300)  // clamped to the new burst
        #expect(status.rpm.level == 1)  // 1 + 0.5 at the old rate = 1.5, clamped to 1
        _ = try enforcer.mustAdmit(.make(tokens: 300), now: 1_000.5)
        // New rates: 0.1 request/s and 10 tokens/s.
        let denial = try enforcer.mustDeny(.make(tokens: 50), now: 1_001)
        #expect(denial.limit == .rpm)  // RPM needs 9.5 s, TPM 4.5 s
        #expect(approx(denial.retryAfter, 9.5))
        let later = try #require(
            enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_010.5))
        #expect(later.tpm.level == 100)
        #expect(later.rpm.level == 1)
    }

    @Test func hotSwapRaisingTheRateKeepsTheFillLevel() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.acme]))
        _ = try enforcer.mustAdmit(.make(tokens: 1_000), now: 1_000)
        _ = try enforcer.mustAdmit(.make(tokens: 0), now: 1_000)  // RPM and TPM both empty
        let raised = TenantEntry.make(rpm: Bucket(rate: 600, burst: 50), tpm: Bucket(rate: 60_000, burst: 20_000))
        #expect(enforcer.apply(.make(version: 2, tenants: [raised]), now: 1_000) == .applied)
        let status = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_000))
        #expect(status.rpm.level == 0)
        #expect(status.tpm.level == 0)
        #expect(status.limits.tpm == Bucket(rate: 60_000, burst: 20_000))
        // No burst to exploit: the new rate fills 10 requests and 1,000 tokens per second.
        let denial = try enforcer.mustDeny(.make(tokens: 200), now: 1_000)
        #expect(denial.limit == .tpm)
        #expect(denial.retryAfter == 0.2)
        let later = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_001))
        #expect(later.rpm.level == 10)
        #expect(later.tpm.level == 1_000)
    }

    /// A tenant with nothing in either dimension is told so, named by its requests (round 32: "has no tpm
    /// allocation"); one with nothing in one dimension is told which.
    @Test func aZeroAllocationNamesTheDimensionsItLacks() throws {
        let none = TenantEntry.make("none", rpm: Bucket(rate: 0, burst: 0), tpm: Bucket(rate: 0, burst: 0))
        let noTokens = TenantEntry.make("tokenless", tpm: Bucket(rate: 0, burst: 0))
        let enforcer = Enforcer.make(.make(tenants: [none, noTokens]))
        let both = try enforcer.mustDeny(.make("none"), now: 1_001)
        #expect(both.code == "zero_allocation")
        #expect(both.limit == .rpm)
        #expect(both.message == "tenant none has no rpm or tpm allocation on \(Snapshot.defaultUpstream)")
        let tokens = try enforcer.mustDeny(.make("tokenless"), now: 1_001)
        #expect(tokens.limit == .tpm)
        #expect(tokens.message == "tenant tokenless has no tpm allocation on \(Snapshot.defaultUpstream)")
    }

    @Test func aLowerVersionIsRejectedAndTheSameVersionIsUnchanged() throws {
        let collector = EventCollector()
        let enforcer = Enforcer.make(.make(version: 5, tenants: [Self.acme]), collector: collector)
        let other = TenantEntry.make(rpm: Bucket(rate: 1, burst: 1))
        #expect(
            enforcer.apply(.make(version: 4, tenants: [other]), now: 1_001)
                == .rejected(
                    reason: "version 4 is below the enforced version 5"))
        #expect(enforcer.apply(.make(version: 5, tenants: [other]), now: 1_001) == .unchanged)
        #expect(enforcer.enforcedVersion == 5)
        let status = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_001))
        #expect(status.limits.rpm == Bucket(rate: 60, burst: 2))
        #expect(enforcer.statistics.snapshotsRejected == 1)
        #expect(enforcer.statistics.snapshotsApplied == 1)
        #expect(
            collector.events == [
                .snapshotApplied(version: 5, previous: nil),
                .snapshotRejected(version: 4, enforced: 5, reason: "version 4 is below the enforced version 5"),
            ])
    }

    @Test func leaseExpirySwitchesToFallbackAtTheExpiryInstant() throws {
        let collector = EventCollector()
        let floor = FallbackEntry(
            id: "acme", upstream: Snapshot.defaultUpstream, rpm: Bucket(rate: 6, burst: 1),
            tpm: Bucket(rate: 600, burst: 150))
        let snapshot = Snapshot.make(expiresAt: 1_300, tenants: [Self.acme], fallbackTenants: [floor])
        let enforcer = Enforcer.make(snapshot, collector: collector)
        _ = try enforcer.mustAdmit(.make(tokens: 1_000), now: 1_000)
        // Noticed late (t=1400), applied as of t=1300: TPM refilled to 1,000 by then, clamped to 150, then 10/s.
        let status = enforcer.status(now: 1_400)
        #expect(status.inFallback)
        #expect(status.version == 1)
        let tenant = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_400))
        #expect(tenant.limits.rpm == Bucket(rate: 6, burst: 1))
        #expect(tenant.tpm.level == 150)
        _ = try enforcer.mustAdmit(.make(tokens: 150), now: 1_400)
        let denial = try enforcer.mustDeny(.make(tokens: 10), now: 1_400)
        #expect(denial.fallback)
        #expect(denial.snapshotVersion == 1)
        #expect(denial.limit == .rpm)
        #expect(denial.retryAfter == 10)
        // Unlisted tenants get fallback.default.
        let unknown = try #require(
            enforcer.tenantStatus(tenant: "newco", upstream: Snapshot.defaultUpstream, now: 1_400))
        #expect(unknown.limits == .make(rpm: 3, rpmBurst: 1, tpm: 300, tpmBurst: 100))
        #expect(collector.events.last == .leaseExpired(version: 1, expiresAt: 1_300))
        #expect(enforcer.statistics.leaseExpiries == 1)
        // A newer snapshot restores a lease.
        #expect(enforcer.apply(.make(version: 2, expiresAt: 1_700, tenants: [Self.acme]), now: 1_401) == .applied)
        #expect(!enforcer.status(now: 1_401).inFallback)
    }

    @Test func anAlreadyExpiredSnapshotGoesStraightToFallback() {
        // `allot drain` publishes a snapshot whose lease has already expired.
        let collector = EventCollector()
        let enforcer = Enforcer.make(.make(tenants: [Self.acme]), collector: collector)
        #expect(enforcer.apply(.make(version: 2, expiresAt: 1_000, tenants: [Self.acme]), now: 1_010) == .applied)
        #expect(enforcer.status(now: 1_010).inFallback)
        #expect(
            collector.events.suffix(2) == [
                .snapshotApplied(version: 2, previous: 1), .leaseExpired(version: 2, expiresAt: 1_000),
            ])
    }

    @Test func beforeTheFirstSnapshotRequestsAreDeniedOrGetBootstrapLimits() throws {
        let enforcer = Enforcer.make()
        let denial = try enforcer.mustDeny(now: 1_000)
        #expect(denial.limit == .noSnapshot)
        #expect(denial.snapshotVersion == nil)
        #expect(denial.suggestedStatus == 503)
        let bootstrapped = Enforcer.make(
            configuration: GatewayConfiguration(
                gatewayID: "gw-1", bootstrapLimits: .make(rpm: 60, rpmBurst: 1, tpm: 6_000, tpmBurst: 500)))
        _ = try bootstrapped.mustAdmit(now: 1_000)
        #expect(try bootstrapped.mustDeny(now: 1_000).limit == .rpm)
    }

    @Test func denyHonoursTheBudgetReason() throws {
        let collector = EventCollector()
        let broke = TenantEntry.make(deny: "budget_exhausted")
        let enforcer = Enforcer.make(.make(refreshMs: 5_000, tenants: [broke]), collector: collector)
        let denial = try enforcer.mustDeny(.make(taskID: "t-1"), now: 1_000)
        #expect(denial.limit == .budget)
        #expect(denial.code == "budget_exhausted")
        #expect(denial.retryAfter == 5)
        #expect(
            collector.telemetry == [
                TelemetryRecord(
                    ts: 1_000, gateway: "gw-1", tenant: "acme", upstream: Snapshot.defaultUpstream,
                    outcome: .deniedLocal, queueWait: 0, estimatedTokens: 100, taskClass: .interactive,
                    taskID: "t-1", errorType: "budget_exhausted")
            ])
    }

    @Test func openCircuitShedsTheListedTaskClassesOnly() throws {
        let upstream = UpstreamEntry(
            id: Snapshot.defaultUpstream, state: "overloaded", capacity: DimensionValues(rpm: 10, tpm: 1_000),
            circuitOpen: true, shed: ["background", "batch"])
        let enforcer = Enforcer.make(.make(tenants: [Self.acme], upstreams: [upstream]))
        let denial = try enforcer.mustDeny(.make(taskClass: .batch), now: 1_000)
        #expect(denial.limit == .circuit)
        #expect(denial.code == "circuit_open")
        #expect(denial.suggestedStatus == 503)
        _ = try enforcer.mustAdmit(.make(taskClass: .interactive), now: 1_000)
        _ = try enforcer.mustAdmit(.make(upstream: "anthropic/claude", taskClass: .batch, tokens: 10), now: 1_000)
    }

    @Test func runawayTaskIsDeniedByItsTaskBudget() throws {
        let snapshot = Snapshot.make(
            tenants: [TenantEntry.make(rpm: Bucket(rate: 600, burst: 100))],
            taskBudgets: ["batch": TaskBudget(maxCalls: 3, maxTokens: 1_000)])
        let enforcer = Enforcer.make(snapshot)
        let request = AdmissionRequest.make(taskClass: .batch, tokens: 100, taskID: "loop-1")
        var tickets: [Ticket] = []
        for _ in 0..<3 { tickets.append(try enforcer.mustAdmit(request, now: 1_000)) }
        let denial = try enforcer.mustDeny(request, now: 1_000)
        #expect(denial.limit == .taskBudget)
        #expect(denial.code == "task_budget_exceeded")
        #expect(denial.retryAfter == nil)
        #expect(denial.retryAfterHeader == nil)
        #expect(denial.message.contains("3 calls"))
        // Other tasks, other tenants' tasks with the same id, and other classes are unaffected.
        _ = try enforcer.mustAdmit(.make(taskClass: .batch, tokens: 100, taskID: "loop-2"), now: 1_000)
        _ = try enforcer.mustAdmit(.make("globex", taskClass: .batch, tokens: 10, taskID: "loop-1"), now: 1_000)
        _ = try enforcer.mustAdmit(.make(taskClass: .interactive, tokens: 100, taskID: "loop-1"), now: 1_000)

        // Tokens: the reservation counts, reconciled to the actual usage on completion.
        let big = AdmissionRequest.make(taskClass: .batch, tokens: 900, taskID: "loop-3")
        let first = try enforcer.mustAdmit(big, now: 1_000)
        #expect(
            try enforcer.mustDeny(.make(taskClass: .batch, tokens: 200, taskID: "loop-3"), now: 1_000).limit
                == .taskBudget)
        enforcer.complete(first, AttemptResult(status: 200, promptTokens: 100, completionTokens: 300), now: 1_001)
        _ = try enforcer.mustAdmit(.make(taskClass: .batch, tokens: 200, taskID: "loop-3"), now: 1_001)
    }

    @Test func concurrencyCapHoldsUntilACompletionFreesAPermit() throws {
        let enforcer = Enforcer.make(.make(tenants: [TenantEntry.make(maxConcurrency: 2)]))
        let first = try enforcer.mustAdmit(now: 1_000)
        _ = try enforcer.mustAdmit(now: 1_000)
        let denial = try enforcer.mustDeny(now: 1_000)
        #expect(denial.limit == .concurrency)
        #expect(denial.code == "concurrency_limited")
        #expect(denial.retryAfter == 1)
        #expect(
            enforcer.complete(first, AttemptResult(status: 200, promptTokens: 50, completionTokens: 50), now: 1_000.1))
        #expect(!enforcer.complete(first, AttemptResult(status: 200), now: 1_000.1))  // only once
        _ = try enforcer.mustAdmit(now: 1_000.1)
        #expect(try enforcer.mustDeny(now: 1_000.1).limit == .concurrency)
    }

    @Test func shadowModeCountsWouldBeDenialsWithoutDenying() throws {
        let shadow = TenantEntry.make(rpm: Bucket(rate: 60, burst: 2), mode: "shadow", maxConcurrency: 4)
        let enforcer = Enforcer.make(.make(tenants: [shadow]))
        var tickets: [Ticket] = []
        for _ in 0..<5 { tickets.append(try enforcer.mustAdmit(now: 1_000)) }
        #expect(tickets.map(\.shadowDenial) == [nil, nil, .rpm, .rpm, .rpm])
        #expect(enforcer.statistics.shadowWouldDeny == [.rpm: 3])
        #expect(enforcer.statistics.deniedTotal == 0)
        // Would-be denials consumed nothing, as a real denial would not have: one second refills one request.
        let next = try enforcer.mustAdmit(now: 1_001)
        #expect(next.shadowDenial == nil)
        #expect(try enforcer.mustAdmit(now: 1_001).shadowDenial == .rpm)
        #expect(enforcer.statistics.shadowWouldDeny == [.rpm: 4])
        // Concurrency counts only charged requests (3 in flight): a 4th charged one fits, a 5th would not.
        enforcer.complete(tickets[0], AttemptResult(status: 200, promptTokens: 10, completionTokens: 10), now: 1_003)
        let charged = try enforcer.mustAdmit(now: 1_003)
        #expect(charged.shadowDenial == nil)
        _ = try enforcer.mustAdmit(.make(), now: 1_010)
        #expect(try enforcer.mustAdmit(.make(), now: 1_020).shadowDenial == .concurrency)
    }

    @Test func burstCreditIsUsedOnTopOfTheBucketsUntilItExpires() throws {
        let credit = BurstCredit(calls: 2, tokens: 500, expiresAt: 1_100)
        let entry = TenantEntry.make(
            rpm: Bucket(rate: 6, burst: 1), tpm: Bucket(rate: 6_000, burst: 1_000), burstCredit: credit)
        let enforcer = Enforcer.make(.make(tenants: [entry]))
        _ = try enforcer.mustAdmit(now: 1_000)  // bucket
        _ = try enforcer.mustAdmit(now: 1_000)  // credit call 1
        // The same grant in a newer snapshot keeps what was used.
        #expect(enforcer.apply(.make(version: 2, tenants: [entry]), now: 1_000) == .applied)
        let status = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_000))
        #expect(status.creditCalls == 1)
        _ = try enforcer.mustAdmit(now: 1_000)  // credit call 2
        let denial = try enforcer.mustDeny(now: 1_000)
        #expect(denial.limit == .rpm)
        #expect(denial.retryAfter == 10)
        // A new grant (another expiry) starts unused.
        let renewed = TenantEntry.make(
            rpm: Bucket(rate: 6, burst: 1), tpm: Bucket(rate: 6_000, burst: 1_000),
            burstCredit: BurstCredit(calls: 1, tokens: 500, expiresAt: 1_100.5))
        #expect(enforcer.apply(.make(version: 3, tenants: [renewed]), now: 1_000) == .applied)
        _ = try enforcer.mustAdmit(now: 1_000)
        #expect(try enforcer.mustDeny(now: 1_000).limit == .rpm)
        // After expiry the credit is gone: one request per refill only.
        let renewedAgain = TenantEntry.make(
            rpm: Bucket(rate: 6, burst: 1), tpm: Bucket(rate: 6_000, burst: 1_000),
            burstCredit: BurstCredit(calls: 5, tokens: 500, expiresAt: 1_101))
        #expect(enforcer.apply(.make(version: 4, tenants: [renewedAgain]), now: 1_000) == .applied)
        let expired = try #require(
            enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_101))
        #expect(expired.creditCalls == 0)
        #expect(expired.creditTokens == 0)
        _ = try enforcer.mustAdmit(now: 1_101)
        #expect(try enforcer.mustDeny(now: 1_101).limit == .rpm)
    }

    @Test func burstCreditCoversTokensTheBucketLacks() throws {
        let credit = BurstCredit(calls: 0, tokens: 800, expiresAt: 1_100)
        let entry = TenantEntry.make(
            rpm: Bucket(rate: 600, burst: 10), tpm: Bucket(rate: 600, burst: 300), burstCredit: credit)
        let enforcer = Enforcer.make(.make(tenants: [entry]))
        _ = try enforcer.mustAdmit(.make(tokens: 300), now: 1_000)
        let fromCredit = try enforcer.mustAdmit(.make(tokens: 600), now: 1_000)
        #expect(
            enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_000)?.creditTokens == 200)
        // Under-spend of a credit-funded reservation goes back to the credit, not the bucket.
        enforcer.complete(fromCredit, AttemptResult(status: 200, promptTokens: 100, completionTokens: 100), now: 1_000)
        let status = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_000))
        #expect(status.creditTokens == 600)
        #expect(status.tpm.level == 0)
    }

    @Test func estimateComesFromTheCallerThenTheSnapshotThenTheDefault() throws {
        let learned = TenantEntry.make(tokenEstimate: TokenEstimate(p50: 300, p95: 900))
        let enforcer = Enforcer.make(.make(tenants: [learned]))
        #expect(try enforcer.mustAdmit(.make(tokens: 42), now: 1_000).reservedTokens == 42)
        #expect(try enforcer.mustAdmit(.make(tokens: nil, promptTokens: 200), now: 1_000).reservedTokens == 500)
        #expect(try enforcer.mustAdmit(.make(tokens: nil), now: 1_000).reservedTokens == 300)
        #expect(try enforcer.mustAdmit(.make("newco", tokens: nil, promptTokens: 20), now: 1_000).reservedTokens == 520)

        let p95 = Enforcer.make(
            .make(tenants: [learned]),
            configuration: GatewayConfiguration(gatewayID: "gw-1", estimatePercentile: .p95))
        #expect(try p95.mustAdmit(.make(tokens: nil, promptTokens: 200), now: 1_000).reservedTokens == 1_100)
    }

    @Test func actualUsageIsReconciledWithTheReservation() throws {
        let entry = TenantEntry.make(rpm: Bucket(rate: 600, burst: 100), tpm: Bucket(rate: 6_000, burst: 1_000))
        // (The gateway cap's hold after a quota refusal, which would hold the request after the 429 below, is
        // GatewayCapTests'.)
        let enforcer = Enforcer.make(
            .make(tenants: [entry]), configuration: GatewayConfiguration(gatewayID: "gw-1", capHoldsAfterRefusal: false))
        func tpm(_ now: Double) -> Double? {
            enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: now)?.tpm.level
        }
        // Over-spend: reserved 400, used 1,500 → 1,100 of debt on top of the reservation.
        let over = try enforcer.mustAdmit(.make(tokens: 400), now: 1_000)
        #expect(tpm(1_000) == 600)
        enforcer.complete(over, AttemptResult(status: 200, promptTokens: 1_000, completionTokens: 500), now: 1_000)
        #expect(tpm(1_000) == -500)
        #expect(enforcer.statistics.debtTokens == 1_100)
        let denial = try enforcer.mustDeny(.make(tokens: 100), now: 1_000)
        #expect(denial.limit == .tpm)
        #expect(denial.retryAfter == 6)  // from -500 to 100 at 100/s

        // Under-spend: reserved 800, used 200 → 600 refunded (never above the burst).
        let under = try enforcer.mustAdmit(.make(tokens: 800), now: 1_020)  // bucket full again at 1,000
        #expect(tpm(1_020) == 200)
        enforcer.complete(under, AttemptResult(status: 200, promptTokens: 150, completionTokens: 50), now: 1_020)
        #expect(tpm(1_020) == 800)

        // An attempt that failed upstream (overloaded) used no tokens: its reservation is refunded.
        let failed = try enforcer.mustAdmit(.make(tokens: 300), now: 1_020)
        enforcer.complete(failed, AttemptResult(status: 503, errorType: "server_error"), now: 1_020)
        #expect(tpm(1_020) == 800)
        // A quota 429 used none either, but keeps its reservation: the provider had no room, and a refund would
        // keep this bucket full while the provider's is empty (every refill meeting another 429).
        let refused = try enforcer.mustAdmit(.make(tokens: 300), now: 1_020)
        enforcer.complete(refused, AttemptResult(status: 429, errorType: "rate_limit_exceeded"), now: 1_020)
        #expect(tpm(1_020) == 500)
        #expect(enforcer.statistics.refundedTokens == 900)  // 600 under-spent and the failed attempt's 300
        // A served attempt without usage figures keeps its reservation.
        let unknown = try enforcer.mustAdmit(.make(tokens: 300), now: 1_020)
        enforcer.complete(unknown, AttemptResult(status: 200), now: 1_020)
        #expect(tpm(1_020) == 200)
    }

    @Test func anOverloadRefusalGivesBackItsRequest() throws {
        let entry = TenantEntry.make(rpm: Bucket(rate: 60, burst: 2), tpm: Bucket(rate: 60_000, burst: 10_000))
        let configuration = GatewayConfiguration(gatewayID: "gw-1", capHoldsAfterRefusal: false)
        let enforcer = Enforcer.make(.make(tenants: [entry]), configuration: configuration)
        func rpm() -> Double? {
            enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_000)?.rpm.level
        }
        let first = try enforcer.mustAdmit(.make(tokens: 100), now: 1_000)
        let second = try enforcer.mustAdmit(.make(tokens: 100), now: 1_000)
        #expect(rpm() == 0)
        // Anthropic's 529 and a 503 spent none of the key's rate limit: the request goes back, and the retry passes.
        enforcer.complete(first, AttemptResult(status: 529, errorType: "overloaded_error"), now: 1_000)
        #expect(rpm() == 1)
        let retry = try enforcer.mustAdmit(.make(tokens: 100), now: 1_000)
        enforcer.complete(second, AttemptResult(status: 503, errorType: "server_error"), now: 1_000)
        #expect(rpm() == 1)
        let third = try enforcer.mustAdmit(.make(tokens: 100), now: 1_000)
        #expect(rpm() == 0)
        // A quota 429, a server error and a stream broken off after its 200 keep their request.
        enforcer.complete(retry, AttemptResult(status: 429, errorType: "rate_limit_error"), now: 1_000)
        enforcer.complete(third, AttemptResult(status: 500, errorType: "api_error"), now: 1_000)
        #expect(rpm() == 0)
        #expect(try enforcer.mustDeny(.make(tokens: 100), now: 1_000).limit == .rpm)
        let streamed = try enforcer.mustAdmit(.make(tokens: 100), now: 1_001)
        enforcer.complete(
            streamed, AttemptResult(status: 200, errorType: "overloaded_error", outcome: .overloaded), now: 1_001)
        #expect(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_001)?.rpm.level == 0)
    }

    @Test func releaseReturnsEverythingAndReportsNothing() throws {
        let collector = EventCollector()
        let enforcer = Enforcer.make(.make(tenants: [TenantEntry.make(maxConcurrency: 1)]), collector: collector)
        let ticket = try enforcer.mustAdmit(.make(tokens: 500), now: 1_000)
        #expect(enforcer.release(ticket, now: 1_000))
        #expect(!enforcer.release(ticket, now: 1_000))
        let status = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_000))
        #expect(status.rpm.level == 10)
        #expect(status.tpm.level == 10_000)
        #expect(status.inFlight == 0)
        #expect(collector.telemetry.isEmpty)
    }

    @Test func completionReportsTheAttemptWithRateLimitHeadersOnly() throws {
        let collector = EventCollector()
        let enforcer = Enforcer.make(.make(tenants: [Self.acme]), collector: collector)
        let ticket = try enforcer.mustAdmit(
            AdmissionRequest(
                tenant: "acme", upstream: Snapshot.defaultUpstream, taskClass: .batch, estimatedTokens: 100,
                taskID: "t-9", retry: 2), now: 1_000)
        enforcer.complete(
            ticket,
            AttemptResult(
                status: 429, latency: 0.25,
                headers: [
                    ("x-ratelimit-remaining-requests", "0"), ("Set-Cookie", "secret=1"), ("retry-after", "2"),
                    ("X-RateLimit-Reset-Tokens", "6m0s"),
                ], errorType: "rate_limit_exceeded", modelVersion: "gpt-4o-2024-08-06"),
            now: 1_000.25)
        #expect(
            collector.telemetry == [
                TelemetryRecord(
                    ts: 1_000, gateway: "gw-1", tenant: "acme", upstream: Snapshot.defaultUpstream,
                    outcome: .quotaExhausted, status: 429, latency: 0.25, queueWait: 0, estimatedTokens: 100,
                    taskClass: .batch, taskID: "t-9", modelVersion: "gpt-4o-2024-08-06", retry: 2,
                    headers: [
                        ResponseHeader(name: "x-ratelimit-remaining-requests", value: "0"),
                        ResponseHeader(name: "retry-after", value: "2"),
                        ResponseHeader(name: "X-RateLimit-Reset-Tokens", value: "6m0s"),
                    ], errorType: "rate_limit_exceeded")
            ])
    }

    @Test func idleTenantsAreForgottenWithoutChangingAnswers() throws {
        // Without borrowing and the gateway's cap, so that t3's third request meets its own bucket only
        // (IdleCapacityTests and GatewayCapTests cover those; fifty unlisted tenants at once exceed the cap).
        let enforcer = Enforcer.make(
            .make(tenants: [Self.acme]),
            configuration: GatewayConfiguration(gatewayID: "gw-1", borrowIdle: false, capWindow: 0))
        for index in 0..<50 {
            let ticket = try enforcer.mustAdmit(.make("t\(index)", tokens: 10), now: 1_000)
            enforcer.complete(ticket, AttemptResult(status: 200, promptTokens: 5, completionTokens: 5), now: 1_001)
        }
        let held = try enforcer.mustAdmit(.make(tokens: 1_000), now: 1_000)
        #expect(enforcer.status(now: 1_000).trackedTenants == 51)
        // Much later all buckets are full again: a new snapshot forgets them, except acme's, which has a request
        // in flight.
        #expect(enforcer.apply(.make(version: 2, tenants: [Self.acme]), now: 1_200) == .applied)
        #expect(enforcer.status(now: 1_200).trackedTenants == 1)
        enforcer.complete(held, AttemptResult(status: 200), now: 1_200)
        let status = try #require(enforcer.tenantStatus(tenant: "t3", upstream: Snapshot.defaultUpstream, now: 1_200))
        #expect(status.rpm.level == 2)
        _ = try enforcer.mustAdmit(.make("t3", tokens: 10), now: 1_200)
        _ = try enforcer.mustAdmit(.make("t3", tokens: 10), now: 1_200)
        #expect(try enforcer.mustDeny(.make("t3", tokens: 10), now: 1_200).limit == .rpm)
    }
}
