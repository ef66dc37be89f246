/// Classifies an upstream attempt into an ``Outcome`` from its status, the provider's error type and body
/// (SPEC §4 "Error classes"). The classes drive different responses: quota → capacity estimate; spend cap →
/// alert, no capacity change; overload → health state and circuit breaker; server error and timeout → health.
///
/// Rules, first match wins. "Type" means any of: the `errorType` given (telemetry's `error_type`, verbatim)
/// and the codes named in the body (``ProviderErrorBody/errorCodes``); types are compared case-insensitively.
///
/// 1. A spend-cap type — `insufficient_quota`, `enforced_spend_limit_reached`, `billing_hard_limit_reached`,
///    `billing_not_active`, `billing_error`, `payment_required` → **`spend_cap`**. A cap or billing state:
///    retrying cannot help. OpenAI and Anthropic send these with a 429, so they must win over the status.
/// 2. An overload type — `overloaded`, `overloaded_error`, `engine_overloaded`, `unavailable`,
///    `service_unavailable` → **`overloaded`**. Anthropic also sends `overloaded_error` mid-stream after a 200.
/// 3. A timeout type — `timeout`, `timeout_error`, `request_timeout`, `timed_out`, `deadline_exceeded`,
///    `gateway_timeout`, `etimedout`, `read_timeout`, `connect_timeout` → **`timeout`**.
/// 4. A quota type — `rate_limit_exceeded`, `rate_limit_error`, `resource_exhausted`, `rate_limited`,
///    `too_many_requests`, `ratelimitexceeded` → **`quota_exhausted`**, whatever the status (Google's older
///    APIs send `rateLimitExceeded` with a 403).
/// 5. No status (no response at all) → **`server_error`**: a connection failure without a timeout type.
/// 6. 2xx with a server-error type (`api_error`, `server_error`, `internal_error`, `internal`,
///    `internal_server_error`) → **`server_error`**: a stream that failed after its 200.
/// 7. Other 2xx → **`ok`**.
/// 8. 429 → **`quota_exhausted`**. HTTP 429 means rate limited; `remaining = 0` or rate-limit headers
///    confirm it but are not required (a plain 429 from a proxy is still a rate limit), which is why this
///    function needs no parsed headers.
/// 9. 503, 529 → **`overloaded`**: 529 is Anthropic's overload status; 503 is "unavailable, try later".
/// 10. 408, 504, 524 → **`timeout`**: request timeout, gateway timeout, Cloudflare's origin timeout.
/// 11. 401, 402, 403 → **`spend_cap`**. The account cannot use the pool (key revoked, payment required,
///     permission withdrawn): as with a spend cap, retrying cannot help and an operator must act, and it must
///     not look like lost capacity.
/// 12. Other 4xx whose message mentions billing ("credit balance", "spend limit", "spending limit",
///     "usage limit", "billing") → **`spend_cap`**: Anthropic reports an empty credit balance and workspace
///     spend limits as 400 `invalid_request_error`.
/// 13. Other 4xx → **`ok`**. The caller's request was at fault (bad request, context too long, unknown
///     model); the upstream was healthy and answered. Counting it as a failure would let one tenant's
///     malformed requests degrade the pool's health for every tenant, and it is no evidence about capacity.
/// 14. Other 5xx → **`server_error`**.
/// 15. Anything else (1xx, 3xx, out of range) → **`server_error`**: an LLM API never legitimately ends an
///     attempt that way.
///
/// `denied_local` and `queued` are never produced: only gateways set them.
public enum ErrorClassifier {
    /// The outcome of one upstream attempt.
    ///
    /// - Parameters:
    ///   - status: the HTTP status, or nil when no response arrived.
    ///   - errorType: the provider's error code or type, verbatim (telemetry's `error_type`).
    ///   - body: the error body, when available.
    public static func classify(status: Int?, errorType: String? = nil, body: ProviderErrorBody? = nil) -> Outcome {
        // The body's codes are only extracted when there is a body: the telemetry path has just `error_type`.
        let bodyCodes = body?.errorCodes ?? []
        if errorType != nil || !bodyCodes.isEmpty {
            let types = TypeNames(errorType: errorType, bodyCodes: bodyCodes)
            if types.match(spendCapTypes) { return .spendCap }
            if types.match(overloadTypes) { return .overloaded }
            if types.match(timeoutTypes) { return .timeout }
            if types.match(quotaTypes) { return .quotaExhausted }
        }
        guard let status else { return .serverError }
        switch status {
        case 200...299:
            return TypeNames(errorType: errorType, bodyCodes: bodyCodes).match(serverErrorTypes) ? .serverError : .ok
        case 429:
            return .quotaExhausted
        case 503, 529:
            return .overloaded
        case 408, 504, 524:
            return .timeout
        case 401, 402, 403:
            return .spendCap
        case 400...499:
            if let message = body?.message, mentionsBilling(message) { return .spendCap }
            return .ok
        case 500...599:
            return .serverError
        default:
            return .serverError
        }
    }

    private static func list(_ names: [String]) -> [[UInt8]] { names.map { Array($0.utf8) } }

    static let spendCapTypes = list([
        "insufficient_quota", "enforced_spend_limit_reached", "billing_hard_limit_reached", "billing_not_active",
        "billing_error", "payment_required",
    ])
    static let overloadTypes = list([
        "overloaded", "overloaded_error", "engine_overloaded", "unavailable", "service_unavailable",
    ])
    static let timeoutTypes = list([
        "timeout", "timeout_error", "request_timeout", "timed_out", "deadline_exceeded", "gateway_timeout",
        "etimedout", "read_timeout", "connect_timeout",
    ])
    static let quotaTypes = list([
        "rate_limit_exceeded", "rate_limit_error", "resource_exhausted", "rate_limited", "too_many_requests",
        "ratelimitexceeded",
    ])
    static let serverErrorTypes = list([
        "api_error", "server_error", "internal_error", "internal", "internal_server_error",
    ])
    static let billingPhrases = list([
        "credit balance", "spend limit", "spending limit", "usage limit", "billing",
    ])

    /// The error type given plus the body's codes, matched without building an array of them.
    private struct TypeNames {
        var errorType: String?
        var bodyCodes: [String]

        func match(_ names: [[UInt8]]) -> Bool {
            if let errorType, Self.matches(errorType, names) { return true }
            return bodyCodes.contains { Self.matches($0, names) }
        }

        private static func matches(_ type: String, _ names: [[UInt8]]) -> Bool {
            ByteScan.withBytes(type) { bytes in
                let trimmed = ByteScan.trimmed(bytes)
                return names.contains { ByteScan.equalsLowercase(trimmed, $0) }
            }
        }
    }

    private static func mentionsBilling(_ message: String) -> Bool {
        ByteScan.withBytes(message) { bytes in
            let limited = UnsafeBufferPointer(rebasing: bytes.prefix(4_096))  // bound the work on hostile bodies
            return billingPhrases.contains { ByteScan.containsLowercase(limited, $0) }
        }
    }
}
