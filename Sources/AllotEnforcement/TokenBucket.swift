import AllotProtocol

/// A token bucket in one dimension (requests or tokens), refilled continuously at `rate` per minute up to
/// `burst` (SPEC §7: "`rate` is per minute; `burst` is the token-bucket capacity").
///
/// The bucket is a value: it stores the level at ``updatedAt`` and computes the level at any later `now`
/// instead of running a timer, so it costs nothing while idle and is exact on a virtual clock.
///
/// Rules, each with its reason:
/// - **A request needs `min(amount, burst)` tokens** (``threshold(for:)``), then takes all of `amount`. A
///   request larger than the whole bucket is admitted once the bucket is full and leaves debt, instead of
///   being denied forever; a gateway slice smaller than one request (`burst` 0.4 for a tenant that gets 2 RPM
///   spread over five gateways) still admits requests at its long-run rate.
/// - **The level may go negative: that is debt.** Usage reconciled after a response (actual tokens above the
///   reservation) is taken unconditionally, and the debt is repaid by the refill before the next admission.
///   Debt is bounded by an hour of refill (``debtLimit``).
/// - **Refunds never lift the level above `burst`**, so under-spend cannot be banked into a larger burst.
/// - **Retuning (a new snapshot) never refills** (``retune(to:at:)``): the level first accrues at the old rate
///   up to the swap instant, then the new parameters apply and the level is clamped to the new burst. A swap
///   can therefore neither be exploited by a burst nor wipe out a tenant's debt.
/// - A bucket with rate 0 and burst 0 is a zero allocation and admits nothing.
/// - Time never runs backwards: a `now` before ``updatedAt`` is treated as ``updatedAt``. When the wall clock
///   itself steps back, the owner calls ``rebase(to:)``: the level stays and refill counts from the new `now`
///   (without it, a step back of an hour froze every refill for that hour).
public struct TokenBucket: Sendable, Equatable {
    /// Rate per minute and capacity, both ≥ 0.
    public private(set) var parameters: Bucket
    /// Tokens available at ``updatedAt``; negative while the bucket carries debt; never above the burst.
    public private(set) var level: Double
    /// The instant (seconds since the epoch) ``level`` refers to.
    public private(set) var updatedAt: Double

    /// Levels within this fraction of a token of the threshold count as reaching it, so that a waiter woken at
    /// the computed refill instant is not turned away by floating-point rounding.
    static let tolerance = 1e-9

    /// A bucket with `parameters`, holding `level` tokens (default: full) at `now`.
    public init(parameters: Bucket, now: Double, level: Double? = nil) {
        let parameters = Self.sanitized(parameters)
        self.parameters = parameters
        self.level = min(level ?? parameters.burst, parameters.burst)
        self.updatedAt = now
    }

    /// Negative, NaN or infinite parameters become 0: a hostile or broken snapshot cannot open a bucket wide.
    static func sanitized(_ bucket: Bucket) -> Bucket {
        func clean(_ value: Double) -> Double { value.isFinite && value > 0 ? value : 0 }
        return Bucket(rate: clean(bucket.rate), burst: clean(bucket.burst))
    }

    /// Tokens per second.
    public var ratePerSecond: Double { parameters.rate / 60 }

    /// True for a zero allocation (rate 0, burst 0): nothing is ever admitted.
    public var isClosed: Bool { parameters.rate <= 0 && parameters.burst <= 0 }

    /// The level at `now`: the stored level plus the refill since ``updatedAt``, capped at the burst.
    public func level(at now: Double) -> Double {
        let elapsed = now - updatedAt
        guard elapsed > 0, level < parameters.burst else { return level }
        return min(parameters.burst, level + elapsed * ratePerSecond)
    }

    /// Whether the bucket is at its burst at `now` (nothing taken that the refill has not paid back).
    public func isFull(at now: Double) -> Bool {
        level(at: now) >= parameters.burst
    }

    /// The tokens that must be in the bucket for a request of `amount` to be admitted: `min(amount, burst)`.
    public func threshold(for amount: Double) -> Double {
        min(amount, parameters.burst)
    }

    /// Whether a request of `amount` fits at `now`.
    public func admits(_ amount: Double, at now: Double) -> Bool {
        guard !isClosed else { return false }
        let needed = threshold(for: amount)
        return level(at: now) >= needed - Self.tolerance * max(1, needed)
    }

    /// Seconds from `now` until a request of `amount` fits (0 if it fits now), computed from the refill rate;
    /// nil when the refill alone never gets there (rate 0).
    public func delay(until amount: Double, at now: Double) -> Double? {
        if admits(amount, at: now) { return 0 }
        guard ratePerSecond > 0 else { return nil }
        return (threshold(for: amount) - level(at: now)) / ratePerSecond
    }

    /// Brings ``level`` and ``updatedAt`` forward to `now`.
    public mutating func advance(to now: Double) {
        guard now > updatedAt else { return }
        level = level(at: now)
        updatedAt = now
    }

    /// The clock stepped by `step` to `now` (back when negative): the bucket's last update moves with the step, so
    /// that its refill counts the time that really passed — a step back neither freezes it until the clock comes
    /// round nor refills it, a step forward refills nothing, and a step back then forward (an instant out of order)
    /// gives back what it took — and never lies after `now`.
    public mutating func rebase(to now: Double, step: Double = 0) {
        updatedAt = min(updatedAt + step, now)
    }

    /// Removes `amount` tokens at `now`, unconditionally: the level may go negative (debt), down to
    /// ``debtLimit``.
    public mutating func take(_ amount: Double, at now: Double) {
        advance(to: now)
        level = max(level - amount, -debtLimit)
    }

    /// The most debt the bucket carries: an hour of refill, or the burst if that is more. A usage report no call
    /// could have (`Int.max` tokens) locked its tenant out at that gateway for good (round 14); any debt a real
    /// call leaves is repaid within the hour anyway.
    public var debtLimit: Double {
        max(parameters.burst, parameters.rate * 60)
    }

    /// Returns `amount` unused tokens at `now`, never filling the bucket above its burst.
    public mutating func refund(_ amount: Double, at now: Double) {
        advance(to: now)
        level = min(parameters.burst, level + amount)
    }

    /// Hot swap: accrues at the old rate up to `instant`, then applies `parameters` and clamps the level to
    /// the new burst. The level is never raised by a swap (see the type's rules).
    public mutating func retune(to parameters: Bucket, at instant: Double) {
        advance(to: instant)
        self.parameters = Self.sanitized(parameters)
        level = min(level, self.parameters.burst)
    }

    /// ``retune(to:at:)`` for a bucket whose debt is a wait rather than tokens owed (the gateway's cap, held after
    /// a refusal for the provider's retry-after): its debt is at most `seconds` of refill at the new rate. Kept
    /// in tokens, a hold of 60 s at 1.2M tokens/min became 6,000 s of silence when the capacity fell to
    /// 12,000/min, and the gateway sent nothing after the upstream recovered (round 14).
    mutating func retune(to parameters: Bucket, at instant: Double, debtAtMost seconds: Double) {
        retune(to: parameters, at: instant)
        level = max(level, -ratePerSecond * seconds)
    }
}
