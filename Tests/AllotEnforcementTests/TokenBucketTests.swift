import AllotProtocol
import Testing

@testable import AllotEnforcement

@Suite struct TokenBucketTests {
    /// 60 per minute = 1 per second; burst 10.
    let perSecond = Bucket(rate: 60, burst: 10)

    @Test func startsFullAndRefillsAtRatePerMinute() {
        var bucket = TokenBucket(parameters: perSecond, now: 100)
        #expect(bucket.level(at: 100) == 10)
        bucket.take(7, at: 100)
        #expect(bucket.level == 3)
        #expect(bucket.level(at: 102.5) == 5.5)
        #expect(bucket.level(at: 106) == 9)
        #expect(bucket.level(at: 200) == 10)  // capped at the burst
    }

    @Test func levelGoesNegativeAsDebtAndIsRepaidByRefill() {
        var bucket = TokenBucket(parameters: perSecond, now: 0)
        bucket.take(25, at: 0)
        #expect(bucket.level == -15)
        #expect(!bucket.admits(1, at: 15))  // level 0 at t=15
        #expect(bucket.admits(1, at: 16))
        #expect(bucket.delay(until: 1, at: 0) == 16)
    }

    @Test func refundNeverExceedsBurst() {
        var bucket = TokenBucket(parameters: perSecond, now: 0)
        bucket.take(4, at: 0)
        bucket.refund(100, at: 1)
        #expect(bucket.level == 10)
        bucket.take(10, at: 1)
        bucket.refund(3, at: 1)
        #expect(bucket.level == 3)
    }

    @Test func requestLargerThanBurstNeedsAFullBucketAndLeavesDebt() {
        var bucket = TokenBucket(parameters: Bucket(rate: 600, burst: 100), now: 0)
        #expect(bucket.threshold(for: 250) == 100)
        #expect(bucket.admits(250, at: 0))
        bucket.take(250, at: 0)
        #expect(bucket.level == -150)
        // 250 tokens at 10/s until full again.
        #expect(bucket.delay(until: 250, at: 0) == 25)
    }

    @Test func fractionalSliceAdmitsAtItsLongRunRate() {
        // A gateway's slice of 2 RPM spread over several gateways: burst below one request.
        var bucket = TokenBucket(parameters: Bucket(rate: 2, burst: 0.4), now: 0)
        var admitted = 0
        var now = 0.0
        while now < 600 {
            if bucket.admits(1, at: now) {
                bucket.take(1, at: now)
                admitted += 1
            }
            now += 0.5
        }
        // 10 minutes at 2/min = 20, plus the initial 0.4 head start.
        #expect(admitted == 20)
    }

    @Test func zeroAllocationAdmitsNothing() {
        let bucket = TokenBucket(parameters: Bucket(rate: 0, burst: 0), now: 0)
        #expect(bucket.isClosed)
        #expect(!bucket.admits(0, at: 1_000))
        #expect(!bucket.admits(1, at: 1_000))
        #expect(bucket.delay(until: 1, at: 0) == nil)
    }

    @Test func rateZeroWithBurstIsAFixedAllowance() {
        var bucket = TokenBucket(parameters: Bucket(rate: 0, burst: 2), now: 0)
        bucket.take(2, at: 0)
        #expect(bucket.level(at: 10_000) == 0)
        #expect(bucket.delay(until: 1, at: 0) == nil)
    }

    @Test func timeRunningBackwardsChangesNothing() {
        var bucket = TokenBucket(parameters: perSecond, now: 100)
        bucket.take(5, at: 100)
        bucket.advance(to: 50)
        #expect(bucket.level == 5)
        #expect(bucket.updatedAt == 100)
        #expect(bucket.level(at: 90) == 5)
        bucket.take(1, at: 90)
        #expect(bucket.level == 4)
        #expect(bucket.level(at: 101) == 5)
    }

    @Test func hostileParametersCloseTheBucket() {
        let bucket = TokenBucket(parameters: Bucket(rate: -.infinity, burst: .nan), now: 0)
        #expect(bucket.parameters == Bucket(rate: 0, burst: 0))
        #expect(!bucket.admits(1, at: 1))
        let huge = TokenBucket(parameters: Bucket(rate: .infinity, burst: 5), now: 0)
        #expect(huge.parameters == Bucket(rate: 0, burst: 5))
    }

    @Test func retuneDownClampsWithoutRefill() {
        var bucket = TokenBucket(parameters: perSecond, now: 0)
        bucket.take(2, at: 0)  // 8 left
        bucket.retune(to: Bucket(rate: 6, burst: 4), at: 0)
        #expect(bucket.level == 4)
        #expect(bucket.level(at: 10) == 4)  // full at the new burst
        bucket.take(4, at: 10)
        #expect(bucket.level(at: 20) == 1)  // 0.1 per second
    }

    @Test func retuneUpKeepsTheLevel() {
        var bucket = TokenBucket(parameters: perSecond, now: 0)
        bucket.take(8, at: 0)  // 2 left
        bucket.retune(to: Bucket(rate: 600, burst: 100), at: 0)
        #expect(bucket.level == 2)  // not 100: a swap never refills
        #expect(bucket.level(at: 1) == 12)  // then 10 per second
    }

    @Test func retuneAccruesAtTheOldRateUpToTheSwapInstant() {
        var bucket = TokenBucket(parameters: perSecond, now: 0)
        bucket.take(10, at: 0)
        bucket.retune(to: Bucket(rate: 600, burst: 100), at: 3)  // 3 tokens at the old rate
        #expect(bucket.level == 3)
        #expect(bucket.updatedAt == 3)
        #expect(bucket.level(at: 4) == 13)
    }

    @Test func retuneKeepsDebt() {
        var bucket = TokenBucket(parameters: perSecond, now: 0)
        bucket.take(30, at: 0)
        bucket.retune(to: Bucket(rate: 6_000, burst: 1_000), at: 0)
        #expect(bucket.level == -20)
    }
}
