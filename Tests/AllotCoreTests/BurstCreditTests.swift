import Testing

@testable import AllotCore

@Suite("Burst credit lending and debt (SPEC 6.5, 6.10)")
struct BurstCreditTests {
    static let policy = BurstPolicy(
        enabled: true, maxCredit: PerDimension(.percent(10)), maxTTLSeconds: 600, repayWithinSeconds: 300,
        defaultCooldownSeconds: 3600)

    static func request(calls: Double = 120, tokens: Double = 60_000, ttl: Double = 120) -> BurstRequest {
        BurstRequest(
            id: "b1", tenant: "acme", upstream: "p/m", calls: calls, tokens: tokens, ttlSeconds: ttl,
            taskID: "task-7", requestedAt: 1000)
    }

    @Test func lendingConvertsTheRequestToARateWithinReserveAndTierLimit() throws {
        let (credit, partial) = try #require(
            BurstAccount.lend(
                Self.request(), available: PerDimension(rpm: 500, tpm: 100_000),
                capacity: PerDimension(rpm: 1000, tpm: 1_000_000), now: 1000, policy: Self.policy))
        // 120 calls and 60,000 tokens over 2 minutes.
        #expect(credit.rate == PerDimension(rpm: 60, tpm: 30_000))
        #expect(!partial)
        #expect(credit.expiresAt == 1120)
        #expect(credit.taskID == "task-7")
        #expect(credit.remaining(at: 1060) == (60, 30_000))  // one minute left

        // The tier's max_credit (10 % of 500 = 50 rpm) and the reserve (20,000 tpm) limit it.
        let (limited, wasPartial) = try #require(
            BurstAccount.lend(
                Self.request(), available: PerDimension(rpm: 500, tpm: 20_000),
                capacity: PerDimension(rpm: 500, tpm: 1_000_000), now: 1000, policy: Self.policy))
        #expect(limited.rate == PerDimension(rpm: 50, tpm: 20_000))
        #expect(wasPartial)

        #expect(
            BurstAccount.lend(
                Self.request(), available: PerDimension(rpm: 500, tpm: 0),
                capacity: PerDimension(1000), now: 1000, policy: Self.policy) == nil)
        #expect(
            BurstAccount.lend(
                Self.request(ttl: 0), available: PerDimension(500), capacity: PerDimension(1000),
                now: 1000, policy: Self.policy) == nil)
    }

    @Test func eligibilityFollowsTheRepaymentRecord() {
        var account = BurstAccount()
        #expect(account.refusal(tenantClass: .bursting, suspect: false, now: 0, policy: Self.policy) == nil)
        #expect(account.refusal(tenantClass: .bursting, suspect: true, now: 0, policy: Self.policy) == .suspect)
        #expect(
            account.refusal(tenantClass: .sustainedOver, suspect: false, now: 0, policy: Self.policy) == .sustainedOver)
        var disabled = Self.policy
        disabled.enabled = false
        #expect(account.refusal(tenantClass: .steady, suspect: false, now: 0, policy: disabled) == .disabled)
        account.debt.tpm = 5
        #expect(account.refusal(tenantClass: .steady, suspect: false, now: 0, policy: Self.policy) == .debtOutstanding)
        account.debt = PerDimension(0)
        account.lastDefaultAt = 100
        #expect(account.refusal(tenantClass: .steady, suspect: false, now: 3699, policy: Self.policy) == .recentDefault)
        #expect(account.refusal(tenantClass: .steady, suspect: false, now: 3700, policy: Self.policy) == nil)
    }

    @Test func borrowingBecomesDebtThatUnusedAllocationRepays() {
        var account = BurstAccount()
        account.credit = BurstCredit(
            id: "b1", tenant: "acme", upstream: "p/m", taskID: nil,
            rate: PerDimension(rpm: 60, tpm: 30_000), grantedAt: 1000, expiresAt: 1120)
        account.lent = 1
        let allocation = PerDimension<Double>(rpm: 100, tpm: 50_000)
        // One minute serving 150 rpm / 90,000 tpm: borrowed min(50, 60) calls and min(40,000, 30,000) tokens.
        account.account(
            allocation: allocation, served: PerDimension(rpm: 150, tpm: 90_000), minutes: 1, now: 1060,
            policy: Self.policy)
        #expect(account.debt == PerDimension(rpm: 50, tpm: 30_000))
        #expect(account.credit != nil)
        // The credit ends with debt: repayment is due within 300 s.
        account.account(allocation: allocation, served: allocation, minutes: 1, now: 1120, policy: Self.policy)
        #expect(account.credit == nil)
        #expect(account.repayBy == 1420)
        #expect(account.inDebt)
        // Serving 60 rpm / 20,000 tpm leaves 40 and 30,000 unused per minute.
        account.account(
            allocation: allocation, served: PerDimension(rpm: 60, tpm: 20_000), minutes: 1, now: 1180,
            policy: Self.policy)
        #expect(account.debt == PerDimension(rpm: 10, tpm: 0))
        account.account(
            allocation: allocation, served: PerDimension(rpm: 60, tpm: 20_000), minutes: 1, now: 1240,
            policy: Self.policy)
        #expect(!account.inDebt)
        #expect(account.repaid == 1)
        #expect(account.defaulted == 0)
    }

    @Test func debtNotRepaidInTimeDefaults() {
        var account = BurstAccount()
        account.debt = PerDimension(rpm: 0, tpm: 100_000)
        account.repayBy = 1300
        let allocation = PerDimension<Double>(rpm: 10, tpm: 1000)
        account.account(allocation: allocation, served: allocation, minutes: 1, now: 1299, policy: Self.policy)
        #expect(account.inDebt)
        account.account(allocation: allocation, served: allocation, minutes: 1, now: 1300, policy: Self.policy)
        #expect(!account.inDebt)
        #expect(account.defaulted == 1)
        #expect(account.lastDefaultAt == 1300)
        #expect(account.refusal(tenantClass: .steady, suspect: false, now: 2000, policy: Self.policy) == .recentDefault)
    }

    @Test func anUnusedCreditIsRepaidAtOnce() {
        var account = BurstAccount()
        account.credit = BurstCredit(
            id: "b1", tenant: "acme", upstream: "p/m", taskID: nil,
            rate: PerDimension(rpm: 60, tpm: 30_000), grantedAt: 0, expiresAt: 60)
        account.account(
            allocation: PerDimension(100), served: PerDimension(50), minutes: 1, now: 60, policy: Self.policy)
        #expect(account.credit == nil)
        #expect(!account.inDebt)
        #expect(account.repaid == 1)
    }
}
