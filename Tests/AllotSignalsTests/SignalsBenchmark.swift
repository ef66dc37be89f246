import AllotJSON
import AllotSignals
import AllotTime
import Foundation
import Testing

/// Rough cost of the ingest path's per-event work. Runs only with `ALLOT_BENCH=1` (tests never assert on speed):
///
///     ALLOT_BENCH=1 swift test -c release --filter SignalsBenchmark
@Suite("Signals benchmark", .enabled(if: ProcessInfo.processInfo.environment["ALLOT_BENCH"] != nil))
struct SignalsBenchmark {
    static let openAI: [String: String] = [
        "x-ratelimit-limit-requests": "10000", "x-ratelimit-limit-tokens": "2000000",
        "x-ratelimit-remaining-requests": "9998", "x-ratelimit-remaining-tokens": "1999000",
        "x-ratelimit-reset-requests": "12ms", "x-ratelimit-reset-tokens": "2m59.56s",
    ]
    static let anthropic: [String: String] = [
        "anthropic-ratelimit-requests-limit": "4000", "anthropic-ratelimit-requests-remaining": "3999",
        "anthropic-ratelimit-requests-reset": "2026-11-22T03:00:01Z", "anthropic-ratelimit-tokens-limit": "400000",
        "anthropic-ratelimit-tokens-remaining": "398000", "anthropic-ratelimit-tokens-reset": "2026-11-22T03:00:12Z",
        "retry-after": "20",
    ]

    /// Median nanoseconds per call over several rounds.
    private func measure(_ label: String, iterations: Int = 200_000, _ body: () -> Int) -> Double {
        var rounds: [Double] = []
        var sink = 0
        for _ in 0..<7 {
            let start = MonotonicClock.now()
            for _ in 0..<iterations { sink &+= body() }
            rounds.append(Double(MonotonicClock.now() - start) / Double(iterations))
        }
        rounds.sort()
        let median = rounds[rounds.count / 2]
        let figures = String(format: "median %.0f ns/op, best %.0f ns/op", median, rounds[0])
        print("SignalsBenchmark \(label): \(figures) (sink \(sink & 1))")
        return median
    }

    @Test("parse and classify a typical header set")
    func benchmark() {
        let now = 1_795_316_400.0
        let openAIObject = JSONObject(Self.openAI.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) })
        let anthropicObject = JSONObject(Self.anthropic.map { ($0.key, JSON.string($0.value)) })
        _ = measure("OpenAI headers [String: String]") {
            Int(ProviderSignals(headers: Self.openAI, now: now).requests.limit ?? 0)
        }
        _ = measure("OpenAI headers JSONObject") {
            Int(ProviderSignals(headers: openAIObject, now: now).requests.limit ?? 0)
        }
        _ = measure("Anthropic headers JSONObject") {
            Int(ProviderSignals(headers: anthropicObject, now: now).tokens.limit ?? 0)
        }
        _ = measure("classify 429 rate_limit_exceeded") {
            ErrorClassifier.classify(status: 429, errorType: "rate_limit_exceeded") == .quotaExhausted ? 1 : 0
        }
        _ = measure("RFC3339.parse") { RFC3339.parse("2026-11-22T03:00:00.123Z") != nil ? 1 : 0 }
        _ = measure("GoDuration.parse") { GoDuration.parse("2m59.56s") != nil ? 1 : 0 }
    }
}
