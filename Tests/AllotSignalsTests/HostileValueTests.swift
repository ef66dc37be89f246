import AllotSignals
import Testing

@Suite("Hostile header values")
struct HostileValueTests {
    static let countHeaders = [
        "x-ratelimit-limit-requests", "x-ratelimit-remaining-tokens", "anthropic-ratelimit-requests-limit",
        "anthropic-ratelimit-output-tokens-remaining",
    ]
    static let hostileCounts = [
        "", " ", "lots", "12.5.6", "12.5", "1e6", "+5", "-5", "-0", "--1", "-1-1", "0x10", "1_000", "1,000",
        "1 000", "99999999999999999999", "9223372036854775808", "1234567890123456789", "٣", "６０", "60\u{0}",
        "60\r\n", "\n60", "∞", "NaN", String(repeating: "9", count: 10_000), "🙂", "60s",
    ]

    @Test("hostile counts are nil and counted, never 0, never a crash", arguments: hostileCounts)
    func hostileCount(value: String) {
        for name in Self.countHeaders {
            let signals = ProviderSignals(headers: [name: value], now: 0)
            #expect(signals.requests.limit == nil && signals.tokens.remaining == nil)
            #expect(signals.outputTokens.remaining == nil)
            #expect(signals.unparseableHeaders == [name], "\(name): \(value.prefix(20))")
        }
    }

    static let hostileDurations = [
        "", "soon", "12.5.6", "1s1s", "-1s", "-5", "1e3s", "1 s", "１s", "∞s", "2562048h", "60\u{0}s",
        String(repeating: "1", count: 5_000) + "s", "1h1h1h", "5m5h", "0.5.s",
    ]

    @Test("hostile OpenAI resets are nil and counted", arguments: hostileDurations)
    func hostileReset(value: String) {
        let signals = ProviderSignals(headers: ["x-ratelimit-reset-tokens": value], now: 0)
        #expect(signals.tokens.reset == nil)
        #expect(signals.unparseableCount == 1, "\(value.prefix(20))")
    }

    @Test(
        "hostile Anthropic resets, utilisations and retry values are nil and counted",
        arguments: [
            ("anthropic-ratelimit-tokens-reset", "2026-02-30T00:00:00Z"),
            ("anthropic-ratelimit-tokens-reset", "6m0s"),
            ("anthropic-ratelimit-tokens-reset", "1795316400"),
            ("azure-openai-deployment-utilization", "87.5"),
            ("azure-openai-deployment-utilization", "-5%"),
            ("azure-openai-deployment-utilization", "%"),
            ("azure-openai-deployment-utilization", "87.5%%"),
            ("azure-openai-deployment-utilization", "８７%"),
            ("retry-after", "-1"),
            ("retry-after", "soon"),
            ("retry-after", "1e3"),
            ("retry-after", "Sun, 30 Feb 2026 03:00:30 GMT"),
            ("retry-after-ms", "-1500"),
            ("retry-after-ms", "1500ms"),
            ("retry-after-ms", String(repeating: "9", count: 400)),
        ])
    func hostileOther(name: String, value: String) {
        let signals = ProviderSignals(headers: [name: value], now: 1_795_316_400)
        #expect(signals.tokens.reset == nil && signals.utilization == nil && signals.retryAfter == nil)
        #expect(signals.unparseableHeaders == [name])
    }

    @Test("-1 means unknown in every count and reset field: nil, not unparseable")
    func minusOne() {
        let headers = [
            "x-ratelimit-limit-requests": "-1", "x-ratelimit-remaining-requests": "-1",
            "x-ratelimit-reset-requests": "-1", "anthropic-ratelimit-tokens-limit": "-1",
        ]
        let signals = ProviderSignals(headers: headers, now: 0)
        #expect(signals.requests.isEmpty && signals.tokens.isEmpty)
        #expect(signals.unparseableCount == 0)
    }

    @Test("utilisation above 100% is clamped to 1; huge but valid numbers are kept")
    func bounds() {
        let signals = ProviderSignals(
            headers: [
                "azure-openai-deployment-utilization": "250%", "x-ratelimit-limit-tokens": "999999999999999999",
                "retry-after": "86400", "retry-after-ms": "0",
            ], now: 0)
        #expect(signals.utilization == 1)
        #expect(signals.tokens.limit == 999_999_999_999_999_999)
        #expect(signals.retryAfter == 0)
    }

    @Test("a seeded stream of random bytes as header values never crashes and is always counted or read")
    func fuzz() {
        var rng = SeededGenerator(seed: 0x5161_A15)
        let names =
            HostileValueTests.countHeaders + [
                "x-ratelimit-reset-requests", "anthropic-ratelimit-tokens-reset", "azure-openai-deployment-utilization",
                "retry-after", "retry-after-ms",
            ]
        let alphabet = Array("0123456789.-+:smhnuµ% TZ,GMTSunNov\t".unicodeScalars)
        for _ in 0..<5_000 {
            let length = Int.random(in: 0...24, using: &rng)
            let value = String(String.UnicodeScalarView((0..<length).map { _ in alphabet.randomElement(using: &rng)! }))
            let name = names.randomElement(using: &rng)!
            let signals = ProviderSignals(headers: [name: value], now: 1_795_316_400)
            let read =
                !signals.requests.isEmpty || !signals.tokens.isEmpty || !signals.outputTokens.isEmpty
                || signals.utilization != nil || signals.retryAfter != nil
            // Either the value was read, or it was counted, or it was the -1 sentinel.
            #expect(read || signals.unparseableCount == 1 || value.trimmingSpaces == "-1", "\(name): \(value)")
            if let retry = signals.retryAfter { #expect(retry >= 0 && retry.isFinite) }
            if let reset = signals.requests.reset ?? signals.tokens.reset { #expect(reset >= 0 && reset.isFinite) }
        }
    }
}

extension String {
    fileprivate var trimmingSpaces: Substring {
        let scalars = unicodeScalars
        let start = scalars.firstIndex { $0 != " " && $0 != "\t" } ?? scalars.endIndex
        let end = scalars.lastIndex { $0 != " " && $0 != "\t" }.map { scalars.index(after: $0) } ?? start
        return self[start..<max(start, end)]
    }
}
