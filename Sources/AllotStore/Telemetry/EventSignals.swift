import AllotSignals

/// The rate-limit signals of one telemetry event, as stored in its `events` row (SPEC section 4
/// "Provider headers": the parsed limits, remaining values and resets are stored with the event).
///
/// A flat, compact copy of ``AllotSignals/ProviderSignals``: durations become integer milliseconds
/// (SPEC section 3 stores times as INTEGER ms), Google's list of quota violations is reduced to the
/// binding limit and window per dimension (what `ProviderSignals` already chose), and the names of
/// unparseable headers become a count. `nil` always means "the provider did not say" and must never
/// be read as 0: a missing `remaining` is not an exhausted quota.
public struct EventSignals: Sendable, Hashable {
    /// The header convention seen; nil when the event carried no `headers` and no `error_body`.
    public var family: HeaderFamily?
    public var limitRequests: Int64?
    public var remainingRequests: Int64?
    /// Milliseconds from the response until the request limit is fully replenished.
    public var resetRequestsMs: Int64?
    /// The request limit's window when the signal said so (Google `…PerDay…`), in ms; nil means the
    /// pool's configured window (`HeaderWindows`, per minute by default).
    public var windowRequestsMs: Int64?
    public var limitTokens: Int64?
    public var remainingTokens: Int64?
    /// Milliseconds from the response until the token limit is fully replenished.
    public var resetTokensMs: Int64?
    /// The token limit's window when the signal said so, in ms.
    public var windowTokensMs: Int64?
    /// Anthropic's separate input-token limit and remainder.
    public var limitInputTokens: Int64?
    public var remainingInputTokens: Int64?
    /// Anthropic's separate output-token limit and remainder.
    public var limitOutputTokens: Int64?
    public var remainingOutputTokens: Int64?
    /// How long the provider asked the caller to wait (`retry-after-ms` before `retry-after`, or
    /// Google's `retryDelay`), in ms.
    public var retryAfterMs: Int64?
    /// Azure's deployment utilisation, 0…1.
    public var utilization: Double?

    public init(
        family: HeaderFamily? = nil, limitRequests: Int64? = nil, remainingRequests: Int64? = nil,
        resetRequestsMs: Int64? = nil, windowRequestsMs: Int64? = nil, limitTokens: Int64? = nil,
        remainingTokens: Int64? = nil, resetTokensMs: Int64? = nil, windowTokensMs: Int64? = nil,
        limitInputTokens: Int64? = nil, remainingInputTokens: Int64? = nil, limitOutputTokens: Int64? = nil,
        remainingOutputTokens: Int64? = nil, retryAfterMs: Int64? = nil, utilization: Double? = nil
    ) {
        self.family = family
        self.limitRequests = limitRequests
        self.remainingRequests = remainingRequests
        self.resetRequestsMs = resetRequestsMs
        self.windowRequestsMs = windowRequestsMs
        self.limitTokens = limitTokens
        self.remainingTokens = remainingTokens
        self.resetTokensMs = resetTokensMs
        self.windowTokensMs = windowTokensMs
        self.limitInputTokens = limitInputTokens
        self.remainingInputTokens = remainingInputTokens
        self.limitOutputTokens = limitOutputTokens
        self.remainingOutputTokens = remainingOutputTokens
        self.retryAfterMs = retryAfterMs
        self.utilization = utilization
    }

    /// The stored form of `signals`.
    public init(_ signals: ProviderSignals) {
        self.init(
            family: signals.family,
            limitRequests: signals.requests.limit,
            remainingRequests: signals.requests.remaining,
            resetRequestsMs: Self.milliseconds(signals.requests.reset),
            windowRequestsMs: Self.milliseconds(signals.requests.window),
            limitTokens: signals.tokens.limit,
            remainingTokens: signals.tokens.remaining,
            resetTokensMs: Self.milliseconds(signals.tokens.reset),
            windowTokensMs: Self.milliseconds(signals.tokens.window),
            limitInputTokens: signals.inputTokens.limit,
            remainingInputTokens: signals.inputTokens.remaining,
            limitOutputTokens: signals.outputTokens.limit,
            remainingOutputTokens: signals.outputTokens.remaining,
            retryAfterMs: Self.milliseconds(signals.retryAfter),
            utilization: signals.utilization
        )
    }

    /// True when the provider said anything at all about its limits.
    public var isEmpty: Bool { self == EventSignals(family: family) }

    /// Seconds → whole milliseconds (rounded), clamped to a sane range: a header claiming a reset
    /// 300 years away must not overflow, and no provider window exceeds a year.
    static func milliseconds(_ seconds: Double?) -> Int64? {
        guard let seconds, seconds.isFinite else { return nil }
        let bounded = min(max(seconds, 0), 366 * 86_400)
        return Int64((bounded * 1_000).rounded())
    }
}
