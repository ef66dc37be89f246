import AllotSignals
import Testing

@Suite("Header windows")
struct HeaderWindowsTests {
    @Test("per-minute defaults pass limits through unchanged")
    func perMinute() {
        let signals = ProviderSignals(
            headers: [
                "x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "15",
                "x-ratelimit-limit-tokens": "150000",
            ], now: 0)
        let rates = signals.perMinute()
        #expect(rates.requests == PerMinuteRate(limit: 60, remaining: 15))
        #expect(rates.tokens == PerMinuteRate(limit: 150_000, remaining: nil))
        #expect(rates.inputTokens == PerMinuteRate())
    }

    @Test("a per-day request window divides by 1440 and keeps the remaining fraction")
    func perDay() {
        let signals = ProviderSignals(
            headers: [
                "x-ratelimit-limit-requests": "14400", "x-ratelimit-remaining-requests": "3600",
                "x-ratelimit-limit-tokens": "18000",
            ], now: 0)
        let rates = signals.perMinute(HeaderWindows(requests: 86_400))
        #expect(rates.requests == PerMinuteRate(limit: 10, remaining: 2.5))
        #expect(rates.tokens.limit == 18_000)
    }

    @Test("a window stated by the signal (Google quotaId) wins over the pool setting")
    func statedWindow() {
        let dimension = RateLimitDimension(limit: 250, window: 86_400)
        #expect(dimension.perMinute(defaultWindow: 60).limit == 250.0 / 1_440)
        #expect(RateLimitDimension(limit: 15).perMinute(defaultWindow: 1).limit == 900)
    }

    @Test("input and output tokens use the tokens window")
    func tokenWindows() {
        let signals = ProviderSignals(
            headers: [
                "anthropic-ratelimit-input-tokens-limit": "7200", "anthropic-ratelimit-output-tokens-limit": "3600",
            ], now: 0)
        let rates = signals.perMinute(HeaderWindows(requests: 1, tokens: 3_600))
        #expect(rates.inputTokens.limit == 120)
        #expect(rates.outputTokens.limit == 60)
    }

    @Test("a window that is not a positive finite number gives no rate instead of a made-up one")
    func invalidWindows() {
        let dimension = RateLimitDimension(limit: 60, remaining: 10)
        for window in [0, -60, .nan, .infinity] as [Double] {
            #expect(dimension.perMinute(defaultWindow: window) == PerMinuteRate())
        }
    }

    @Test("window names for policy files")
    func names() {
        #expect(HeaderWindows.seconds(named: "minute") == 60)
        #expect(HeaderWindows.seconds(named: "Day") == 86_400)
        #expect(HeaderWindows.seconds(named: "hour") == 3_600)
        #expect(HeaderWindows.seconds(named: "second") == 1)
        #expect(HeaderWindows.seconds(named: "fortnight") == nil)
        #expect(HeaderWindows.perMinute == HeaderWindows(requests: 60, tokens: 60))
    }
}
