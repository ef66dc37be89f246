/// Jittered exponential backoff for retrying Allot after failures (snapshot polls, telemetry posts).
///
/// The `n`-th consecutive failure waits `min(maximum, initial × multiplier^(n-1))`, scaled by a random factor in
/// `[1 - jitter, 1]`. The jitter keeps a fleet of gateways that lost Allot at the same moment (a restart, a
/// network blip) from coming back in lock-step; keeping the lower half of the delay ("equal jitter") keeps
/// them from hammering a server that is just coming up.
public struct Backoff: Sendable, Equatable {
    /// Seconds before the first retry (before jitter). Default 0.5.
    public var initial: Double
    /// Upper bound of a delay, seconds. Default 30.
    public var maximum: Double
    /// Growth per consecutive failure. Default 2.
    public var multiplier: Double
    /// Fraction of the delay that is random, 0…1. Default 0.5.
    public var jitter: Double

    public init(initial: Double = 0.5, maximum: Double = 30, multiplier: Double = 2, jitter: Double = 0.5) {
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
        self.jitter = jitter
    }

    /// The delay after `failures` consecutive failures (1 for the first), with `unit` a random number in
    /// `[0, 1)` (seeded in tests and simulations: ``SplitMix64``).
    ///
    /// Settings that would retry in a tight loop are read as the nearest sane ones (round 14: `multiplier` 0 or
    /// `initial` 0 gave delays of 0): `initial` not positive or not finite → 0.5 s; `multiplier` below 1 or not
    /// finite → 1; `maximum` below `initial` → `initial`; `maximum` not finite → 30 s (or `initial` if larger).
    public func delay(failures: Int, unit: Double) -> Double {
        let first = initial.isFinite && initial > 0 ? initial : 0.5
        let growth = multiplier.isFinite && multiplier >= 1 ? multiplier : 1
        let ceiling = maximum.isFinite ? max(maximum, first) : max(30, first)
        let exponent = Double(max(0, failures - 1))
        let base = min(ceiling, first * pow(growth, min(exponent, 64)))
        let spread = jitter.isFinite ? min(max(jitter, 0), 1) : 0.5
        return max(0, base * (1 - spread + spread * min(max(unit, 0), 1)))
    }

    /// The wait before the next attempt: `delay`, or a server's `Retry-After` when longer — but never more than
    /// ``maximum`` (round 14: a `Retry-After: 86400` from a proxy kept a gateway from polling for a day, on its
    /// fallback floors, while Allot was back in seconds).
    public func honouring(retryAfter: Double?, delay: Double) -> Double {
        guard let retryAfter, retryAfter.isFinite, retryAfter > delay else { return delay }
        let ceiling = maximum.isFinite ? max(maximum, delay) : delay
        return min(retryAfter, ceiling)
    }

    /// The wait after `failures` failures, the last answered with `retryAfter`: ``delay(failures:unit:)``
    /// ``honouring(retryAfter:delay:)``.
    public func delay(failures: Int, unit: Double, retryAfter: Double?) -> Double {
        honouring(retryAfter: retryAfter, delay: delay(failures: failures, unit: unit))
    }

    private func pow(_ base: Double, _ exponent: Double) -> Double {
        var result = 1.0
        var remaining = Int(exponent)
        while remaining > 0 && result < 1e18 {
            result *= base
            remaining -= 1
        }
        return result
    }
}

/// A small, fast, seedable random number generator (SplitMix64), so backoff jitter is reproducible in tests
/// and deterministic in simulations.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)`.
    public mutating func unit() -> Double {
        Double(next() >> 11) * 0x1p-53
    }
}
