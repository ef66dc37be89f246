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
    public var limitRequests: Int64? {
        get { Self.value(stored.0) }
        set { stored.0 = Self.store(newValue) }
    }
    public var remainingRequests: Int64? {
        get { Self.value(stored.1) }
        set { stored.1 = Self.store(newValue) }
    }
    /// Milliseconds from the response until the request limit is fully replenished.
    public var resetRequestsMs: Int64? {
        get { Self.value(stored.2) }
        set { stored.2 = Self.store(newValue) }
    }
    /// The request limit's window when the signal said so (Google `…PerDay…`), in ms; nil means the
    /// pool's configured window (`HeaderWindows`, per minute by default).
    public var windowRequestsMs: Int64? {
        get { Self.value(stored.3) }
        set { stored.3 = Self.store(newValue) }
    }
    public var limitTokens: Int64? {
        get { Self.value(stored.4) }
        set { stored.4 = Self.store(newValue) }
    }
    public var remainingTokens: Int64? {
        get { Self.value(stored.5) }
        set { stored.5 = Self.store(newValue) }
    }
    /// Milliseconds from the response until the token limit is fully replenished.
    public var resetTokensMs: Int64? {
        get { Self.value(stored.6) }
        set { stored.6 = Self.store(newValue) }
    }
    /// The token limit's window when the signal said so, in ms.
    public var windowTokensMs: Int64? {
        get { Self.value(stored.7) }
        set { stored.7 = Self.store(newValue) }
    }
    /// Anthropic's separate input-token limit and remainder.
    public var limitInputTokens: Int64? {
        get { Self.value(stored.8) }
        set { stored.8 = Self.store(newValue) }
    }
    public var remainingInputTokens: Int64? {
        get { Self.value(stored.9) }
        set { stored.9 = Self.store(newValue) }
    }
    /// Anthropic's separate output-token limit and remainder.
    public var limitOutputTokens: Int64? {
        get { Self.value(stored.10) }
        set { stored.10 = Self.store(newValue) }
    }
    public var remainingOutputTokens: Int64? {
        get { Self.value(stored.11) }
        set { stored.11 = Self.store(newValue) }
    }
    /// How long the provider asked the caller to wait (`retry-after-ms` before `retry-after`, or
    /// Google's `retryDelay`), in ms.
    public var retryAfterMs: Int64? {
        get { Self.value(stored.12) }
        set { stored.12 = Self.store(newValue) }
    }
    /// Azure's deployment utilisation, 0…1.
    public var utilization: Double? {
        get { utilizationBits == Self.absentBits ? nil : Double(bitPattern: utilizationBits) }
        set { utilizationBits = newValue?.bitPattern ?? Self.absentBits }
    }

    // Stored without `Optional`: an `Int64?` takes 16 bytes where an `Int64` takes 8, and events
    // are copied by the thousand on the ingest path. `Int64.min` stands for "not said" (no header
    // value can be it: the parser reads at most 18 digits), and a NaN bit pattern the parser never
    // produces for the utilisation.
    private var stored: (Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64) = (
        .min, .min, .min, .min, .min, .min, .min, .min, .min, .min, .min, .min, .min
    )
    private var utilizationBits: UInt64 = EventSignals.absentBits
    private static let absentBits: UInt64 = .max

    @inline(__always)
    private static func value(_ raw: Int64) -> Int64? { raw == .min ? nil : raw }
    @inline(__always)
    private static func store(_ value: Int64?) -> Int64 { value ?? .min }

    public static func == (lhs: EventSignals, rhs: EventSignals) -> Bool {
        lhs.family == rhs.family && lhs.utilizationBits == rhs.utilizationBits && lhs.stored.0 == rhs.stored.0
            && lhs.stored.1 == rhs.stored.1 && lhs.stored.2 == rhs.stored.2 && lhs.stored.3 == rhs.stored.3
            && lhs.stored.4 == rhs.stored.4 && lhs.stored.5 == rhs.stored.5 && lhs.stored.6 == rhs.stored.6
            && lhs.stored.7 == rhs.stored.7 && lhs.stored.8 == rhs.stored.8 && lhs.stored.9 == rhs.stored.9
            && lhs.stored.10 == rhs.stored.10 && lhs.stored.11 == rhs.stored.11 && lhs.stored.12 == rhs.stored.12
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(family)
        hasher.combine(utilizationBits)
        withUnsafeBytes(of: stored) { hasher.combine(bytes: $0) }
    }

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
