import AllotCore

/// The Priority/Policy Engine as one of the loop's four actors (SPEC section 2): the long-lived
/// owner of `EngineState` (dampers, burst ledgers, proposals) around the pure
/// `PolicyEngine.decide`.
///
/// The maths stays pure and synchronous in AllotCore; this actor only serialises access to the
/// state between ticks, hands out copies for persistence, and remembers the last decision.
public actor PolicyEngineActor {
    private var engineState: EngineState
    private var last: Decision?

    /// - Parameter state: The state to resume from (a restart), or a fresh one.
    public init(state: EngineState = EngineState()) {
        engineState = state
    }

    /// Computes one tick's decision and advances the state.
    public func decide(_ input: DecisionInput) -> Decision {
        let decision = PolicyEngine.decide(input, state: &engineState)
        last = decision
        return decision
    }

    /// A copy of the state (copy-on-write: cheap until the next decision), for checkpoints.
    public func state() -> EngineState { engineState }

    /// The most recent decision, if any.
    public func lastDecision() -> Decision? { last }
}
