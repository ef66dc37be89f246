import AllotCore

/// The Upstream Capacity Observer (SPEC 2, 4): a long-lived owner of the per-pool estimates, driven
/// once per tick by the loop with the telemetry read since the previous tick.
///
/// All maths lives in ``CapacityEstimation`` (pure and deterministic; the simulator may drive that
/// directly); this actor only serialises access to it. Persist ``state()`` after a tick and pass it
/// back to `init` after a restart to resume with the same estimates.
public actor CapacityObserver {
    private var estimation: CapacityEstimation

    public init(policy: Policy, state: ObserverState? = nil) {
        estimation = CapacityEstimation(policy: policy, state: state)
    }

    /// Swaps in a reloaded policy (declared capacities, header windows, `observer` tuning).
    public func apply(policy: Policy) {
        estimation.apply(policy: policy)
    }

    /// Ingests one tick's new events and reports every known pool at `now`. Zero events is a valid
    /// tick (windows slide, circuits close); events may be late or slightly out of order (their own
    /// times place them, bounded by `now`).
    public func observe(_ delta: TelemetryDelta, now: Double) -> ObserverReport {
        estimation.observe(delta, now: now)
    }

    /// The state to persist.
    public func state() -> ObserverState {
        estimation.state
    }
}
