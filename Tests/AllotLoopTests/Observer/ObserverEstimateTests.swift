import AllotCore
import AllotSignals
import AllotStore
import Testing

@testable import AllotLoop

@Suite("Capacity Observer: estimates (SPEC 4)")
struct ObserverEstimateTests {
    typealias F = ObserverFixtures
    let t0 = ObserverFixtures.t0

    @Test func startsFromOpenAIHeaderLimits() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        let event = script.event(
            at: t0 - 1, latencyMs: 200, prompt: 100, completion: 20,
            signals: F.openAI(limitRequests: 500, remainingRequests: 499, limitTokens: 30_000, resetMs: 120))
        let report = estimation.observe(script.delta([event]), now: t0)
        let status = try #require(F.status(report))
        #expect(status.headerLimit == PerDimension(rpm: 500, tpm: 30_000))
        #expect(status.estimate == PerDimension(rpm: 500, tpm: 30_000))
        #expect(status.declared == PerDimension(nil))
        #expect(status.confidence == 1)
        #expect(status.state == .healthy)
        #expect(report.pools == [PoolObservation(upstream: F.pool, capacity: PerDimension(rpm: 500, tpm: 30_000))])
    }

    @Test func startsFromAnthropicHeaderLimits() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        let split = script.event(
            at: t0 - 2, upstream: "anthropic/claude",
            signals: EventSignals(
                family: .anthropic, limitRequests: 50, remainingRequests: 49, resetRequestsMs: 1200,
                limitInputTokens: 40_000, remainingInputTokens: 39_000, limitOutputTokens: 8_000,
                remainingOutputTokens: 7_900))
        var report = estimation.observe(script.delta([split]), now: t0)
        // Input and output limits add up to the combined TPM the observer allocates.
        #expect(F.status(report, "anthropic/claude")?.estimate == PerDimension(rpm: 50, tpm: 48_000))

        let combined = (1...2).map { second in
            script.event(
                at: t0 + Double(second), upstream: "anthropic/claude",
                signals: EventSignals(
                    family: .anthropic, limitRequests: 50, limitTokens: 80_000, limitInputTokens: 40_000))
        }
        report = estimation.observe(script.delta(combined), now: t0 + 5)
        // The provider raised the combined limit (the median of the statements: two of three say 80,000)
        // and no quota decrease happened: the estimate follows.
        #expect(F.status(report, "anthropic/claude")?.estimate == PerDimension(rpm: 50, tpm: 80_000))
    }

    @Test func jitteringHeaderLimitsGiveTheirMedianAndARealChangeWinsByMajority() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        // A proxy's noise: the stated limit jitters around 900 RPM.
        let noisy: [Int64] = [900, 1_170, 630, 990, 810, 1_080, 720]
        let events = noisy.enumerated().map { index, limit in
            script.event(
                at: t0 - 10 + Double(index), latencyMs: 200, prompt: 100, completion: 20,
                signals: F.openAI(limitRequests: limit, remainingRequests: limit - 1, limitTokens: 90_000, resetMs: 120)
            )
        }
        var report = estimation.observe(script.delta(events), now: t0)
        #expect(F.status(report)?.headerLimit.rpm == 900)
        #expect(F.status(report)?.estimate.rpm == 900)
        // The provider halves the limit: once most remembered statements say so, the estimate follows.
        let halved = (0..<8).map { index in
            script.event(
                at: t0 + 1 + Double(index), latencyMs: 200, prompt: 100, completion: 20,
                signals: F.openAI(limitRequests: 450, remainingRequests: 449, limitTokens: 90_000, resetMs: 120))
        }
        report = estimation.observe(script.delta(halved), now: t0 + 10)
        #expect(F.status(report)?.headerLimit.rpm == 450)
        #expect(F.status(report)?.estimate.rpm == 450)
    }

    @Test func refusalsThatComeWithALowerStatedLimitBelongToIt() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        let stated = (0..<8).map { index in
            script.event(at: t0 - 10 + Double(index), signals: F.openAI(limitRequests: 1200, remainingRequests: 1000))
        }
        var report = estimation.observe(script.delta(stated), now: t0)
        #expect(F.status(report)?.estimate.rpm == 1200)
        // The provider drops to 700 and, before our allocations follow (a slow tick), refuses some of what we
        // send: the refusals belong to the drop the statement already told, and cut no further.
        let dropped = (0..<12).map { index in
            index % 3 == 2
                ? script.event(
                    at: t0 + 1 + Double(index), outcome: .quotaExhausted, status: 429,
                    signals: F.openAI(limitRequests: 700, remainingRequests: 0, resetMs: 2_000))
                : script.event(at: t0 + 1 + Double(index), signals: F.openAI(limitRequests: 700, remainingRequests: 5))
        }
        report = estimation.observe(script.delta(dropped), now: t0 + 13)
        let status = try #require(F.status(report))
        #expect(status.headerLimit.rpm == 700)
        #expect(status.estimate.rpm == 700)
        #expect(status.state == .throttled)
    }

    /// An Observer fed, every 5 s, `count` statements of limits `center · (1 + wobble)`: with `random`, a
    /// wobble drawn uniformly in ±30 % by a fixed generator (sampling noise: the median of 61 moves by ±4 %
    /// from tick to tick); otherwise (61 statements) every step of ±30 % once (the median is `center`
    /// exactly). Delivered in a shuffled order, as gateways' batches arrive.
    private struct StatementTicks {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        var now = ObserverFixtures.t0
        /// The median of the last tick's own statements.
        var lastMedian = 0.0

        mutating func tick(center: Double, seed: Int, random: Bool, count: Int = 61) throws -> UpstreamStatus {
            now += 5
            var state = UInt64(seed) &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            func unit() -> Double {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return Double(state >> 11) / Double(1 << 53)
            }
            var limits: [Double] = []
            let events = (0..<count).map { index in
                let wobble = random ? unit() * 0.6 - 0.3 : Double((index * 37 + seed * 11) % 61) / 60 * 0.6 - 0.3
                let limit = Int64((center * (1 + wobble)).rounded())
                limits.append(Double(limit))
                return script.event(
                    at: now - 5 + Double(index) * 5 / Double(count), latencyMs: 200, prompt: 100, completion: 20,
                    signals: F.openAI(limitRequests: limit, remainingRequests: limit - 1, resetMs: 120))
            }
            lastMedian = PoolTrack.median(limits)!
            let shuffled = events.enumerated().sorted { ($0.offset * 29) % count < ($1.offset * 29) % count }
            return try #require(F.status(estimation.observe(script.delta(shuffled.map(\.element)), now: now)))
        }
    }

    /// `count` statements of `limit` rpm, one every `spacing` seconds from `start`.
    private static func statements(
        _ script: inout TelemetryScript, limit: Int64, count: Int, start: Double, spacing: Double = 10
    ) -> [StoredEvent] {
        (0..<count).map { index in
            script.event(
                at: start + Double(index) * spacing, latencyMs: 200, prompt: 100, completion: 20,
                signals: F.openAI(
                    limitRequests: limit, remainingRequests: limit - 1, limitTokens: 90_000, resetMs: 120))
        }
    }

    @Test func aQuietPoolFollowsAChangeOfLimitThatCleanStatementsAgreeOnWithinThree() throws {
        // A pool cut to 9 rpm answers a statement every ten seconds or so: 80 of them say 9.
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        var now = t0
        func observe(_ limit: Int64, count: Int, over seconds: Double) -> ObserverReport {
            let spacing = seconds / Double(count)
            let events = Self.statements(&script, limit: limit, count: count, start: now, spacing: spacing)
            now += seconds
            return estimation.observe(script.delta(events), now: now)
        }
        var report = observe(9, count: 80, over: 800)
        #expect(F.status(report)?.headerLimit.rpm == 9)
        // The provider states 900 again. Two statements are not yet a change; the third is, though the newest
        // 61 statements' median (what decided before) still says 9.
        report = observe(900, count: 2, over: 20)
        #expect(F.status(report)?.headerLimit.rpm == 9)
        report = observe(900, count: 1, over: 10)
        #expect(F.status(report)?.headerLimit.rpm == 900)
        #expect(F.status(report)?.estimate.rpm == 900)
        // And down again: three clean statements of 9 after the 900s.
        _ = observe(900, count: 60, over: 600)
        report = observe(9, count: 3, over: 30)
        #expect(F.status(report)?.headerLimit.rpm == 9)
        #expect(F.status(report)?.estimate.rpm == 9)
    }

    @Test func aFewStatementsBeyondTheJitterOfTheOlderOnesAreNotAChange() throws {
        // ±30 % jitter around 900, then a run of statements 40 % up: within what three such statements can
        // show by chance (the older ones' spread), and short of the newest 61's majority.
        var ticks = StatementTicks()
        for seed in 0..<4 { _ = try ticks.tick(center: 900, seed: seed, random: true) }
        var script = ticks.script
        var estimation = ticks.estimation
        let high = Self.statements(&script, limit: 1_260, count: 9, start: ticks.now, spacing: 0.5)
        let report = estimation.observe(script.delta(high), now: ticks.now + 5)
        let stated = try #require(F.status(report)?.headerLimit.rpm)
        #expect(abs(stated - 900) < 900 * 0.05)
        // The same nine statements after clean ones are a change.
        var clean = CapacityEstimation(policy: F.policy())
        var cleanScript = TelemetryScript()
        let history = Self.statements(&cleanScript, limit: 900, count: 240, start: t0, spacing: 1)
        _ = clean.observe(cleanScript.delta(history), now: t0 + 240)
        let moved = clean.observe(
            cleanScript.delta(Self.statements(&cleanScript, limit: 1_260, count: 9, start: t0 + 240, spacing: 0.5)),
            now: t0 + 245)
        #expect(F.status(moved)?.headerLimit.rpm == 1_260)
    }

    @Test func headersThatJitterDoNotMoveTheEstimate() throws {
        var ticks = StatementTicks()
        var shortMedians: [Double] = []
        var estimates: [Double] = []
        for seed in 0..<60 {
            let status = try ticks.tick(center: 900, seed: seed, random: true)
            shortMedians.append(ticks.lastMedian)
            estimates.append(try #require(status.estimate.rpm))
            if seed > 0 { #expect(abs(try #require(status.headerLimit.rpm) - 900) < 900 * 0.03, "tick \(seed)") }
        }
        // The first tick starts from its own 61 statements (871); once ten ticks' statements have confirmed a
        // different median, the estimate moves to it (904), and then stays there for the remaining four
        // minutes, though the median of a tick's own statements wandered by far more than its tolerance.
        #expect(Array(estimates[..<10]) == Array(repeating: 871, count: 10))
        #expect(Array(estimates[10...]) == Array(repeating: 904, count: 50))
        #expect(shortMedians.min()! < 860 && shortMedians.max()! > 940)
    }

    @Test func onceTheMedianRestsOnAFullMemoryItsWanderDoesNotMoveTheEstimate() throws {
        // Half an hour of ±30 % jitter around 900, 61 statements a tick. The median of the newest 601 wanders by
        // about 1.2 % (one standard error); against a start value that is itself such a median, a move counts
        // only beyond √2 times one median's tolerance (that of a difference of two). With one median's
        // tolerance it moved 13 times after the first tick, between 874 and 939; now 5 times, between 874 and 915.
        var ticks = StatementTicks()
        var moves: [Int: Double] = [:]
        var last = 0.0
        for seed in 0..<360 {
            let estimate = try #require(try ticks.tick(center: 900, seed: seed, random: true).estimate.rpm)
            if estimate != last { moves[seed] = estimate }
            last = estimate
        }
        #expect(moves == [0: 871, 10: 904, 230: 874, 240: 914, 344: 883, 358: 915])
    }

    @Test func aHeaderMedianThatMovesIsFollowedOnceItPersistsAndAtOnceWhenItMovesFar() throws {
        var ticks = StatementTicks()
        let first = try ticks.tick(center: 900, seed: 0, random: false)
        #expect(first.headerLimit.rpm == 900)
        #expect(first.estimate.rpm == 900)
        // 5 % higher: the median of all the statements remembered moves more slowly than that, and the move
        // is followed once it has stayed beyond the median's tolerance for three ticks (to 936, where the
        // median then stood; 945 is within its tolerance of that).
        var estimates: [Double] = []
        for seed in 1...8 {
            estimates.append(try #require(try ticks.tick(center: 945, seed: seed, random: false).estimate.rpm))
        }
        #expect(estimates == [900, 900, 900, 900, 936, 936, 936, 936])
        // Halved: the newest statements are far from the remembered median: followed at once.
        let halved = try ticks.tick(center: 472, seed: 9, random: false)
        #expect(halved.headerLimit.rpm == 472)
        #expect(halved.estimate.rpm == 472)
    }

    @Test func aLimitCutByAsMuchAsTheJitterIsFollowedOnceItsStatementsFillTheShortMemory() throws {
        // A quiet pool: 12 statements a tick (144 a minute).
        var ticks = StatementTicks()
        for seed in 0..<10 { _ = try ticks.tick(center: 900, seed: seed, random: true, count: 12) }
        // 900 → 630 under ±30 % jitter, 50 s after the first statement. The newest 61 statements' median is
        // compared with the older ones': against the median of all of them, a mixture that moves with them,
        // 810 was held two ticks longer.
        var estimates: [Double] = []
        for seed in 10..<18 {
            let status = try ticks.tick(center: 630, seed: seed, random: true, count: 12)
            estimates.append(try #require(status.estimate.rpm))
        }
        #expect(estimates == [903.5, 903.5, 903.5, 810, 810, 611, 611, 611])
    }

    @Test func headerWindowsNormaliseToPerMinute() throws {
        var script = TelemetryScript()
        var policy = F.policy()
        policy.setUpstream(
            UpstreamPolicy(
                id: "free/model", capacity: PerDimension(nil),
                headerWindow: PerDimension(rpm: .day, tpm: .minute)))
        var estimation = CapacityEstimation(policy: policy)
        let daily = script.event(
            at: t0 - 1, upstream: "free/model",
            signals: EventSignals(family: .openai, limitRequests: 14_400, limitTokens: 6_000))
        // Google states the window itself (`…PerDay`), whatever the pool says.
        let google = script.event(
            at: t0 - 1, upstream: "google/gemini", outcome: .quotaExhausted, status: 429,
            signals: EventSignals(family: .google, limitRequests: 1_440, windowRequestsMs: 86_400_000))
        let report = estimation.observe(script.delta([daily, google]), now: t0)
        #expect(F.status(report, "free/model")?.headerLimit == PerDimension(rpm: 10, tpm: 6_000))
        #expect(F.status(report, "google/gemini")?.headerLimit == PerDimension(rpm: 1, tpm: nil))
    }

    @Test func startsFromDeclaredCapacityWithoutHeaders() throws {
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 200_000))
        let report = estimation.observe(TelemetryScript().delta([]), now: t0)
        let status = try #require(F.status(report))
        #expect(status.estimate == PerDimension(rpm: 1000, tpm: 200_000))
        #expect(status.declared == PerDimension(rpm: 1000, tpm: 200_000))
        #expect(status.confidence == 0.6)
        #expect(status.served == PerDimension(0))
    }

    /// Twelve 5 s slices of traffic ending at `t0`: 60 served per slice for 40 s, then four slices of 25
    /// served and 10 bare 429s each (at `t0` the newest has not settled: three measure the storm).
    static func storm(_ script: inout TelemetryScript, t0: Double) -> [StoredEvent] {
        var events: [StoredEvent] = []
        for slice in 0..<12 {
            let start = t0 - 60 + Double(slice) * 5
            let throttled = slice >= 8
            events += script.spread(throttled ? 35 : 60, from: start, to: start + 5) { script, at in
                let index = Int(((at - start) * 7).rounded())
                return throttled && index % 7 >= 5
                    ? script.event(at: at, outcome: .quotaExhausted, status: 429, errorType: "rate_limit_exceeded")
                    : script.event(at: at, latencyMs: 300)
            }
        }
        return events
    }

    @Test func quotaStormDropsTheEstimateToWhatWasServed() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        let events = Self.storm(&script, t0: t0)
        #expect(events.filter { $0.outcome == .quotaExhausted }.count == 40)
        var report = estimation.observe(script.delta(events), now: t0)
        var status = try #require(F.status(report))
        // 75 served in the three settled throttled slices (15 s) → 300 per minute; min(0.95 × 1000, 300).
        #expect(status.estimate.rpm == 300)
        #expect(report.pools.first?.capacity.rpm == 300)
        #expect(status.state == .throttled)
        #expect(status.served.rpm == 580)  // (8 × 60 + 4 × 25) over the minute
        #expect(status.outcomes == ["ok": 580, "quota_exhausted": 40])
        #expect(status.confidence == 0.6 * 0.75)
        #expect(status.signals.contains { $0.contains("rpm estimate 1000 → 300 (served 300 while throttled)") })
        #expect(F.alerts(report, kind: "upstream_throttled").map(\.since) == [t0])
        #expect(
            F.alerts(report, kind: "upstream_throttled").map(\.message) == [
                "openai/gpt-4o answers 429 (quota exhausted): 40 of 620 attempts in the last 60 s; the capacity "
                    + "estimate follows (GET /v1/upstreams)"
            ])

        // 429s within the hold (10 s) belong to requests admitted under the old allocation.
        let inHold = script.spread(21, from: t0, to: t0 + 5) { script, at in
            at == t0 ? script.event(at: at + 2, outcome: .quotaExhausted) : script.event(at: at)
        }
        report = estimation.observe(script.delta(inHold), now: t0 + 5)
        status = try #require(F.status(report))
        #expect(status.estimate.rpm == 300)

        // A 429 after the hold cuts again: the settled throttled slices now hold 4 × 25 + 20 served in 25 s
        // (the newest, with the 429 at t0 + 12, is not settled: its successes may still be on their way).
        let after = script.spread(21, from: t0 + 10, to: t0 + 15) { script, at in
            at == t0 + 10 ? script.event(at: at + 2, outcome: .quotaExhausted) : script.event(at: at)
        }
        report = estimation.observe(script.delta(after), now: t0 + 15)
        status = try #require(F.status(report))
        // Typed apart: inside #expect the literals' overloads took the type checker past its limit on a busy machine.
        let expected: Double = min(0.95 * 300, 120.0 / 25 * 60)
        #expect(status.estimate.rpm == expected)
        #expect(status.estimate.rpm == 285)
    }

    /// The count of answers with headers joins the observer's checkpoint; one written before it restores without.
    @Test func statedAnswersRoundTripAndOlderCheckpointsDecodeWithout() throws {
        var slice = CountSlice()
        slice.reset(index: 42)
        slice.quotaUnattributed = 3
        slice.statedAnswers = 2
        let restored = try StateCodec.decode(CountSlice.self, from: StateCodec.encode(slice), component: "observer")
        #expect(restored == slice)
        #expect(restored.statedAnswers == 2)

        struct Before: Codable {
            var index: Int64 = 42
            var outcomes = SIMD8<Int32>(1, 2, 0, 0, 0, 0, 0, 0)
            var servedRequests = 1.0
            var servedTokens = 1_900.0
            var quotaRPM: Int32 = 0
            var quotaTPM: Int32 = 0
            var quotaUnattributed: Int32 = 2
            var unparseableHeaders: Int32 = 0
            var latency = LatencyCounts()
        }
        let old = try StateCodec.decode(CountSlice.self, from: StateCodec.encode(Before()), component: "observer")
        #expect(old.index == 42)
        #expect(old.outcomes == SIMD8<Int32>(1, 2, 0, 0, 0, 0, 0, 0))
        #expect(old.servedTokens == 1_900)
        #expect(old.quotaUnattributed == 2)
        #expect(old.statedAnswers == 0)
    }

    @Test func aFreshSliceIsNotReadAsACollapse() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        // 80 served per 5 s (960 per minute) for 55 s; in the newest slice a burst met the provider's limit:
        // 5 refusals already reported, but only 10 of its successes (the rest are still answering, 2 s each).
        var events = script.spread(880, from: t0 - 60, to: t0 - 5) { script, at in script.event(at: at, latencyMs: 2000)
        }
        events += script.spread(15, from: t0 - 5, to: t0) { script, at in
            let index = Int(((at - (t0 - 5)) * 3).rounded())
            return index % 3 == 2
                ? script.event(at: at, outcome: .quotaExhausted, status: 429, errorType: "rate_limit_exceeded")
                : script.event(at: at, latencyMs: 2000)
        }
        var report = estimation.observe(script.delta(events), now: t0)
        var status = try #require(F.status(report))
        // The throttled slice has not settled (it ended less than the p95 latency ago): decrease_factor alone,
        // not the 120 per minute it shows so far.
        #expect(status.estimate.rpm == 950)
        #expect(status.signals.contains("quota exhausted: rpm estimate 1000 → 950"))

        // Its other successes arrive and the slice settles: one throttled slice is the edge of a burst, not a
        // measurement of a lower limit (that takes three), and the hold attributes nothing more: 950 stays.
        events = script.spread(65, from: t0 - 5, to: t0) { script, at in script.event(at: at, latencyMs: 2000) }
        report = estimation.observe(script.delta(events), now: t0 + 5)
        status = try #require(F.status(report))
        #expect(status.estimate.rpm == 950)
    }

    /// 60 served per 5 s for 50 s, then a slice where the provider refuses `refused` of 40 attempts: 40 − refused
    /// served. Without headers unless `limit` is given, then on one served answer in `statedEvery`.
    static func heavyRefusals(
        _ script: inout TelemetryScript, t0: Double, refused: Int, limit: Int64? = nil, statedEvery: Int = 1
    ) -> [StoredEvent] {
        let signals = limit.map { F.openAI(limitRequests: $0) } ?? EventSignals()
        var served = 0
        func answer(_ script: inout TelemetryScript, _ at: Double) -> StoredEvent {
            served += 1
            return script.event(at: at, latencyMs: 300, signals: served % statedEvery == 0 ? signals : EventSignals())
        }
        var events = script.spread(600, from: t0 - 60, to: t0 - 10) { script, at in answer(&script, at) }
        events += script.spread(40, from: t0 - 10, to: t0 - 5) { script, at in
            let index = Int(((at - (t0 - 10)) * 8).rounded())
            return index < refused
                ? script.event(at: at, outcome: .quotaExhausted, status: 429, errorType: "rate_limit_exceeded")
                : answer(&script, at)
        }
        return events
    }

    @Test func aProviderRefusingAQuarterOrMoreWithoutHeadersIsMeasuredAtOnce() throws {
        // No headers (Google states no limit): 20 of 40 refused in one settled slice — a limit halved under our
        // rate, not the edge of a burst. The served rate there (20 per 5 s) is the estimate at once.
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        var report = estimation.observe(script.delta { Self.heavyRefusals(&$0, t0: t0, refused: 20) }, now: t0)
        #expect(F.status(report)?.estimate.rpm == 240)
        // A few refusals (4 of 40) in one slice are the edge of a burst: the multiplicative decrease alone.
        script = TelemetryScript()
        estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        report = estimation.observe(script.delta { Self.heavyRefusals(&$0, t0: t0, refused: 4) }, now: t0)
        #expect(F.status(report)?.estimate.rpm == 950)
        // A provider that states its limit is believed first: refusals right after it are requests admitted
        // under the old one, and one slice does not measure it.
        script = TelemetryScript()
        estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        report = estimation.observe(
            script.delta { Self.heavyRefusals(&$0, t0: t0, refused: 20, limit: 1000) }, now: t0)
        #expect(F.status(report)?.estimate.rpm == 950)
        // One that states it on one answer in twenty, the refusals bare, is all but blind (round 44's `s24`): the
        // heavy slice measures the limit at once.
        script = TelemetryScript()
        estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        report = estimation.observe(
            script.delta { Self.heavyRefusals(&$0, t0: t0, refused: 20, limit: 1000, statedEvery: 20) }, now: t0)
        #expect(F.status(report)?.headerLimit.rpm == 1000)
        #expect(F.status(report)?.estimate.rpm == 240)
    }

    @Test func oneRefusalOfAQuietPoolIsNotAMeasurement() throws {
        // Nothing served for a minute, then one call refused (outside evaluation round 29): all of the slice's
        // attempts, but one refusal measures nothing — the multiplicative decrease alone, not the floor.
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 30_000))
        let refusal = [
            script.event(at: t0 - 50, outcome: .quotaExhausted, status: 429, errorType: "rate_limit_exceeded")
        ]
        var report = estimation.observe(script.delta(refusal), now: t0)
        var status = try #require(F.status(report))
        #expect(status.estimate.rpm == 28_500)
        #expect(status.signals.contains("quota exhausted: rpm estimate 30000 → 28500"))
        // Nor are five, or fifty: 600 a minute attempted is far from the 7,500 (a quarter of the estimate) that would
        // make the refusals a measurement of a limit under our rate.
        for count in [5, 50] {
            script = TelemetryScript()
            estimation = CapacityEstimation(policy: F.policy(rpm: 30_000))
            let refusals = script.spread(count, from: t0 - 50, to: t0 - 45) { script, at in
                script.event(at: at, outcome: .quotaExhausted, status: 429, errorType: "rate_limit_exceeded")
            }
            report = estimation.observe(script.delta(refusals), now: t0)
            status = try #require(F.status(report))
            #expect(status.estimate.rpm == 28_500)
        }
        // On a 1,000-rpm pool the same 50 refusals in 5 s (600 a minute attempted, above 250) are: it serves nothing.
        script = TelemetryScript()
        estimation = CapacityEstimation(policy: F.policy(rpm: 1_000))
        let refusals = script.spread(50, from: t0 - 50, to: t0 - 45) { script, at in
            script.event(at: at, outcome: .quotaExhausted, status: 429, errorType: "rate_limit_exceeded")
        }
        report = estimation.observe(script.delta(refusals), now: t0)
        #expect(F.status(report)?.estimate.rpm == 50)
    }

    @Test func withoutAStatedLimitAProbeAfterACutStepsInUnitsOfTheEstimateSlowerJustAboveTheRefusals() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        _ = estimation.observe(script.delta { Self.heavyRefusals(&$0, t0: t0, refused: 20) }, now: t0)
        // The minute after the last refusal (t0 − 7.5 s), then traffic at 96 % of the estimate: +5 % of 240 per
        // minute, not of the declared 1000 (which would overshoot the real limit by a fifth a minute) — and
        // 0.35 of that, at and above 240, where the provider refused a moment ago.
        // Once the estimate has passed that refusal by a probe step (5 %) without a refusal, the refusal is
        // disproven (served-while-throttled under-reads a limit met in a transient) and the whole step applies —
        // 1.5 times it after a minute of full steps without a refusal (`probeBoost`).
        var estimate = 240.0
        var slow = 0
        var full = 0
        var firstFull: Double?
        var lastSignals: [String] = []
        for tick in 1...90 {
            let now = t0 + Double(tick) * 5
            let report = estimation.observe(
                script.delta { Self.traffic(&$0, perSlice: Int((estimate * 0.96 / 12).rounded(.up)), from: now - 5) },
                now: now)
            let next = try #require(F.status(report)?.estimate.rpm)
            lastSignals = F.status(report)?.signals ?? []
            if tick <= 10 {
                #expect(next == 240, "tick \(tick)")
            } else if estimate < 240 * 1.05 {
                #expect(abs(next - estimate * (1 + 0.05 * 0.35 * 5 / 60)) < 1e-9, "tick \(tick)")
                slow += 1
            } else {
                let since = firstFull ?? now
                firstFull = since
                let boost = now - since >= 60 ? 1.5 : 1
                #expect(abs(next - estimate * (1 + 0.05 * boost * 5 / 60)) < 1e-9, "tick \(tick)")
                full += 1
            }
            estimate = next
        }
        #expect(slow == 34)  // ⌈ln 1.05 ÷ ln(1 + 0.05 × 0.35 × 5/60)⌉: under three minutes
        #expect(full == 46)  // 12 single steps, then 34 of 1.5
        // The operator sees why the estimate moves faster.
        #expect(
            lastSignals.contains {
                $0.hasPrefix("probing up: rpm utilisation")
                    && $0.hasSuffix("(steps ×1.5 after a minute of probing without a refusal)")
            })
        let single = (0..<12).reduce(1.0) { product, _ in product * (1 + 0.05 * 5 / 60) }
        let boosted = (0..<34).reduce(1.0) { product, _ in product * (1 + 0.075 * 5 / 60) }
        #expect(estimate > 240 * 1.05 * single * boosted * 0.99 && estimate < 240 * 1.06 * single * boosted)
    }

    @Test func neverCutsBelowTheFloor() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        let events = [
            script.event(at: t0 - 11, outcome: .quotaExhausted), script.event(at: t0 - 6, outcome: .quotaExhausted),
            script.event(at: t0 - 1, outcome: .quotaExhausted),
        ]
        let report = estimation.observe(script.delta(events), now: t0 + 1)
        // Nothing served in three throttled slices: the floor, 5 % of the declared capacity.
        #expect(F.status(report)?.estimate.rpm == 50)
    }

    /// At the floor, a quiet short window is evidence enough to probe: the floor's allocations may admit no
    /// traffic at all, and the estimate would stay there for good waiting for high utilisation.
    @Test func aQuietEstimateAtTheFloorProbesUpWithoutTraffic() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        let events = [
            script.event(at: t0 - 11, outcome: .quotaExhausted), script.event(at: t0 - 6, outcome: .quotaExhausted),
            script.event(at: t0 - 1, outcome: .quotaExhausted),
        ]
        var report = estimation.observe(script.delta(events), now: t0 + 1)
        #expect(F.status(report)?.estimate.rpm == 50)
        // The minute after the refusals holds; then +5 % of 1000 per minute (4.17 a 5-s tick) without any
        // traffic, until twice the floor (100), where utilisation judges again: 0 % holds it.
        var estimate = 50.0
        var probed = false
        for tick in 1...60 {
            let now = t0 + 1 + Double(tick) * 5
            report = estimation.observe(script.delta([]), now: now)
            let next = try #require(F.status(report)?.estimate.rpm)
            if now - (t0 - 1) <= 60 || estimate >= 100 {
                #expect(next == estimate, "tick \(tick)")
            } else {
                let step = 0.05 * 1000 * 5 / 60.0
                #expect(abs(next - estimate - step) < 1e-9, "tick \(tick)")
                if !probed {
                    let signal = try #require(F.status(report)?.signals.first { $0.hasPrefix("probing up") })
                    let text = "probing up from the floor: rpm no quota errors for a short window, estimate 50 → 54.2"
                    #expect(signal == text)
                    probed = true
                }
            }
            estimate = next
        }
        #expect(estimate >= 100)
        let step = 0.05 * 1000 * 5 / 60.0
        #expect(estimate < 100 + step)
    }

    @Test func remainingZeroIsQuotaEvidenceForItsDimension() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 2_000_000))
        // Google names the violated quota: tokens. Requests keep their estimate.
        var events = script.spread(10, from: t0 - 5, to: t0) { script, at in
            script.event(at: at, prompt: 800, completion: 200)
        }
        events.append(
            script.event(
                at: t0 - 0.5, upstream: F.pool, outcome: .quotaExhausted, status: 429,
                signals: EventSignals(family: .google, limitTokens: 1_000_000, windowTokensMs: 60_000)))
        // One throttled slice: the multiplicative decrease, in tokens only (a measurement takes three).
        var report = estimation.observe(script.delta(events), now: t0 + 1)
        var status = try #require(F.status(report))
        #expect(status.estimate.rpm == 1000)
        #expect(status.estimate.tpm == 0.95 * 1_000_000)

        // An `ok` answer with remaining requests 0 and a reset ahead is evidence too (requests only).
        script = TelemetryScript()
        estimation = CapacityEstimation(policy: F.policy())
        events = script.spread(10, from: t0 - 5, to: t0) { script, at in
            script.event(
                at: at, prompt: 10,
                signals: F.openAI(
                    limitRequests: 1000, remainingRequests: at >= t0 - 1 ? 0 : 5, limitTokens: 100_000,
                    remainingTokens: 90_000, resetMs: 900))
        }
        report = estimation.observe(script.delta(events), now: t0 + 1)
        status = try #require(F.status(report))
        #expect(status.estimate.rpm == 950)
        #expect(status.estimate.tpm == 100_000)
        #expect(status.state == .healthy)  // evidence, but no 429 answered
    }

    /// A 429 whose headers leave requests aplenty is a token refusal (a call larger than the tokens left):
    /// only the token estimate is cut. With few requests left it names neither dimension, and counts
    /// against both (equally used here).
    @Test func aRefusalThatLeavesATenthOfTheRequestsIsATokenRefusal() throws {
        func estimate(remainingRequests: Int64, limit: Int64 = 1000) throws -> PerDimension<Double?> {
            var script = TelemetryScript()
            var estimation = CapacityEstimation(policy: F.policy(rpm: Double(limit), tpm: 100_000))
            var events = script.spread(10, from: t0 - 5, to: t0) { script, at in
                script.event(at: at, prompt: 90, completion: 10)
            }
            events.append(
                script.event(
                    at: t0 - 0.5, outcome: .quotaExhausted, status: 429, estimated: 40_000,
                    signals: F.openAI(
                        limitRequests: limit, remainingRequests: remainingRequests, limitTokens: 100_000,
                        remainingTokens: 30_000, resetMs: 900)))
            let report = estimation.observe(script.delta(events), now: t0 + 1)
            return try #require(F.status(report)).estimate
        }
        #expect(try estimate(remainingRequests: 100) == PerDimension(rpm: 1000, tpm: 95_000))
        #expect(try estimate(remainingRequests: 99) == PerDimension(rpm: 950, tpm: 95_000))
        // A small pool's bucket that cannot pass one request states under six a minute: not plentiful.
        #expect(try estimate(remainingRequests: 5, limit: 30) == PerDimension(rpm: 28.5, tpm: 95_000))
        #expect(try estimate(remainingRequests: 6, limit: 30) == PerDimension(rpm: 30, tpm: 95_000))
    }

    /// A cut to 600 once observed at `t0 + 1` (50 served and 5 attributed 429s in each of the three slices
    /// before `t0`), on a 1000 RPM header limit.
    static func cutTo600(_ script: inout TelemetryScript, t0: Double) -> [StoredEvent] {
        script.spread(165, from: t0 - 15, to: t0) { script, at in
            let index = Int(((at - (t0 - 15)) * 11).rounded())
            return index % 11 == 10
                ? script.event(
                    at: at, outcome: .quotaExhausted, status: 429,
                    signals: F.openAI(limitRequests: 1000, remainingRequests: 0, resetMs: 800))
                : script.event(at: at, signals: F.openAI(limitRequests: 1000))
        }
    }

    /// `perSlice` served requests in each 5 s slice of `[from, from + 5)`.
    static func traffic(_ script: inout TelemetryScript, perSlice: Int, from: Double) -> [StoredEvent] {
        script.spread(perSlice, from: from, to: from + 5) { script, at in script.event(at: at) }
    }

    @Test func probesUpAdditivelyUnderHighUtilisation() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        var report = estimation.observe(script.delta { Self.cutTo600(&$0, t0: t0) }, now: t0 + 1)
        #expect(F.status(report)?.estimate.rpm == 600)
        var expected = 600.0
        for tick in 1...30 {
            let now = t0 + Double(tick) * 5
            // 48 per 5 s = 576 per minute: 96 % of 600.
            report = estimation.observe(script.delta { Self.traffic(&$0, perSlice: 48, from: now - 5) }, now: now)
            let status = try #require(F.status(report))
            // No probing while the minute after the 429s lasts; then +5 % of 1000 per minute (4.17 per
            // 5 s tick) while utilisation stays at or above 90 %: up to 641.67, where 576 / C < 0.9.
            if tick >= 12, 576 / expected >= 0.9 { expected += 0.05 * 1000 * 5 / 60 }
            #expect(abs(status.estimate.rpm! - expected) < 1e-9, "tick \(tick)")
        }
        #expect(abs(expected - (600 + 10 * 25.0 / 6)) < 1e-9)
        // The last step is still among the signals (actions are shown for a short window).
        let last = try #require(F.status(report)?.signals.first { $0.hasPrefix("probing up") })
        #expect(last.hasPrefix("probing up: rpm utilisation 90.4% with no quota errors, estimate 63"))
        #expect(last.hasSuffix(" → 642"))
    }

    /// The estimate after each of 30 ticks (5 s) following the cut to 600: `served` answers per tick, each stating
    /// the limit of 1000, and `denied` calls our own gateways turned away.
    static func estimatesAfterCut(served: Int, denied: Int = 0, t0: Double) throws -> [Double] {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        _ = estimation.observe(script.delta { cutTo600(&$0, t0: t0) }, now: t0 + 1)
        var estimates: [Double] = []
        for tick in 1...30 {
            let now = t0 + Double(tick) * 5
            var events = script.spread(served, from: now - 5, to: now) { script, at in
                script.event(at: at, signals: F.openAI(limitRequests: 1000))
            }
            events += script.spread(denied, from: now - 5, to: now) { script, at in
                script.event(at: at, outcome: .deniedLocal)
            }
            let report = estimation.observe(script.delta(events), now: now)
            estimates.append(try #require(F.status(report)).estimate.rpm!)
        }
        return estimates
    }

    /// After the minute of the 429s, toward the stated 1000 by half the gap per minute (the larger step) while
    /// `recovering(estimate)` holds. Below a stated limit the probe is not sped up after a minute.
    static func expectedRecovery(while recovering: (Double) -> Bool) -> [Double] {
        var expected = 600.0
        return (1...30).map { tick in
            if tick >= 12, recovering(expected) { expected += max(0.05 * 1000, 0.5 * (1000 - expected)) * 5 / 60 }
            return expected
        }
    }

    @Test func belowAStatedLimitHalfTheEstimateIsEvidenceEnoughToRecover() throws {
        // 35 per 5 s = 420 per minute (70 % of 600): recovering while 420 is at least half the estimate, up to 840.
        let estimates = try Self.estimatesAfterCut(served: 35, t0: t0)
        let expected = Self.expectedRecovery { 420 / $0 >= 0.5 }
        for (tick, (estimate, value)) in zip(estimates, expected).enumerated() {
            #expect(abs(estimate - value) < 1e-6, "tick \(tick + 1)")
        }
        #expect(expected.last! > 800 && expected.last! < 841)
    }

    @Test func belowAStatedLimitDemandOurGatewaysTurnAwayIsEvidenceEvenAtLowUse() throws {
        // 120 a minute served (a fifth of the estimate: too little to judge). With our own gateways denying calls
        // in every slice, the low use is ours: the estimate recovers as it would at half use. Without, it holds.
        let denying = try Self.estimatesAfterCut(served: 10, denied: 5, t0: t0)
        for (tick, (estimate, value)) in zip(denying, Self.expectedRecovery { _ in true }).enumerated() {
            #expect(abs(estimate - value) < 1e-6, "tick \(tick + 1)")
        }
        #expect(denying.last! > 800)
        #expect(try Self.estimatesAfterCut(served: 10, t0: t0).allSatisfy { $0 == 600 })
    }

    /// The estimate after each of 40 ticks (5 s) of 48 answers per tick (576 a minute: 96 % of a declared 600),
    /// `denied` calls our own gateways turned away per tick, and answers stating a limit of 600 when `stated`.
    static func estimatesAtTheDeclaredCapacity(denied: Int, stated: Bool = false, t0: Double) throws -> [Double] {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 600))
        var estimates: [Double] = []
        for tick in 1...40 {
            let now = t0 + Double(tick) * 5
            var events = script.spread(48, from: now - 5, to: now) { script, at in
                stated ? script.event(at: at, signals: F.openAI(limitRequests: 600)) : script.event(at: at)
            }
            events += script.spread(denied, from: now - 5, to: now) { script, at in
                script.event(at: at, outcome: .deniedLocal)
            }
            let report = estimation.observe(script.delta(events), now: now)
            estimates.append(try #require(F.status(report)).estimate.rpm!)
        }
        return estimates
    }

    @Test func withoutAStatedLimitTheEstimateProbesAboveTheDeclaredCapacityOnlyForDemandOurGatewaysTurnAway() throws {
        // A provider that states no limit (Google's) and has never refused: the declared 600 is the operator's
        // guess. Used at 96 % while our gateways deny calls, the estimate rises by twice 5 % of itself a minute (×1.5
        // after a minute of such steps) for as long as they deny calls and half of it is used (up to 576 / 0.5).
        let denying = try Self.estimatesAtTheDeclaredCapacity(denied: 3, t0: t0)
        let first = try #require(denying.firstIndex { $0 > 600 })
        var expected = Array(repeating: 600.0, count: first)
        var estimate = 600.0
        for tick in first..<40 {
            if 576 / estimate >= 0.5 {
                let boost = 2 * (Double(tick - first) * 5 >= 60 ? 1.5 : 1)
                estimate += 0.05 * estimate * boost * 5 / 60
            }
            expected.append(estimate)
        }
        #expect(first <= 2)
        for (tick, (value, want)) in zip(denying, expected).enumerated() {
            #expect(abs(value - want) < 1e-6, "tick \(tick + 1)")
        }
        #expect(denying.last! > 700 && denying.last! < 1_152)
        // Nobody turned away: the demand is met at the declared capacity, and nothing asks for more.
        #expect(try Self.estimatesAtTheDeclaredCapacity(denied: 0, t0: t0).allSatisfy { $0 == 600 })
        // A limit the provider states is a ceiling, denials or not.
        #expect(try Self.estimatesAtTheDeclaredCapacity(denied: 3, stated: true, t0: t0).allSatisfy { $0 == 600 })
    }

    @Test func aCutWinsOverAStatedLimitUntilTheProviderRaisesItByAQuarter() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        // Cut to 600 while the provider states 1000: evidence beats the statement.
        _ = estimation.observe(script.delta { Self.cutTo600(&$0, t0: t0) }, now: t0 + 1)
        func state(_ limit: Int64, at now: Double) throws -> UpstreamStatus {
            // 20 answers stating `limit` every 5 s (240 per minute): after two ticks most remembered statements say it.
            let events = script.spread(20, from: now - 5, to: now) { script, at in
                script.event(at: at, signals: F.openAI(limitRequests: limit))
            }
            return try #require(F.status(estimation.observe(script.delta(events), now: now)))
        }
        var status = try state(1000, at: t0 + 5)
        #expect(status.estimate.rpm == 600)
        // A stated rise of a tenth is no news: the cut stands (well below the statement, at 40 % use, it holds).
        for tick in 2...5 { status = try state(1100, at: t0 + Double(tick) * 5) }
        #expect(status.headerLimit.rpm == 1100)
        #expect(status.estimate.rpm == 600)
        // Raised to 2000 (by a quarter or more): the provider changed something, and the estimate follows at once.
        for tick in 6...9 { status = try state(2000, at: t0 + Double(tick) * 5) }
        #expect(status.headerLimit.rpm == 2000)
        #expect(status.estimate.rpm == 2000)
        #expect(status.signals.contains("rpm estimate set to the provider's limit, 2000"))
    }

    @Test func aStatedLimitRaisedByAQuarterInSmallStepsSinceTheCutIsFollowed() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        // Cut to 600 while the provider states 1000.
        _ = estimation.observe(script.delta { Self.cutTo600(&$0, t0: t0) }, now: t0 + 1)
        var now = t0
        func state(_ limit: Int64) throws -> UpstreamStatus {
            var status: UpstreamStatus?
            for _ in 0..<4 {
                now += 5
                let events = script.spread(20, from: now - 5, to: now) { script, at in
                    script.event(at: at, signals: F.openAI(limitRequests: limit))
                }
                status = F.status(estimation.observe(script.delta(events), now: now))
            }
            return try #require(status)
        }
        // Raised a tenth at a time: 1100 and 1200 are less than a quarter above the 1000 stated at the cut, and
        // each less than a quarter above the one before; the cut stands.
        for limit: Int64 in [1000, 1100, 1200] {
            let status = try state(limit)
            #expect(status.headerLimit.rpm == Double(limit))
            #expect(status.estimate.rpm == 600)
        }
        // 1300 is only 8 % above 1200, but 30 % above the limit in force when the estimate was cut: followed.
        let status = try state(1300)
        #expect(status.headerLimit.rpm == 1300)
        #expect(status.estimate.rpm == 1300)
        #expect(status.signals.contains("rpm estimate set to the provider's limit, 1300"))
    }

    @Test func doesNotMoveUpWithoutEvidence() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        _ = estimation.observe(script.delta { Self.cutTo600(&$0, t0: t0) }, now: t0 + 1)
        for (perSlice, lowSignal) in [(20, true), (35, false)] {  // 240/min = 40 %, 420/min = 70 %
            for tick in 1...20 {
                let now = t0 + 200 * (lowSignal ? 0 : 1) + Double(tick) * 5
                let report = estimation.observe(
                    script.delta { Self.traffic(&$0, perSlice: perSlice, from: now - 5) }, now: now)
                let status = try #require(F.status(report))
                #expect(status.estimate.rpm == 600)
                if tick >= 13 {
                    #expect(
                        status.signals.contains("rpm utilisation 40% is below 50%: no evidence to probe up")
                            == lowSignal)
                }
            }
        }
    }

    /// `count` served requests over `[from, to)`, each answer stating a limit of 1000 per minute, and those
    /// from `after` on that only `remaining` of it remain.
    static func stating(
        _ script: inout TelemetryScript, _ count: Int, from: Double, to: Double, remaining: Int64, after: Double,
        resetMs: Int64
    ) -> [StoredEvent] {
        script.spread(count, from: from, to: to) { script, at in
            script.event(
                at: at,
                signals: at >= after
                    ? F.openAI(limitRequests: 1000, remainingRequests: remaining, resetMs: resetMs)
                    : F.openAI(limitRequests: 1000))
        }
    }

    @Test func sharedKeyLowersTheCeiling() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        // We served 300 in the minute, yet the provider says only 200 of 1000 remain: others use 500.
        // (The pool must have been watched for the whole header window: one event long before.)
        var events = [script.event(at: t0 - 70)]
        events += Self.stating(&script, 300, from: t0 - 60, to: t0, remaining: 200, after: t0 - 0.2, resetMs: 48_000)
        let report = estimation.observe(script.delta(events), now: t0)
        let status = try #require(F.status(report))
        #expect(status.headerLimit.rpm == 1000)
        #expect(status.estimate.rpm == 500)
        #expect(status.state == .healthy)
        #expect(status.signals.contains("another client uses ~500 rpm of the shared key: estimate 1000 → 500"))
    }

    @Test func ourOwnBurstIsNotAnotherClient() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        // 60 served over fifty seconds, then a burst of 200 in the last ten that drains a provider bucket
        // shorter than the minute it reports: 50 of 1000 remain. Over the minute we served 260 — but over the
        // last ten seconds 1,200 a minute, which explains the whole drain: nobody else uses the key.
        var events = [script.event(at: t0 - 70)]
        events += script.spread(60, from: t0 - 60, to: t0 - 10) { script, at in
            script.event(at: at, signals: F.openAI(limitRequests: 1000))
        }
        events += Self.stating(&script, 200, from: t0 - 10, to: t0, remaining: 50, after: t0 - 1, resetMs: 10_000)
        var report = estimation.observe(script.delta(events), now: t0)
        var status = try #require(F.status(report))
        #expect(status.estimate.rpm == 1000)
        #expect(!status.signals.contains { $0.contains("another client") })
        // The same statements after a minute of a steady 260 per minute do name another client: 690.
        var steady = TelemetryScript()
        estimation = CapacityEstimation(policy: F.policy())
        events = [steady.event(at: t0 - 70)]
        events += Self.stating(&steady, 260, from: t0 - 60, to: t0, remaining: 50, after: t0 - 1, resetMs: 10_000)
        report = estimation.observe(steady.delta(events), now: t0)
        status = try #require(F.status(report))
        #expect(status.signals.contains("another client uses ~690 rpm of the shared key: estimate 1000 → 310"))
    }

    /// A limit raised tenfold (an upstream back from a collapse): the first statements of the new limit show its
    /// bucket still filling (300 of 1000 remain). The estimate follows the raise; the filling bucket is not another
    /// client: read as one, it cut the estimate to 356 here ("another client uses ~644 rpm"), and in an outside
    /// scenario to its floor for three minutes (round 14).
    @Test func aRaisedLimitsFillingBucketIsNotAnotherClient() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        var events = [script.event(at: t0 - 70)]
        events += script.spread(50, from: t0 - 60, to: t0 - 5) { script, at in
            script.event(at: at, signals: F.openAI(limitRequests: 100, remainingRequests: 90, resetMs: 6_000))
        }
        _ = estimation.observe(script.delta(events), now: t0 - 5)
        let raised = script.spread(5, from: t0 - 5, to: t0) { script, at in
            script.event(at: at, signals: F.openAI(limitRequests: 1000, remainingRequests: 300, resetMs: 42_000))
        }
        let report = estimation.observe(script.delta(raised), now: t0)
        let status = try #require(F.status(report))
        #expect(status.headerLimit.rpm == 1000)
        #expect(status.estimate.rpm == 1000)
        #expect(!status.signals.contains { $0.contains("another client") }, "\(status.signals)")
    }

    @Test func aStatementIsJudgedOnceOurSuccessesBeforeItAreReported() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        // A steady 600 a minute, each call taking 10 s — but the last second's answers, which carry the
        // statement "400 of 1000 remain", came back at once. At the tick the successes admitted in the ten
        // seconds before are still in flight: counted without them (510) the statement would read as 90 a
        // minute of someone else's. It is judged once the short window's p95 latency (10 s) has passed.
        var events = [script.event(at: t0 - 70, latencyMs: 10_000)]
        events += script.spread(500, from: t0 - 60, to: t0 - 10) { script, at in
            script.event(at: at, latencyMs: 10_000, signals: F.openAI(limitRequests: 1000))
        }
        let inFlight = script.spread(90, from: t0 - 10, to: t0 - 1) { script, at in
            script.event(at: at, latencyMs: 10_000, signals: F.openAI(limitRequests: 1000))
        }
        events += script.spread(10, from: t0 - 1, to: t0) { script, at in
            script.event(
                at: at, latencyMs: 100,
                signals: F.openAI(limitRequests: 1000, remainingRequests: 400, resetMs: 36_000))
        }
        var report = estimation.observe(script.delta(events), now: t0)
        var status = try #require(F.status(report))
        #expect(status.estimate.rpm == 1000)
        #expect(!status.signals.contains { $0.contains("another client") })
        report = estimation.observe(script.delta(inFlight), now: t0 + 10)
        status = try #require(F.status(report))
        #expect(status.estimate.rpm == 1000)
        #expect(!status.signals.contains { $0.contains("another client") })
    }

    @Test func spendCapAlertsWithoutChangingCapacity() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        let events = script.spread(25, from: t0 - 10, to: t0) { script, at in
            at >= t0 - 2
                ? script.event(at: at, outcome: .spendCap, status: 429, errorType: "insufficient_quota")
                : script.event(at: at)
        }
        var report = estimation.observe(script.delta(events), now: t0)
        var status = try #require(F.status(report))
        #expect(status.estimate.rpm == 1000)
        #expect(status.state == .healthy)
        let alert = try #require(F.alerts(report, kind: "spend_cap").first)
        #expect(alert.severity == .critical)
        #expect(alert.since == t0)
        #expect(alert.message.contains("insufficient_quota"))
        // Quiet for a minute: the alert clears.
        report = estimation.observe(script.delta([]), now: t0 + 61)
        status = try #require(F.status(report))
        #expect(F.alerts(report, kind: "spend_cap").isEmpty)
        #expect(status.estimate.rpm == 1000)
    }

    @Test func emptyTicksSlideTheWindowAndFutureEventsAreBounded() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        // A gateway clock 30 s ahead: its events count at `now`, not in the future.
        var events = Self.traffic(&script, perSlice: 50, from: t0 - 5)
        events.append(script.event(at: t0 + 30))
        var report = estimation.observe(script.delta(events), now: t0)
        #expect(F.status(report)?.served.rpm == 51.0 / 5 * 60)
        #expect(F.status(report)?.lastEventAt == t0)
        report = estimation.observe(script.delta([]), now: t0 + 30)
        #expect(F.status(report)?.served.rpm == 51.0 / 35 * 60)
        report = estimation.observe(script.delta([]), now: t0 + 70)
        #expect(F.status(report)?.served.rpm == 0)
        #expect(F.status(report)?.estimate.rpm == 1000)
    }

    @Test func lateEventsLandInTheirOwnSlice() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        _ = estimation.observe(
            script.delta {
                Self.traffic(&$0, perSlice: 10, from: t0 - 15) + Self.traffic(&$0, perSlice: 10, from: t0 - 10)
                    + Self.traffic(&$0, perSlice: 10, from: t0 - 5)
            }, now: t0)
        // 429s from each of the three slices before the previous tick arrive late: they still mark those slices
        // throttled, which measure 10 served per 5 s.
        let late = [
            script.event(at: t0 - 13, outcome: .quotaExhausted), script.event(at: t0 - 8, outcome: .quotaExhausted),
            script.event(at: t0 - 3, outcome: .quotaExhausted),
        ]
        let report = estimation.observe(script.delta(late), now: t0 + 5)
        #expect(F.status(report)?.estimate.rpm == 120)
    }
}
