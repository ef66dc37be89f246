/// Which provider convention a response's rate-limit signals follow (SPEC §4 "Provider headers").
public enum HeaderFamily: String, Sendable, Hashable, CaseIterable, Codable {
    /// `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, resets as Go durations.
    case openai
    /// `anthropic-ratelimit-*`, resets as RFC 3339 instants.
    case anthropic
    /// OpenAI's names plus `azure-openai-deployment-utilization`, and `-1` for "unknown".
    case azure
    /// No headers: a `RESOURCE_EXHAUSTED` error body with `RetryInfo` and `QuotaFailure` details.
    case google
    /// None of the above recognised (perhaps only `retry-after`).
    case generic
}

/// What a provider said about one rate-limited dimension (requests, tokens, …) in one response.
///
/// Every field is optional: `nil` means the response did not say (or said `-1`, Azure's "unknown", or said
/// something unparseable) and must never be read as 0 — a missing `remaining` is not an exhausted quota.
public struct RateLimitDimension: Sendable, Hashable {
    /// The most this dimension allows per window (header `*-limit*`, Google `quotaValue`).
    public var limit: Int64?
    /// What is left of `limit` in the current window.
    public var remaining: Int64?
    /// Seconds from the response until the dimension is fully replenished (OpenAI's meaning; Anthropic's
    /// absolute reset instant is converted relative to `now` and clamped at 0).
    public var reset: Double?
    /// Seconds the limit counts over, when the signal itself says so (Google's `quotaId` `…PerMinute…`,
    /// `…PerDay…`); nil means "the pool's configured ``HeaderWindows`` apply".
    public var window: Double?

    public init(limit: Int64? = nil, remaining: Int64? = nil, reset: Double? = nil, window: Double? = nil) {
        self.limit = limit
        self.remaining = remaining
        self.reset = reset
        self.window = window
    }

    /// True when nothing at all was learnt about this dimension.
    public var isEmpty: Bool { limit == nil && remaining == nil && reset == nil }
}

/// One violated quota from a Google `google.rpc.QuotaFailure` error detail.
public struct QuotaViolation: Sendable, Hashable {
    /// e.g. `generativelanguage.googleapis.com/generate_content_free_tier_requests`.
    public var metric: String?
    /// e.g. `GenerateRequestsPerMinutePerProjectPerModel-FreeTier`.
    public var id: String?
    /// The quota's limit (`quotaValue`, sent as a decimal string), if given and parseable.
    public var value: Int64?
    /// Which dimension the quota counts: tokens when the metric or id mentions tokens, else requests.
    public var dimension: QuotaDimension
    /// The window read from the quota id (`PerSecond`, `PerMinute`, `PerHour`, `PerDay`), in seconds.
    public var window: Double?

    public init(metric: String?, id: String?, value: Int64?, dimension: QuotaDimension, window: Double?) {
        self.metric = metric
        self.id = id
        self.value = value
        self.dimension = dimension
        self.window = window
    }
}

/// The two throughput dimensions the capacity observer tracks separately (SPEC §4).
public enum QuotaDimension: String, Sendable, Hashable, CaseIterable, Codable {
    case requests
    case tokens
}

/// Everything one upstream response said about rate limits, parsed from its headers and (for Google) its
/// error body. See `init(headers:body:now:)` for the rules per provider.
///
/// This one type is shared by the server (telemetry carries the upstream's headers verbatim, SPEC §3) and the
/// gateway-side enforcement library, so it is a plain value, cheap to build, and never fails: values it cannot
/// read are listed in ``unparseableHeaders`` and otherwise ignored (SPEC §4: "counted, never fatal").
public struct ProviderSignals: Sendable, Hashable {
    /// The convention the signals followed.
    public var family: HeaderFamily
    /// Requests per window (RPM by default).
    public var requests: RateLimitDimension
    /// Tokens per window (TPM by default); Anthropic's combined `tokens` headers, OpenAI's `tokens`.
    public var tokens: RateLimitDimension
    /// Anthropic's separate input-token limit.
    public var inputTokens: RateLimitDimension
    /// Anthropic's separate output-token limit.
    public var outputTokens: RateLimitDimension
    /// Azure's deployment utilisation as a fraction 0…1 (`87.5%` → 0.875).
    public var utilization: Double?
    /// Seconds the provider asked the caller to wait before retrying.
    public var retryAfter: Double?
    /// Google's violated quotas, in body order.
    public var quotaViolations: [QuotaViolation]
    /// Names (as received, sorted) of the recognised headers and body fields whose values could not be read.
    public var unparseableHeaders: [String]

    public init(
        family: HeaderFamily = .generic, requests: RateLimitDimension = .init(), tokens: RateLimitDimension = .init(),
        inputTokens: RateLimitDimension = .init(), outputTokens: RateLimitDimension = .init(),
        utilization: Double? = nil, retryAfter: Double? = nil, quotaViolations: [QuotaViolation] = [],
        unparseableHeaders: [String] = []
    ) {
        self.family = family
        self.requests = requests
        self.tokens = tokens
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
        self.utilization = utilization
        self.retryAfter = retryAfter
        self.quotaViolations = quotaViolations
        self.unparseableHeaders = unparseableHeaders
    }

    /// How many recognised values could not be read.
    public var unparseableCount: Int { unparseableHeaders.count }

    /// True when some dimension reported `remaining == 0`: the pool is exhausted until its reset.
    public var isExhausted: Bool {
        requests.remaining == 0 || tokens.remaining == 0 || inputTokens.remaining == 0 || outputTokens.remaining == 0
    }

    /// True when any limit, remaining or reset value was read (a "429 with rate-limit headers", SPEC §4).
    public var hasRateLimitValues: Bool {
        !(requests.isEmpty && tokens.isEmpty && inputTokens.isEmpty && outputTokens.isEmpty)
            || !quotaViolations.isEmpty
    }

    /// The dimension for a ``QuotaDimension``; `tokens` is the combined token dimension.
    public subscript(dimension: QuotaDimension) -> RateLimitDimension {
        switch dimension {
        case .requests: requests
        case .tokens: tokens
        }
    }
}
