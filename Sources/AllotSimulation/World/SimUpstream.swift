import AllotTime

/// One simulated upstream pool (SPEC 12): a hidden true RPM and TPM capacity, enforced like a
/// provider does — two token buckets refilled continuously at the capacity per minute, each
/// holding at most ``burstSeconds`` of it — answering every attempt with a success, a quota 429
/// or an overload error, provider-style rate-limit headers, and a latency that grows with
/// utilisation (and, before a capacity drop, during the scenario's warning window).
public struct SimUpstream: Sendable {
    /// Seconds of capacity a bucket holds: providers enforce per-minute limits over short
    /// intervals, so a burst of a whole minute's worth is not served at once.
    public static let burstSeconds = 10.0

    public let pool: ScenarioPool
    /// Epoch seconds of simulated time 0 (for RFC 3339 reset headers).
    public let epoch: Double
    private var rng: SimRandom
    private var requests: Double
    private var tokens: Double
    private var lastRefill: Double = 0
    private var step: CapacityStep

    public init(pool: ScenarioPool, epoch: Double, seed: UInt64, stream: UInt64) {
        self.pool = pool
        self.epoch = epoch
        rng = SimRandom(seed: seed, stream: 0x5550_0000 &+ stream)
        step = pool.capacity[0]
        requests = step.rpm / 60 * Self.burstSeconds
        tokens = step.tpm / 60 * Self.burstSeconds
    }

    /// What the upstream answered.
    public struct Response: Sendable, Equatable {
        public enum Kind: Sendable, Equatable { case success, quota, overloaded }
        public var kind: Kind
        public var status: Int
        /// Seconds until the answer arrives.
        public var latency: Double
        /// Rate-limit headers (and `retry-after` on a 429), as the provider would send them.
        public var headers: [(String, String)]
        public var errorType: String?

        public static func == (lhs: Response, rhs: Response) -> Bool {
            lhs.kind == rhs.kind && lhs.status == rhs.status && lhs.latency == rhs.latency
                && lhs.errorType == rhs.errorType && lhs.headers.map(\.0) == rhs.headers.map(\.0)
                && lhs.headers.map(\.1) == rhs.headers.map(\.1)
        }
    }

    /// The hidden true capacity now.
    public func trueCapacity(at time: Double) -> CapacityStep { pool.capacity(at: time) }

    private mutating func refill(to time: Double) {
        let current = pool.capacity(at: time)
        if current != step {
            // A capacity change takes effect at once; the buckets keep what they hold, clamped.
            step = current
        }
        let elapsed = max(0, time - lastRefill)
        lastRefill = max(lastRefill, time)
        requests = min(requestBurst, requests + elapsed * step.rpm / 60)
        tokens = min(tokenBurst, tokens + elapsed * step.tpm / 60)
    }

    private var requestBurst: Double { step.rpm / 60 * Self.burstSeconds }
    private var tokenBurst: Double { Self.tokenBurst(at: step) }

    /// The tokens the bucket holds at `step`: ``burstSeconds`` of its tpm.
    public static func tokenBurst(at step: CapacityStep) -> Double { step.tpm / 60 * burstSeconds }

    /// The latency factor `seconds` into a drop's warning of `warning` seconds: a ramp from ×1 to ×3.
    public static func warningFactor(into seconds: Double, of warning: Double) -> Double {
        1 + 2 * seconds / warning
    }

    /// How drained the buckets are: 0 idle, 1 at capacity.
    public mutating func utilisation(at time: Double) -> Double {
        refill(to: time)
        return max(1 - requests / requestBurst, 1 - tokens / tokenBurst)
    }

    /// One attempt at `time` that would use `promptTokens + completionTokens`.
    public mutating func attempt(at time: Double, promptTokens: Int, completionTokens: Int) -> Response {
        refill(to: time)
        let cost = Double(promptTokens + completionTokens)
        if pool.overload.contains(where: { $0.from <= time && time < $0.to && rng.chance($0.rate) }) {
            return Response(
                kind: .overloaded, status: pool.provider == .anthropic ? 529 : 503,
                latency: pool.latency.baseMs / 1000 * 0.5, headers: [],
                errorType: pool.provider == .anthropic ? "overloaded_error" : "server_error")
        }
        let utilisation = max(1 - requests / requestBurst, 1 - tokens / tokenBurst)
        // A full bucket admits a request however small it is, as it admits a call larger than its tokens: below 6 rpm
        // ten seconds of capacity are less than one request, and a pool of 5 rpm answered every attempt 429 (outside
        // evaluation round 44, F1). The bucket then runs into debt and refills from it, one request per 60 ÷ rpm s.
        let oneRequest = min(1, requestBurst)
        if requests < oneRequest || tokens < min(cost, tokenBurst) {
            let wait = max(
                (oneRequest - requests) / (step.rpm / 60), (min(cost, tokenBurst) - tokens) / (step.tpm / 60), 0.001)
            var headers = rateLimitHeaders(at: time)
            if pool.provider == .anthropic {
                headers.append(("retry-after", String(Int(wait.rounded(.up)))))
            } else {
                headers.append(("retry-after-ms", String(Int((wait * 1000).rounded(.up)))))
            }
            return Response(
                kind: .quota, status: 429, latency: 0.05, headers: headers,
                errorType: pool.provider == .anthropic ? "rate_limit_error" : "rate_limit_exceeded")
        }
        requests -= 1
        tokens -= cost
        return Response(
            kind: .success, status: 200, latency: latency(at: time, utilisation: utilisation, completion: completionTokens),
            headers: rateLimitHeaders(at: time), errorType: nil)
    }

    /// Latency of a successful call: the pool's model, times the utilisation factor above the
    /// knee, times the warning ramp (up to ×3) before a capacity drop.
    mutating func latency(at time: Double, utilisation: Double, completion: Int) -> Double {
        let model = pool.latency
        var factor = 1.0
        if utilisation > model.knee, model.knee < 1 {
            factor += (model.maxFactor - 1) * min(1, (utilisation - model.knee) / (1 - model.knee))
        }
        if pool.latencyWarningSeconds > 0 {
            for (index, next) in pool.capacity.enumerated() where index > 0 {
                let start = next.at - pool.latencyWarningSeconds
                if next.drops(from: pool.capacity[index - 1]), time >= start, time < next.at {
                    factor *= Self.warningFactor(into: time - start, of: pool.latencyWarningSeconds)
                }
            }
        }
        let jitter = 0.85 + 0.3 * rng.unit()
        return (model.baseMs + model.perThousandOutputTokensMs * Double(completion) / 1000) / 1000 * factor * jitter
    }

    /// The provider's rate-limit headers for the state now: limit = the true capacity per minute,
    /// remaining = the bucket's fill scaled to the minute, reset = time until full. Noise, when the
    /// scenario asks for it, jitters the values or drops the headers.
    mutating func rateLimitHeaders(at time: Double) -> [(String, String)] {
        if rng.chance(pool.headerMissing) { return [] }
        func noisy(_ value: Double) -> Int {
            let jitter = pool.headerJitter > 0 ? 1 + pool.headerJitter * (2 * rng.unit() - 1) : 1
            return max(0, Int((value * jitter).rounded(.down)))
        }
        let requestLimit = noisy(step.rpm)
        let requestRemaining = noisy(max(0, requests) / requestBurst * step.rpm)
        let tokenLimit = noisy(step.tpm)
        let tokenRemaining = noisy(max(0, tokens) / tokenBurst * step.tpm)
        let requestReset = (requestBurst - requests) / (step.rpm / 60)
        let tokenReset = (tokenBurst - tokens) / (step.tpm / 60)
        switch pool.provider {
        case .openai:
            return [
                ("x-ratelimit-limit-requests", String(requestLimit)),
                ("x-ratelimit-remaining-requests", String(min(requestRemaining, requestLimit))),
                ("x-ratelimit-reset-requests", Self.goDuration(requestReset)),
                ("x-ratelimit-limit-tokens", String(tokenLimit)),
                ("x-ratelimit-remaining-tokens", String(min(tokenRemaining, tokenLimit))),
                ("x-ratelimit-reset-tokens", Self.goDuration(tokenReset)),
            ]
        case .anthropic:
            return [
                ("anthropic-ratelimit-requests-limit", String(requestLimit)),
                ("anthropic-ratelimit-requests-remaining", String(min(requestRemaining, requestLimit))),
                ("anthropic-ratelimit-requests-reset", RFC3339.format(epoch + time + requestReset, fractionDigits: 0)),
                ("anthropic-ratelimit-tokens-limit", String(tokenLimit)),
                ("anthropic-ratelimit-tokens-remaining", String(min(tokenRemaining, tokenLimit))),
                ("anthropic-ratelimit-tokens-reset", RFC3339.format(epoch + time + tokenReset, fractionDigits: 0)),
            ]
        }
    }

    /// A Go-style duration as OpenAI sends it: `250ms`, `6s`, `1m30s`, `2.5s`.
    static func goDuration(_ seconds: Double) -> String {
        let seconds = max(0, seconds)
        if seconds < 1 { return "\(Int((seconds * 1000).rounded()))ms" }
        let minutes = Int(seconds / 60)
        let rest = seconds - Double(minutes * 60)
        let restText = rest == rest.rounded() ? String(Int(rest)) : String(format2(rest))
        return minutes > 0 ? "\(minutes)m\(restText)s" : "\(restText)s"
    }

    private static func format2(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        let whole = hundredths / 100
        let fraction = hundredths % 100
        if fraction == 0 { return String(whole) }
        return fraction % 10 == 0 ? "\(whole).\(fraction / 10)" : "\(whole).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}
