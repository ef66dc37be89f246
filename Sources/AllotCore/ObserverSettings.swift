/// Windows, factors and thresholds of the Upstream Capacity Observer (SPEC 4), carried by the policy
/// (section `observer`) so that one file tunes the loop. `policies/README.md` documents each field
/// with its unit and default.
public struct ObserverSettings: Sendable, Hashable, Codable {
    /// Short window, seconds: served rates, outcome counts, states, the circuit breaker and the
    /// short latency percentiles.
    public var shortWindowSeconds: Double
    /// Long window, seconds: the latency baseline, and how long a quota decrease, a model version
    /// change or a header sighting keeps weighing on the confidence.
    public var longWindowSeconds: Double
    /// Multiplicative decrease on quota exhaustion: the estimate becomes at most this fraction of
    /// itself, and at most what was served while throttled (AIMD, fast down).
    public var decreaseFactor: Double
    /// After a decrease, quota errors for this many seconds are attributed to requests already in
    /// flight under the old allocation (gateways need a poll to see the cut) and cause no further cut.
    public var decreaseHoldSeconds: Double
    /// The estimate never falls below this fraction of its reference (header limit, else declared
    /// capacity, else the estimate before the first cut).
    public var capacityFloor: Double
    /// Probe up only when served / estimate is at least this (and no quota errors in the short window).
    public var probeUtilisation: Double
    /// Additive increase per minute while probing, as a fraction of the reference.
    public var probeStep: Double
    /// While probing below a limit the provider states in its headers (seen within the short window), the
    /// step per minute is at least this fraction of the gap to that limit: a cut below a stated limit is a
    /// hypothesis (a hidden lower limit, or a burst that met the provider's bucket), and the stated limit is
    /// strong evidence, so the estimate returns toward it quickly — if the hypothesis was right, the next
    /// quota errors cut it again.
    public var probeRecover: Double
    /// `degrading` when the short-window p95 latency reaches this multiple of the long-window p95…
    public var latencyRatio: Double
    /// …and back out of it when the ratio falls below this (hysteresis). A rise is only taken for
    /// degradation while our own load is steady: when the short window's served rate exceeds the
    /// baseline's by more than `latencyLoadRise` (a fraction), the latency rise is what our own traffic
    /// does to the upstream (queueing near its limit), not a warning of lost capacity — quota errors
    /// still cut the estimate if the load is too much.
    public var latencyRecoverRatio: Double
    public var latencyLoadRise: Double
    /// Latency samples the short window needs before its p95 is compared.
    public var latencyMinSamples: Int
    /// While latency is degrading, the engine is given the estimate times this (lowered safe capacity
    /// before any 429).
    public var degradeFactor: Double
    /// Share of upstream attempts answered `overloaded` in the short window that opens the circuit.
    public var circuitOpenRatio: Double
    /// Share at which the overload is severe: an open circuit sheds `batch` and `interactive` too (below it, only
    /// `background`), stays open past `circuitQuietSeconds`, and a half-open one reopens. Default 1: only a
    /// provider refusing every attempt is severe (policies/README.md: shedding more starved more and met fewer
    /// SLOs).
    public var circuitSevereRatio: Double
    /// Upstream attempts the short window needs before the overload share is judged.
    public var circuitMinAttempts: Int
    /// Seconds without overload errors before an open circuit goes half-open, and again before a
    /// half-open circuit closes.
    public var circuitQuietSeconds: Double
    /// Use of a shared key by others (inferred from `remaining`) below this fraction of the header
    /// limit is ignored as measurement noise.
    public var sharedTolerance: Double

    public init(
        shortWindowSeconds: Double = 60, longWindowSeconds: Double = 900, decreaseFactor: Double = 0.95,
        decreaseHoldSeconds: Double = 10, capacityFloor: Double = 0.05, probeUtilisation: Double = 0.9,
        probeStep: Double = 0.05, probeRecover: Double = 0.5, latencyRatio: Double = 1.5,
        latencyRecoverRatio: Double = 1.2,
        latencyLoadRise: Double = 0.25, latencyMinSamples: Int = 20, degradeFactor: Double = 0.8,
        circuitOpenRatio: Double = 0.2,
        circuitSevereRatio: Double = 1, circuitMinAttempts: Int = 20, circuitQuietSeconds: Double = 30,
        sharedTolerance: Double = 0.05
    ) {
        self.shortWindowSeconds = shortWindowSeconds
        self.longWindowSeconds = longWindowSeconds
        self.decreaseFactor = decreaseFactor
        self.decreaseHoldSeconds = decreaseHoldSeconds
        self.capacityFloor = capacityFloor
        self.probeUtilisation = probeUtilisation
        self.probeStep = probeStep
        self.probeRecover = probeRecover
        self.latencyRatio = latencyRatio
        self.latencyRecoverRatio = latencyRecoverRatio
        self.latencyLoadRise = latencyLoadRise
        self.latencyMinSamples = latencyMinSamples
        self.degradeFactor = degradeFactor
        self.circuitOpenRatio = circuitOpenRatio
        self.circuitSevereRatio = circuitSevereRatio
        self.circuitMinAttempts = circuitMinAttempts
        self.circuitQuietSeconds = circuitQuietSeconds
        self.sharedTolerance = sharedTolerance
    }
}
