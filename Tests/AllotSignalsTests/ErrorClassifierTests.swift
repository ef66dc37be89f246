import AllotSignals
import Testing

/// One row of the classifier table: the rule it exercises (numbered as in `ErrorClassifier`'s doc comment).
struct ClassifierCase: Sendable, CustomTestStringConvertible {
    var rule: Int
    var status: Int?
    var errorType: String?
    var body: String?
    var outcome: Outcome

    var testDescription: String {
        "rule \(rule): \(status.map(String.init) ?? "no status") \(errorType ?? "") \(body?.prefix(40) ?? "")"
    }

    init(_ rule: Int, _ status: Int?, _ errorType: String? = nil, body: String? = nil, then outcome: Outcome) {
        self.rule = rule
        self.status = status
        self.errorType = errorType
        self.body = body
        self.outcome = outcome
    }
}

@Suite("Error classifier")
struct ErrorClassifierTests {
    static let anthropicSpendBody =
        #"{"type":"error","error":{"type":"rate_limit_error","message":"Monthly spend limit reached","#
        + #""details":{"error_code":"enforced_spend_limit_reached"}}}"#

    static let table: [ClassifierCase] = [
        // 1. spend-cap types win over everything, including 429 and 200
        .init(1, 429, "insufficient_quota", then: .spendCap),
        .init(1, 429, "enforced_spend_limit_reached", then: .spendCap),
        .init(1, 429, "rate_limit_error", body: anthropicSpendBody, then: .spendCap),
        .init(1, 429, nil, body: anthropicSpendBody, then: .spendCap),
        .init(1, 400, "billing_hard_limit_reached", then: .spendCap),
        .init(1, 403, "billing_not_active", then: .spendCap),
        .init(1, 402, "billing_error", then: .spendCap),
        .init(1, 429, "INSUFFICIENT_QUOTA", then: .spendCap),
        .init(1, 429, " insufficient_quota ", then: .spendCap),
        .init(1, 429, body: #"{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}"#, then: .spendCap),
        // 2. overload types
        .init(2, 529, "overloaded_error", then: .overloaded),
        .init(2, 429, "overloaded", then: .overloaded),
        .init(2, 200, "overloaded_error", then: .overloaded),
        .init(2, nil, "overloaded_error", then: .overloaded),
        .init(
            2, 500, body: #"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            then: .overloaded),
        .init(2, 503, "UNAVAILABLE", then: .overloaded),
        .init(2, 500, "engine_overloaded", then: .overloaded),
        // 3. timeout types
        .init(3, nil, "timeout", then: .timeout),
        .init(3, 500, "timeout_error", then: .timeout),
        .init(3, 200, "DEADLINE_EXCEEDED", then: .timeout),
        .init(3, nil, "ETIMEDOUT", then: .timeout),
        .init(3, 502, "gateway_timeout", then: .timeout),
        // 4. quota types at any status
        .init(4, 429, "rate_limit_exceeded", then: .quotaExhausted),
        .init(4, 429, "rate_limit_error", then: .quotaExhausted),
        .init(4, 429, "RESOURCE_EXHAUSTED", then: .quotaExhausted),
        .init(4, 403, "rateLimitExceeded", then: .quotaExhausted),
        .init(4, nil, "rate_limited", then: .quotaExhausted),
        .init(4, 400, body: #"{"error":{"code":"rate_limit_exceeded","type":"requests"}}"#, then: .quotaExhausted),
        // 5. no response at all
        .init(5, nil, then: .serverError),
        .init(5, nil, "connection_refused", then: .serverError),
        // 6. a stream that failed after its 200
        .init(6, 200, "api_error", then: .serverError),
        .init(6, 200, body: #"{"type":"error","error":{"type":"api_error","message":"Internal"}}"#, then: .serverError),
        .init(6, 206, "server_error", then: .serverError),
        // 7. other 2xx
        .init(7, 200, then: .ok),
        .init(7, 201, "something_new", then: .ok),
        .init(7, 299, then: .ok),
        // 8. any other 429
        .init(8, 429, then: .quotaExhausted),
        .init(8, 429, "tokens", then: .quotaExhausted),
        .init(8, 429, "some_new_code", then: .quotaExhausted),
        .init(8, 429, body: "<html>Too Many Requests</html>", then: .quotaExhausted),
        // 9. 503 and 529
        .init(9, 503, then: .overloaded),
        .init(9, 529, then: .overloaded),
        .init(9, 503, "server_error", then: .overloaded),
        // 10. timeouts by status
        .init(10, 408, then: .timeout),
        .init(10, 504, then: .timeout),
        .init(10, 524, then: .timeout),
        // 11. account-level refusals
        .init(11, 401, "authentication_error", then: .spendCap),
        .init(11, 402, then: .spendCap),
        .init(11, 403, "permission_error", then: .spendCap),
        // 12. 4xx whose message is about billing
        .init(
            12, 400, "invalid_request_error",
            body:
                #"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low "#
                + #"to access the Anthropic API."}}"#,
            then: .spendCap),
        .init(
            12, 400,
            body: #"{"error":{"type":"invalid_request_error","message":"You have reached your specified workspace "#
                + #"API usage limits."}}"#,
            then: .spendCap),
        .init(12, 404, body: "Billing account disabled", then: .spendCap),
        // 13. other 4xx: the caller's fault, the upstream is fine
        .init(13, 400, "invalid_request_error", then: .ok),
        .init(13, 400, "context_length_exceeded", then: .ok),
        .init(13, 404, "not_found_error", then: .ok),
        .init(13, 413, "request_too_large", then: .ok),
        .init(13, 422, then: .ok),
        .init(13, 409, "conflict_error", then: .ok),
        .init(13, 400, body: #"{"error":{"message":"Invalid 'messages': empty array"}}"#, then: .ok),
        // 14. other 5xx
        .init(14, 500, then: .serverError),
        .init(14, 500, "api_error", then: .serverError),
        .init(14, 502, then: .serverError),
        .init(14, 599, then: .serverError),
        // 15. statuses an attempt cannot legitimately end with
        .init(15, 100, then: .serverError),
        .init(15, 302, then: .serverError),
        .init(15, 0, then: .serverError),
        .init(15, 600, then: .serverError),
        .init(15, -1, then: .serverError),
    ]

    @Test("the decision table, rule by rule", arguments: table)
    func classify(_ row: ClassifierCase) {
        let body = row.body.map { ProviderErrorBody(text: $0) }
        #expect(ErrorClassifier.classify(status: row.status, errorType: row.errorType, body: body) == row.outcome)
    }

    @Test("every documented rule has at least one row")
    func everyRuleCovered() {
        #expect(Set(Self.table.map(\.rule)) == Set(1...15))
    }

    @Test("the classifier never produces the gateway-only outcomes; raw values are the SPEC's strings")
    func outcomes() {
        #expect(!Self.table.contains { $0.outcome == .deniedLocal || $0.outcome == .queued })
        #expect(
            Outcome.allCases.map(\.rawValue) == [
                "ok", "quota_exhausted", "spend_cap", "overloaded", "server_error", "timeout", "denied_local", "queued",
            ])
        #expect(Outcome.allCases.filter { !$0.reachedUpstream } == [.deniedLocal, .queued])
        #expect(Outcome(rawValue: "Quota_Exhausted") == nil)
    }

    @Test("a hostile body or type never crashes and falls back to the status")
    func hostile() {
        let long = String(repeating: "x", count: 100_000)
        #expect(ErrorClassifier.classify(status: 400, errorType: long, body: .text(long + "billing")) == .ok)
        #expect(ErrorClassifier.classify(status: 500, errorType: "", body: .text("")) == .serverError)
        #expect(ErrorClassifier.classify(status: Int.max, errorType: "\u{0}") == .serverError)
        #expect(
            ErrorClassifier.classify(status: 429, body: ProviderErrorBody(bytes: [0xFF, 0x00, 0x7B])) == .quotaExhausted
        )
    }
}
