import AllotProtocol

/// The limits an upstream's recent responses stated (their rate-limit headers), per dimension, for the brake
/// (``GatewayConfiguration/followStatedLimits``).
struct StatedLimits: Sendable {
    var requests = RecentStatements()
    var tokens = RecentStatements()
}

/// The last three statements of one limit. They are believed only when they are equal and recent: a provider
/// states a fixed limit, so one odd value, or headers that jitter, are left to Allot's loop, which weighs them
/// against its own evidence (with "within 2%", noisy-signals' jittered headers braked now and then).
struct RecentStatements: Sendable {
    private var values: (Double, Double, Double) = (.nan, .nan, .nan)
    private var times: (Double, Double, Double) = (-.infinity, -.infinity, -.infinity)

    mutating func note(_ value: Double, at now: Double) {
        values = (values.1, values.2, value)
        times = (times.1, times.2, now)
    }

    /// Moves the statements' instants by `delta` (the wall clock stepped).
    mutating func shift(by delta: Double) {
        times = (times.0 + delta, times.1 + delta, times.2 + delta)
    }

    /// The limit the last three statements agree on, if the oldest of them is at most `maxAge` seconds old.
    func believed(at now: Double, maxAge: Double) -> Double? {
        guard now - times.0 <= maxAge, values.0 == values.1, values.1 == values.2 else { return nil }
        return values.0
    }
}
