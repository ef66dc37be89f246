#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Real time: `CLOCK_REALTIME` for ``now``, and sleeps on the task's own timer.
///
/// A wall clock can be stepped (NTP, an operator); ``sleep(until:)`` therefore re-reads the clock after each
/// wake-up and sleeps again if the deadline still lies ahead, and a step forward simply ends the sleep early.
///
/// With ``endsSleepOnStepBack`` (the gateway library's clock), a step back of more than ``stepTolerance`` ends a
/// sleep too: it returns once the time it meant to sleep has passed on the monotonic clock, short of its deadline
/// by the wall clock, so that the caller, which loops and looks at the time again, recomputes its waits (a
/// gateway's queue and telemetry reporter slept through an hour's step back, an interactive call that may wait
/// 5 s held for the hour: outside evaluation round 32). The service's clock keeps the contract of
/// ``AllotClock/sleep(until:)``: its loop's times never go back.
public struct SystemClock: AllotClock {
    /// Whether a step back ends a sleep early (see the type's note).
    public let endsSleepOnStepBack: Bool

    /// The service's clock: a sleep ends at its deadline by the wall clock.
    public init() {
        self.init(endsSleepOnStepBack: false)
    }

    public init(endsSleepOnStepBack: Bool) {
        self.endsSleepOnStepBack = endsSleepOnStepBack
    }

    /// How far back the wall clock must step during a sleep for the sleep to end (instants a little out of order
    /// are no step).
    public static let stepTolerance = 1.0

    public var now: Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    public func sleep(until deadline: Double) async throws {
        let startWall = now
        let startMonotonic = MonotonicClock.now()
        while true {
            try Task.checkCancellation()
            let wall = now
            let remaining = deadline - wall
            guard remaining > 0 else { return }
            // Stepped back: the wall clock moved less than the time slept.
            let slept = MonotonicClock.seconds(since: startMonotonic)
            if endsSleepOnStepBack, wall - startWall < slept - Self.stepTolerance { return }
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

/// `CLOCK_BOOTTIME` seconds (since boot: never stepped, and counting time suspended, as `CLOCK_MONOTONIC` does not) as
/// an ``AllotClock``, and sleeps measured on it: for waits that must last their length whatever the wall clock does — a
/// long-poll's `wait=` (outside evaluation round 41: a poll held until an instant of the wall clock was held for the
/// whole of a step back, so the gateway learned of the step only a minute and more later, its lease run out
/// meanwhile) — and for how long ago a gateway polled. Time the system spent suspended counts, so a suspend is not
/// taken for a step of the wall clock (a VM paused by its hypervisor, or restored from a snapshot, may stop it too).
/// Its instants never leave the process.
public struct SteadyClock: AllotClock {
    public init() {}

    public var now: Double {
        var ts = timespec()
        #if os(Linux)
            clock_gettime(CLOCK_BOOTTIME, &ts)
        #else
            clock_gettime(CLOCK_MONOTONIC, &ts)  // Darwin: counts time asleep too
        #endif
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    public func sleep(until deadline: Double) async throws {
        while true {
            try Task.checkCancellation()
            let remaining = deadline - now
            guard remaining > 0 else { return }
            try await Task.sleep(nanoseconds: UInt64(min(remaining, 3_600) * 1e9) + 1)
        }
    }
}
