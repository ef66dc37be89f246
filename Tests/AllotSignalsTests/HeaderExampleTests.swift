import AllotJSON
import AllotSignals
import AllotTime
import Testing

/// A response shape taken from provider documentation and public reports, with what must be read from it.
struct HeaderExample: Sendable, CustomTestStringConvertible {
    var name: String
    var headers: [String: String]
    var body: String? = nil
    var family: HeaderFamily
    var requests = RateLimitDimension()
    var tokens = RateLimitDimension()
    var inputTokens = RateLimitDimension()
    var outputTokens = RateLimitDimension()
    var utilization: Double? = nil
    var retryAfter: Double? = nil
    var unparseable: [String] = []

    var testDescription: String { name }

    static let now = 1_795_316_400.0  // 2026-11-22T03:00:00Z
}

extension HeaderExample {
    static let all: [HeaderExample] = [
        HeaderExample(
            name: "OpenAI chat completion (community report, usage-based extras ignored)",
            headers: [
                "x-ratelimit-limit-requests": "5000", "x-ratelimit-limit-tokens": "160000",
                "x-ratelimit-limit-tokens_usage_based": "160000", "x-ratelimit-remaining-requests": "4999",
                "x-ratelimit-remaining-tokens": "159976", "x-ratelimit-remaining-tokens_usage_based": "159976",
                "x-ratelimit-reset-requests": "12ms", "x-ratelimit-reset-tokens": "9ms",
                "x-ratelimit-reset-tokens_usage_based": "9ms", "openai-processing-ms": "412",
                "x-request-id": "req_123",
            ],
            family: .openai,
            requests: .init(limit: 5_000, remaining: 4_999, reset: 0.012),
            tokens: .init(limit: 160_000, remaining: 159_976, reset: 0.009)),
        HeaderExample(
            name: "Groq (OpenAI-style names; requests are per day, tokens per minute)",
            headers: [
                "X-RateLimit-Limit-Requests": "14400", "X-RateLimit-Limit-Tokens": "18000",
                "X-RateLimit-Remaining-Requests": "14370", "X-RateLimit-Remaining-Tokens": "17997",
                "X-RateLimit-Reset-Requests": "2m59.56s", "X-RateLimit-Reset-Tokens": "7.66s", "Retry-After": "2",
            ],
            family: .openai,
            requests: .init(limit: 14_400, remaining: 14_370, reset: 179.56),
            tokens: .init(limit: 18_000, remaining: 17_997, reset: 7.66), retryAfter: 2),
        HeaderExample(
            name: "Anthropic with a reset already in the past (clamped to 0) and priority headers ignored",
            headers: [
                "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49",
                "anthropic-ratelimit-requests-reset": "2026-11-22T02:59:59Z",
                "anthropic-ratelimit-input-tokens-limit": "40000",
                "anthropic-ratelimit-input-tokens-remaining": "39000",
                "anthropic-ratelimit-input-tokens-reset": "2026-11-22T03:00:01.5Z",
                "anthropic-ratelimit-output-tokens-limit": "8000",
                "anthropic-ratelimit-output-tokens-remaining": "8000",
                "anthropic-ratelimit-output-tokens-reset": "2026-11-22T03:00:00Z",
                "anthropic-priority-input-tokens-limit": "10000", "request-id": "req_01",
            ],
            family: .anthropic,
            requests: .init(limit: 50, remaining: 49, reset: 0),
            inputTokens: .init(limit: 40_000, remaining: 39_000, reset: 1.5),
            outputTokens: .init(limit: 8_000, remaining: 8_000, reset: 0)),
        HeaderExample(
            name: "Anthropic 429 with retry-after and an offset reset instant",
            headers: [
                "Anthropic-RateLimit-Tokens-Remaining": "0",
                "Anthropic-RateLimit-Tokens-Reset": "2026-11-22T04:00:45+01:00", "Retry-After": "45",
            ],
            family: .anthropic, tokens: .init(remaining: 0, reset: 45), retryAfter: 45),
        HeaderExample(
            name: "Azure OpenAI pay-as-you-go (remaining only)",
            headers: [
                "x-ratelimit-remaining-requests": "19", "x-ratelimit-remaining-tokens": "19913",
                "apim-request-id": "0a1b", "x-ms-region": "East US",
            ],
            family: .azure, requests: .init(remaining: 19), tokens: .init(remaining: 19_913)),
        HeaderExample(
            name: "Azure OpenAI provisioned 429",
            headers: [
                "azure-openai-deployment-utilization": "100%", "retry-after-ms": "1250", "retry-after": "2",
                "x-ratelimit-limit-requests": "-1", "x-ratelimit-reset-requests": "-1",
            ],
            family: .azure, utilization: 1, retryAfter: 1.25),
        HeaderExample(
            name: "Azure utilisation with whitespace and a fraction",
            headers: ["azure-openai-deployment-utilization": " 3.25% "], family: .azure, utilization: 0.0325),
        HeaderExample(
            name: "Retry-After as an HTTP date in the past clamps to 0",
            headers: ["retry-after": "Sun, 22 Nov 2026 02:59:00 GMT"], family: .generic, retryAfter: 0),
        HeaderExample(
            name: "Retry-After in the obsolete RFC 850 and asctime forms",
            headers: ["Retry-After": "Sunday, 22-Nov-26 03:01:00 GMT"], family: .generic, retryAfter: 60),
        HeaderExample(
            name: "asctime Retry-After",
            headers: ["retry-after": "Sun Nov 22 03:00:05 2026"], family: .generic, retryAfter: 5),
        HeaderExample(
            name: "unreadable retry-after-ms falls back to retry-after and is counted",
            headers: ["retry-after-ms": "soon", "retry-after": "3"], family: .generic, retryAfter: 3,
            unparseable: ["retry-after-ms"]),
        HeaderExample(
            name: "Gemini free tier: three violations without quota values (RPD, RPM, input TPM)",
            headers: [:],
            body: """
                {"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED",
                "details":[{"@type":"type.googleapis.com/google.rpc.Help","links":[]},
                {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[
                {"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests",
                 "quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"},
                {"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests",
                 "quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"},
                {"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count",
                 "quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier"}]},
                {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"10s"}]}}
                """,
            family: .google, retryAfter: 10),
        HeaderExample(
            name: "Gemini per-day request quota with a value, wrapped in an array (Vertex streaming)",
            headers: [:],
            body: """
                [{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[
                {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[
                {"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests",
                 "quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaValue":"250"}]},
                {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"8.941621227s"}]}}]
                """,
            family: .google, requests: .init(limit: 250, window: 86_400), retryAfter: 8.941621227),
        HeaderExample(
            name: "Gemini: the most restrictive request quota binds; tokens are read too; headers win for retry",
            headers: ["retry-after": "30"],
            body: """
                {"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[
                {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[
                {"quotaId":"GenerateRequestsPerMinutePerProjectPerModel","quotaValue":"2000"},
                {"quotaId":"GenerateRequestsPerDayPerProjectPerModel","quotaValue":"10000"},
                {"quotaMetric":"x/input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute",
                 "quotaValue":1000000}]},
                {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"5s"}]}}
                """,
            family: .google, requests: .init(limit: 10_000, window: 86_400),
            tokens: .init(limit: 1_000_000, window: 60), retryAfter: 30),
        HeaderExample(
            name: "Gemini body with unreadable quota value and retry delay",
            headers: [:],
            body: """
                {"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[
                {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaValue":"lots"}]},
                {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"later"}]}}
                """,
            family: .google, unparseable: ["quotaValue", "retryDelay"]),
        HeaderExample(
            name: "OpenAI error body is not Google",
            headers: [:],
            body: """
                {"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,
                "code":"insufficient_quota"}}
                """,
            family: .generic),
        HeaderExample(
            name: "no headers at all", headers: ["content-type": "application/json"], family: .generic),
    ]
}

@Suite("Header examples")
struct HeaderExampleTests {
    @Test("real-world header sets parse to exactly the expected signals", arguments: HeaderExample.all)
    func example(_ example: HeaderExample) {
        let signals = ProviderSignals(
            headers: example.headers, body: example.body.map { ProviderErrorBody(text: $0) }, now: HeaderExample.now)
        #expect(signals.family == example.family)
        expectDimension(signals.requests, example.requests, "requests")
        expectDimension(signals.tokens, example.tokens, "tokens")
        expectDimension(signals.inputTokens, example.inputTokens, "input tokens")
        expectDimension(signals.outputTokens, example.outputTokens, "output tokens")
        expectClose(signals.utilization, example.utilization, "utilization")
        expectClose(signals.retryAfter, example.retryAfter, "retry after")
        #expect(signals.unparseableHeaders.sorted() == example.unparseable.sorted())
    }

    private func expectDimension(_ actual: RateLimitDimension, _ expected: RateLimitDimension, _ label: String) {
        #expect(actual.limit == expected.limit, "\(label) limit")
        #expect(actual.remaining == expected.remaining, "\(label) remaining")
        #expect(actual.window == expected.window, "\(label) window")
        expectClose(actual.reset, expected.reset, "\(label) reset")
    }

    private func expectClose(_ actual: Double?, _ expected: Double?, _ label: String) {
        switch (actual, expected) {
        case (nil, nil): break
        case (let a?, let e?): #expect(abs(a - e) < 1e-9, "\(label): \(a) ≠ \(e)")
        default: Issue.record("\(label): \(String(describing: actual)) ≠ \(String(describing: expected))")
        }
    }

    @Test("Google violations are all kept with their dimension and window")
    func googleViolations() throws {
        let example = try #require(HeaderExample.all.first { $0.name.hasPrefix("Gemini free tier") })
        let signals = ProviderSignals(
            headers: [:], body: example.body.map { ProviderErrorBody(text: $0) }, now: HeaderExample.now)
        #expect(signals.quotaViolations.map(\.dimension) == [.requests, .requests, .tokens])
        #expect(signals.quotaViolations.map(\.window) == [86_400, 60, 60])
        #expect(signals.quotaViolations.allSatisfy { $0.value == nil })
        #expect(signals.quotaViolations[0].id == "GenerateRequestsPerDayPerProjectPerModel-FreeTier")
        #expect(
            signals.quotaViolations[2].metric
                == "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count")
        #expect(signals.hasRateLimitValues)
    }

    @Test("header names match case-insensitively and values lose surrounding spaces and tabs only")
    func namesAndWhitespace() {
        let signals = ProviderSignals(
            headers: ["X-RATELIMIT-LIMIT-REQUESTS": " 60\t", "x-RateLimit-Remaining-Requests": "\t0 "],
            now: HeaderExample.now)
        #expect(signals.requests.limit == 60)
        #expect(signals.requests.remaining == 0)
        #expect(signals.isExhausted)
        #expect(signals.unparseableCount == 0)
    }

    @Test("ordered header fields: the last readable value of a repeated name wins")
    func headerFields() {
        let signals = ProviderSignals(
            headerFields: [("retry-after", "5"), ("Retry-After", "7"), ("x-ratelimit-limit-tokens", "1000")],
            now: HeaderExample.now)
        #expect(signals.retryAfter == 7)
        #expect(signals.tokens.limit == 1_000)
        #expect(signals.family == .openai)
    }

    @Test("a telemetry headers object: numbers are read as their text, other JSON types are unparseable")
    func jsonHeaders() throws {
        let headers = try #require(
            try JSON.parse(
                #"{"x-ratelimit-limit-requests": 60, "x-ratelimit-remaining-requests": true, "#
                    + #""retry-after": 1.5, "anthropic-ratelimit-tokens-limit": null, "x-other": [1]}"#
            ).objectValue)
        let signals = ProviderSignals(headers: headers, now: HeaderExample.now)
        #expect(signals.requests.limit == 60)
        #expect(signals.requests.remaining == nil)
        #expect(signals.retryAfter == 1.5)
        #expect(signals.tokens.limit == nil)
        #expect(
            signals.unparseableHeaders.sorted() == [
                "anthropic-ratelimit-tokens-limit", "x-ratelimit-remaining-requests",
            ])
        #expect(signals.family == .openai)  // the null anthropic value was unreadable, not seen
    }

    @Test("nil is never 0: an empty response says nothing")
    func emptyMeansUnknown() {
        let signals = ProviderSignals(headers: [:], now: HeaderExample.now)
        #expect(signals == ProviderSignals())
        #expect(!signals.isExhausted)
        #expect(!signals.hasRateLimitValues)
        #expect(signals[.requests].isEmpty && signals[.tokens].isEmpty)
    }

    @Test("body helpers: error codes in order of specificity, and the message")
    func bodyCodes() {
        let anthropicSpend = ProviderErrorBody(
            text: #"{"type":"error","error":{"type":"rate_limit_error","message":"spend limit","#
                + #""details":{"error_code":"enforced_spend_limit_reached"}}}"#)
        #expect(anthropicSpend.errorCodes == ["enforced_spend_limit_reached", "rate_limit_error"])
        #expect(anthropicSpend.message == "spend limit")
        let openAI = ProviderErrorBody(
            text: #"{"error":{"message":"Rate limit reached","type":"tokens","code":"rate_limit_exceeded"}}"#)
        #expect(openAI.errorCodes == ["rate_limit_exceeded", "tokens"])
        let google = ProviderErrorBody(text: #"[{"error":{"code":503,"status":"UNAVAILABLE","message":"busy"}}]"#)
        #expect(google.errorCodes == ["UNAVAILABLE"])
        #expect(google.message == "busy")
        let flat = ProviderErrorBody(bytes: Array(#"{"object":"error","type":"BadRequestError","code":400}"#.utf8))
        #expect(flat.errorCodes == ["BadRequestError"])
        let html = ProviderErrorBody(bytes: Array("<html>502 Bad Gateway</html>".utf8))
        #expect(html == .text("<html>502 Bad Gateway</html>"))
        #expect(html.errorCodes.isEmpty)
        #expect(html.message == "<html>502 Bad Gateway</html>")
        #expect(ProviderErrorBody(bytes: [0xFF, 0xFE]).errorCodes.isEmpty)
    }
}
