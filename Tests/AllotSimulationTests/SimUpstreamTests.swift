import AllotSignals
import Testing

@testable import AllotSimulation

@Suite struct SimUpstreamTests {
    static func pool(_ provider: ProviderStyle, overload: [OverloadWindow] = [], warning: Double = 0) -> ScenarioPool {
        ScenarioPool(
            id: "p", provider: provider, declaredRPM: 60, declaredTPM: 60_000,
            capacity: [CapacityStep(at: 0, rpm: 60, tpm: 60_000), CapacityStep(at: 600, rpm: 30, tpm: 30_000)],
            latency: LatencyModel(baseMs: 1000, perThousandOutputTokensMs: 0, knee: 0.5, maxFactor: 3),
            latencyWarningSeconds: warning, overload: overload)
    }

    @Test func quota429OnceTheBucketIsEmptyWithParseableOpenAIHeaders() throws {
        // 60 rpm with a 10 s bucket: 10 requests at once, then a 429 until one refills (1 s).
        var upstream = SimUpstream(pool: Self.pool(.openai), epoch: 1_800_000_000, seed: 1, stream: 0)
        for _ in 0..<10 {
            #expect(upstream.attempt(at: 0, promptTokens: 100, completionTokens: 10).kind == .success)
        }
        let rejected = upstream.attempt(at: 0, promptTokens: 100, completionTokens: 10)
        #expect(rejected.kind == .quota)
        #expect(rejected.status == 429)
        #expect(rejected.errorType == "rate_limit_exceeded")
        let signals = ProviderSignals(headerFields: rejected.headers, now: 1_800_000_000)
        #expect(signals.requests.limit == 60)
        #expect(signals.requests.remaining == 0)
        #expect(signals.tokens.limit == 60_000)
        #expect(signals.unparseableHeaders.isEmpty)
        #expect(signals.retryAfter == 1)
        #expect(rejected.headers.contains { $0 == ("x-ratelimit-reset-requests", "10s") })
        // One second later one request has refilled.
        #expect(upstream.attempt(at: 1, promptTokens: 100, completionTokens: 10).kind == .success)
        #expect(upstream.attempt(at: 1, promptTokens: 100, completionTokens: 10).kind == .quota)
    }

    /// Below 6 rpm ten seconds of capacity are less than one request: a full bucket admits one anyway, then refills
    /// from its debt, so a 5-rpm pool serves 5 a minute (outside evaluation round 44, F1: it answered every attempt
    /// 429).
    @Test func aPoolOfFewerThanSixRequestsAMinuteServesItsRate() throws {
        let pool = ScenarioPool(
            id: "p", provider: .openai, declaredRPM: 5, declaredTPM: 60_000,
            capacity: [CapacityStep(at: 0, rpm: 5, tpm: 60_000)],
            latency: LatencyModel(baseMs: 1000, perThousandOutputTokensMs: 0, knee: 0.5, maxFactor: 3),
            latencyWarningSeconds: 0, overload: [])
        var upstream = SimUpstream(pool: pool, epoch: 1_800_000_000, seed: 1, stream: 0)
        #expect(upstream.attempt(at: 0, promptTokens: 100, completionTokens: 10).kind == .success)
        let rejected = upstream.attempt(at: 0, promptTokens: 100, completionTokens: 10)
        #expect(rejected.kind == .quota)
        // 12 s a request: full again (5/6 of a request) 12 s later, with the advice to wait that long.
        #expect(rejected.headers.contains { $0 == ("retry-after-ms", "12000") })
        #expect(upstream.attempt(at: 11.9, promptTokens: 100, completionTokens: 10).kind == .quota)
        var served = 1
        for second in stride(from: 12.0, to: 60, by: 0.5)
        where upstream.attempt(at: second, promptTokens: 100, completionTokens: 10).kind == .success {
            served += 1
        }
        #expect(served == 5)  // at 0, 12, 24, 36 and 48 s
    }

    @Test func anthropicHeadersCarryRFC3339ResetsAndRetryAfterSeconds() throws {
        var upstream = SimUpstream(pool: Self.pool(.anthropic), epoch: 1_800_000_000, seed: 1, stream: 0)
        let ok = upstream.attempt(at: 0, promptTokens: 900, completionTokens: 100)
        #expect(ok.kind == .success)
        let signals = ProviderSignals(headerFields: ok.headers, now: 1_800_000_000)
        #expect(signals.requests.limit == 60)
        #expect(signals.requests.remaining == 54)  // 9 of 10 left, scaled to the minute
        #expect(signals.tokens.remaining == 54_000)  // 9,000 of the 10,000-token bucket, scaled to the minute
        #expect(signals.unparseableHeaders.isEmpty)
        for _ in 0..<9 { _ = upstream.attempt(at: 0, promptTokens: 1, completionTokens: 1) }
        let rejected = upstream.attempt(at: 0, promptTokens: 1, completionTokens: 1)
        #expect(rejected.status == 429)
        #expect(rejected.errorType == "rate_limit_error")
        #expect(rejected.headers.contains { $0 == ("retry-after", "1") })
    }

    @Test func capacityDropTakesEffectAtItsInstant() {
        // Attempts every 0.25 s for 10 s: a full 10 s bucket plus 10 s of refill before the drop
        // (60 rpm: 10 + 10), the halved bucket plus half the refill after it (30 rpm: 5 + 5).
        func served(from start: Double) -> Int {
            var upstream = SimUpstream(pool: Self.pool(.openai), epoch: 0, seed: 1, stream: 0)
            var count = 0
            var t = start
            while t < start + 10 {
                if upstream.attempt(at: t, promptTokens: 1, completionTokens: 1).kind == .success { count += 1 }
                t += 0.25
            }
            return count
        }
        #expect((19...20).contains(served(from: 100)))
        #expect((9...10).contains(served(from: 600)))
        let upstream = SimUpstream(pool: Self.pool(.openai), epoch: 0, seed: 1, stream: 0)
        #expect(upstream.trueCapacity(at: 599) == CapacityStep(at: 0, rpm: 60, tpm: 60_000))
        #expect(upstream.trueCapacity(at: 600).rpm == 30)
    }

    @Test func overloadWindowsAnswer529Or503() {
        let window = [OverloadWindow(from: 10, to: 20, rate: 1)]
        var anthropic = SimUpstream(pool: Self.pool(.anthropic, overload: window), epoch: 0, seed: 1, stream: 0)
        var openai = SimUpstream(pool: Self.pool(.openai, overload: window), epoch: 0, seed: 1, stream: 0)
        #expect(anthropic.attempt(at: 15, promptTokens: 1, completionTokens: 1).status == 529)
        #expect(openai.attempt(at: 15, promptTokens: 1, completionTokens: 1).status == 503)
        #expect(anthropic.attempt(at: 20, promptTokens: 1, completionTokens: 1).status == 200)
    }

    @Test func latencyRisesWithUtilisationAndBeforeADrop() {
        var upstream = SimUpstream(pool: Self.pool(.openai, warning: 60), epoch: 0, seed: 1, stream: 0)
        let idle = upstream.latency(at: 100, utilisation: 0, completion: 0)
        let busy = upstream.latency(at: 100, utilisation: 1, completion: 0)
        let warned = upstream.latency(at: 590, utilisation: 0, completion: 0)
        #expect((0.85...1.15).contains(idle))  // base 1 s ± 15% jitter
        #expect((2.55...3.45).contains(busy))  // ×3 at full utilisation
        #expect(warned > 2.3)  // 50 of the 60 s warning: ×(1 + 2·50/60)
    }

    @Test(arguments: [(0.25, "250ms"), (6, "6s"), (90, "1m30s"), (2.5, "2.5s"), (179.56, "2m59.56s")])
    func goDurations(seconds: Double, text: String) {
        #expect(SimUpstream.goDuration(seconds) == text)
        #expect(GoDuration.parse(text).map { abs($0 - seconds) < 0.001 } == true)
    }
}
