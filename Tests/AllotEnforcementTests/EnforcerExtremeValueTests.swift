import AllotProtocol
import Testing

@testable import AllotEnforcement

/// Numbers at the edge of what the types accept (a sliver of an allocation, an estimate or a usage near
/// `Int.max`): a denial is still answered, with its message and header, instead of trapping in a conversion.
@Suite struct EnforcerExtremeValueTests {
    static let configuration = GatewayConfiguration(gatewayID: "gw-1", borrowIdle: false)

    /// A tenant at a sliver of an allocation (10⁻³⁰⁰ RPM) waits 6·10³⁰¹ s for its next request: converting that
    /// for the `Retry-After` header trapped past Int.max.
    @Test func aSliverOfAnAllocationAdvisesARetryAfterThatFits() throws {
        let sliver = TenantEntry.make(rpm: Bucket(rate: 1e-300, burst: 1))
        let enforcer = Enforcer.make(.make(tenants: [sliver]), configuration: Self.configuration)
        _ = try enforcer.mustAdmit(now: 1_000)
        let denial = try enforcer.mustDeny(now: 1_000)
        #expect(denial.limit == .rpm)
        #expect(try #require(denial.retryAfter) > 1e300)
        #expect(denial.retryAfterHeader == "1000000000")
        // Ordinary waits are unchanged: whole seconds, rounded up, at least 1.
        func header(_ retryAfter: Double) -> String? {
            Denial(
                limit: .rpm, code: "rate_limited", message: "", retryAfter: retryAfter, snapshotVersion: 1,
                tenant: "acme", upstream: Snapshot.defaultUpstream, taskClass: .interactive
            ).retryAfterHeader
        }
        #expect(header(0.2) == "1")
        #expect(header(2.5) == "3")
        #expect(header(86_400) == "86400")
        #expect(header(-1e300) == "1")
    }

    /// An estimate of Int.max tokens (the caller's, any Int) is Double 2⁶³: the denial's message converted it
    /// back to Int and trapped.
    @Test func anEstimateNearIntMaxIsDeniedWithItsMessage() throws {
        let tenant = TenantEntry.make(tpm: Bucket(rate: 6_000, burst: 1_000))
        let enforcer = Enforcer.make(.make(tenants: [tenant]), configuration: Self.configuration)
        _ = try enforcer.mustAdmit(.make(tokens: 100), now: 1_000)
        let denial = try enforcer.mustDeny(.make(tokens: .max), now: 1_000)
        #expect(denial.limit == .tpm)
        #expect(denial.message.contains("has no room for 9.223372036854776e+18 tokens"), "\(denial.message)")
        #expect(try enforcer.mustDeny(.make(tokens: 2_000), now: 1_000).message.contains("no room for 2000 tokens"))
    }

    /// A provider reporting a usage near Int.max for a task: its tokens went past Int.max, and the task budget's
    /// message converted them to Int and trapped on the task's next request.
    @Test func aTaskWhoseUsageIsPastIntMaxIsDeniedWithItsMessage() throws {
        let snapshot = Snapshot.make(
            tenants: [TenantEntry.make(rpm: Bucket(rate: 600, burst: 100))],
            taskBudgets: ["batch": TaskBudget(maxCalls: 100, maxTokens: 1_000)])
        let enforcer = Enforcer.make(snapshot, configuration: Self.configuration)
        // Ordinary usage is written as a whole number, as before.
        let ordinary = AdmissionRequest.make(taskClass: .batch, tokens: 600, taskID: "loop-1")
        _ = try enforcer.mustAdmit(ordinary, now: 1_000)
        #expect(try enforcer.mustDeny(ordinary, now: 1_000).message.contains("has used 1 calls and 600 tokens"))
        let request = AdmissionRequest.make(taskClass: .batch, tokens: 100, taskID: "loop-2")
        let ticket = try enforcer.mustAdmit(request, now: 1_000)
        enforcer.complete(ticket, AttemptResult(status: 200, promptTokens: .max, completionTokens: 0), now: 1_001)
        let denial = try enforcer.mustDeny(request, now: 1_001)
        #expect(denial.limit == .taskBudget)
        #expect(denial.message.contains("has used 1 calls and 9.223372036854776e+18 tokens"), "\(denial.message)")
    }

    /// A provider's usage report of Int.max prompt tokens plus some completion: the sum trapped on overflow when
    /// the call completed. It saturates, and the tenant's next request is denied by its bucket, not a crash.
    @Test func aUsageReportPastIntMaxSaturates() throws {
        #expect(AttemptResult(status: 200, promptTokens: .max, completionTokens: 10).actualTokens == .max)
        #expect(AttemptResult(status: 200, promptTokens: 1_000, completionTokens: 10).actualTokens == 1_010)
        let tenant = TenantEntry.make(tpm: Bucket(rate: 6_000, burst: 1_000))
        let enforcer = Enforcer.make(.make(expiresAt: 1e10, tenants: [tenant]), configuration: Self.configuration)
        let ticket = try enforcer.mustAdmit(.make(tokens: 100), now: 1_000)
        enforcer.complete(ticket, AttemptResult(status: 200, promptTokens: .max, completionTokens: 10), now: 1_001)
        #expect(try enforcer.mustDeny(.make(tokens: 100), now: 1_001).limit == .tpm)
        // The debt stops at an hour of refill (360,000 tokens at 6,000/min): the tenant is back after the hour
        // (the bucket full again by 3,610 s), not locked out at this gateway for good (round 14).
        #expect(try enforcer.mustDeny(.make(tokens: 100), now: 1_001 + 3_590).limit == .tpm)
        _ = try enforcer.mustAdmit(.make(tokens: 100), now: 1_001 + 3_610)
    }

    /// A bucket's debt is bounded by an hour of its refill, or its burst where that is more.
    @Test func debtStopsAtAnHourOfRefill() {
        var bucket = TokenBucket(parameters: Bucket(rate: 60, burst: 10), now: 0)
        bucket.take(1e18, at: 0)
        #expect(bucket.level == -3_600)
        var slow = TokenBucket(parameters: Bucket(rate: 0.1, burst: 10), now: 0)
        slow.take(100, at: 0)
        #expect(slow.level == -10)
        var ordinary = TokenBucket(parameters: Bucket(rate: 60, burst: 10), now: 0)
        ordinary.take(500, at: 0)
        #expect(ordinary.level == -490)
    }

    /// The wall clock stepped back an hour (NTP, an operator): refill resumes from the new instant. Before, every
    /// refill waited for the clock to pass the instants recorded before the step, an hour of denials for all.
    @Test func aClockSteppedBackRebasesTheBuckets() throws {
        let tenant = TenantEntry.make(rpm: Bucket(rate: 60, burst: 1))
        // The steady clock stands still here: the step is exactly an hour.
        let enforcer = Enforcer.make(
            .make(expiresAt: 1e10, tenants: [tenant]), configuration: Self.configuration, monotonic: { 0 })
        _ = try enforcer.mustAdmit(now: 5_000)
        // One hour back: the empty bucket refills from there, one request a second.
        let denial = try enforcer.mustDeny(now: 1_400)
        #expect(denial.retryAfter == 1)
        _ = try enforcer.mustAdmit(now: 1_401)
        #expect(try enforcer.mustDeny(now: 1_401.5).limit == .rpm)
        _ = try enforcer.mustAdmit(now: 1_402)
        #expect(enforcer.statistics.clockStepsBack == 1)
        // Instants out of order by less than a second change nothing; such steps that add up to more do.
        _ = try enforcer.mustDeny(now: 1_401.9)
        #expect(enforcer.statistics.clockStepsBack == 1)
        _ = try enforcer.mustDeny(now: 1_401.2)
        #expect(enforcer.statistics.clockStepsBack == 1)
        _ = try enforcer.mustDeny(now: 1_400.6)
        #expect(enforcer.statistics.clockStepsBack == 2)
        _ = try enforcer.mustAdmit(now: 1_401.6)
    }

    /// A prompt of Int.max tokens without an estimate: prompt plus the expected completion trapped on overflow.
    @Test func aPromptOfIntMaxTokensIsEstimatedWithoutOverflow() throws {
        let tenant = TenantEntry.make(tpm: Bucket(rate: 6_000, burst: 1_000))
        let enforcer = Enforcer.make(.make(tenants: [tenant]), configuration: Self.configuration)
        // A full bucket takes one request however large (it could never fit otherwise); the next waits.
        _ = try enforcer.mustAdmit(.make(tokens: nil, promptTokens: .max), now: 1_000)
        #expect(try enforcer.mustDeny(.make(tokens: nil, promptTokens: 10), now: 1_000).limit == .tpm)
    }
}
