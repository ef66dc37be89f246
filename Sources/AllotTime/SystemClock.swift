#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Real time: `CLOCK_REALTIME` for ``now``, and sleeps on the task's own timer.
///
/// A wall clock can be stepped (NTP, an operator); ``sleep(until:)`` therefore re-reads the clock after each
/// wake-up and sleeps again if the deadline still lies ahead, and a step forward simply ends the sleep early.
public struct SystemClock: AllotClock {
    public init() {}

    public var now: Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    public func sleep(until deadline: Double) async throws {
        while true {
            try Task.checkCancellation()
            let remaining = deadline - now
            guard remaining > 0 else { return }
            // Bounded chunks keep a far deadline from overflowing UInt64 and let a stepped clock be noticed.
            let chunk = min(remaining, 3_600)
            try await Task.sleep(nanoseconds: UInt64(chunk * 1e9) + 1)
        }
    }
}

/// Monotonic nanoseconds (`CLOCK_MONOTONIC`) for measuring durations: latency, tick time, benchmarks.
///
/// Never use it for instants that leave the process: it has an arbitrary origin and stops while suspended.
public enum MonotonicClock {
    /// Nanoseconds since an arbitrary fixed origin.
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// Seconds elapsed since `start`, a value from ``now()``.
    public static func seconds(since start: UInt64) -> Double {
        let end = now()
        return end >= start ? Double(end - start) / 1e9 : 0
    }
}
