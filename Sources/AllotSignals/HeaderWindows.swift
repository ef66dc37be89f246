/// Per-pool setting: how long a window each header dimension counts over (SPEC §4: "Per-pool settings say
/// which window a header family counts (per minute by default; some providers count requests per day)").
///
/// Providers do not say in their headers what window a limit covers. OpenAI, Anthropic and Azure limits are
/// per minute (RPM/TPM) in the common case, but e.g. a free tier's `x-ratelimit-limit-requests: 14400` counts
/// requests per day. The pool's policy states the window so the capacity observer can compare like with like.
/// Input and output tokens use the `tokens` window.
public struct HeaderWindows: Sendable, Hashable, Codable {
    /// Seconds the request limit counts over (60 = RPM).
    public var requests: Double
    /// Seconds the token limits count over (60 = TPM).
    public var tokens: Double

    /// - Parameters:
    ///   - requests: window of the request limit in seconds; default one minute.
    ///   - tokens: window of the token limits in seconds; default one minute.
    public init(requests: Double = 60, tokens: Double = 60) {
        self.requests = requests
        self.tokens = tokens
    }

    /// Both dimensions per minute: the default for every provider.
    public static let perMinute = HeaderWindows()

    /// Window lengths by name for policy files: `second`, `minute`, `hour`, `day` (case-insensitive).
    public static func seconds(named name: String) -> Double? {
        switch name.lowercased() {
        case "second": 1
        case "minute": 60
        case "hour": 3_600
        case "day": 86_400
        default: nil
        }
    }
}

/// A dimension's limit and remaining amount expressed per minute, the unit the capacity observer works in.
public struct PerMinuteRate: Sendable, Hashable {
    /// `limit × 60 / window`.
    public var limit: Double?
    /// `remaining × 60 / window`.
    public var remaining: Double?

    public init(limit: Double? = nil, remaining: Double? = nil) {
        self.limit = limit
        self.remaining = remaining
    }
}

/// All four dimensions of a response, per minute. See ``ProviderSignals/perMinute(_:)``.
public struct PerMinuteRates: Sendable, Hashable {
    public var requests: PerMinuteRate
    public var tokens: PerMinuteRate
    public var inputTokens: PerMinuteRate
    public var outputTokens: PerMinuteRate

    public init(
        requests: PerMinuteRate = .init(), tokens: PerMinuteRate = .init(), inputTokens: PerMinuteRate = .init(),
        outputTokens: PerMinuteRate = .init()
    ) {
        self.requests = requests
        self.tokens = tokens
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
    }
}

extension ProviderSignals {
    /// The parsed limits and remaining amounts as per-minute rates, for the capacity observer (SPEC §4).
    ///
    /// Semantics: a limit `L` counted over a window of `W` seconds is a sustained rate of `L × 60 / W` per
    /// minute, so 14,400 requests per day is 10 RPM. The window is the one the signal itself states (a Google
    /// `quotaId` such as `…PerDay…`) or else the pool's `windows` setting for the dimension. `remaining` is
    /// scaled by the same factor, which keeps `remaining / limit` (the fraction left) intact; it is an average
    /// over the window, not a burst allowance. Resets are durations and are not scaled. Unknown (nil) stays
    /// nil, and a window that is not a positive finite number yields nil rather than a made-up rate.
    public func perMinute(_ windows: HeaderWindows = .perMinute) -> PerMinuteRates {
        PerMinuteRates(
            requests: requests.perMinute(defaultWindow: windows.requests),
            tokens: tokens.perMinute(defaultWindow: windows.tokens),
            inputTokens: inputTokens.perMinute(defaultWindow: windows.tokens),
            outputTokens: outputTokens.perMinute(defaultWindow: windows.tokens))
    }
}

extension RateLimitDimension {
    /// This dimension per minute, using its own ``window`` when the signal stated one, else `defaultWindow`.
    public func perMinute(defaultWindow: Double) -> PerMinuteRate {
        let window = self.window ?? defaultWindow
        guard window.isFinite, window > 0 else { return PerMinuteRate() }
        let factor = 60 / window
        return PerMinuteRate(limit: limit.map { Double($0) * factor }, remaining: remaining.map { Double($0) * factor })
    }
}
