import AllotCore

/// The strategies a scenario can be run with (SPEC 12).
public enum SimulationStrategy: String, Sendable, CaseIterable {
    /// The real loop: Observer, Classifier, Policy Engine and Publisher on a temporary SQLite
    /// database, telemetry through the ingest path, gateways enforcing with `AllotEnforcement`.
    case allot
    /// Fixed per-tenant quotas set at provisioning: the declared capacity split by weight (the tier's, times
    /// the policy's own for a tenant its `tenants` names).
    case `static`
    /// One global bucket at the declared capacity, a FIFO queue, exponential backoff with jitter,
    /// no tenant awareness.
    case fifoBackoff = "fifo-backoff"
    /// The declared capacity divided evenly among the tenants active in the last minute, every tick.
    case equalSplit = "equal-split"
}

/// Runs scenarios (docs/scenarios.md) on a virtual clock.
public enum Simulator {
    /// Runs one strategy on one scenario. Deterministic for (scenario, strategy, seed): every
    /// random draw comes from seeded streams and the loop is driven from one task in event order.
    /// `policy`: the base policy (`allot simulate --policy DIR`); nil → the built-in defaults. Either way
    /// the scenario supplies the pools and tenants (``SimulationPolicy/policy(for:base:)``).
    public static func run(_ scenario: Scenario, strategy: SimulationStrategy, seed: UInt64, policy: Policy? = nil)
        async throws -> SimulationTrace
    {
        let run = try await SimulationRun(scenario: scenario, strategy: strategy, seed: seed, basePolicy: policy)
        return try await run.execute()
    }
}
