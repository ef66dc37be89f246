/// The source of time for everything that waits: the loop's tick, lease expiry, long-poll deadlines.
///
/// Time is `Double` seconds since the Unix epoch, the unit the pure maths takes as `now` (common rules). The real
/// service runs on ``SystemClock``; tests and the simulator run on ``ManualClock`` so that hours of traffic
/// replay in milliseconds and every test is deterministic (no sleeps in tests).
public protocol AllotClock: Sendable {
    /// The current instant, seconds since the epoch.
    var now: Double { get }

    /// Suspends until ``now`` has reached `deadline` (returns at once if it already has) — or, for a clock made to
    /// (``SystemClock/endsSleepOnStepBack``, ``ManualClock/stepBack(by:)``), until its wall clock steps back, short
    /// of the deadline: callers that loop look at the time again.
    ///
    /// - Throws: `CancellationError` if the calling task is cancelled before or while it waits.
    func sleep(until deadline: Double) async throws
}

extension AllotClock {
    /// Suspends for `seconds` from ``now``.
    public func sleep(for seconds: Double) async throws {
        try await sleep(until: now + seconds)
    }
}
