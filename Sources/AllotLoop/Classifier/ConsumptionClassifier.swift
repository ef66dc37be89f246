import AllotCore

/// The Tenant Consumption Classifier (SPEC 2, 5): a long-lived owner of per-tenant demand smoothing,
/// classes, starvation clocks, spend and task counts, driven once per tick by the loop.
///
/// All maths lives in ``ConsumptionClassification`` (pure and deterministic; the simulator may drive
/// that directly); this actor only serialises access to it. Persist ``state()`` after a tick and pass
/// it back to `init` after a restart to resume without starting blind.
public actor ConsumptionClassifier {
    private var classification: ConsumptionClassification

    public init(policy: Policy, state: ClassifierState? = nil, rules: ClassificationRules = ClassificationRules()) {
        classification = ConsumptionClassification(policy: policy, state: state, rules: rules)
    }

    /// Swaps in a reloaded policy (classifier windows, alert thresholds, prices, tiers, task budgets).
    public func apply(policy: Policy) {
        classification.apply(policy: policy)
    }

    /// Ingests one tick's new events and classifies every tenant and upstream at `now`.
    ///
    /// - Parameters:
    ///   - allocations: the rates currently published (per minute), for `sustained_over`, starvation
    ///     and the suspect correlation.
    ///   - capacities: the Observer's capacity estimates per pool, for percentage cold-start priors
    ///     (a pool missing here uses its declared capacity).
    public func classify(
        _ delta: TelemetryDelta, allocations: [AllocationKey: PerDimension<Double>],
        capacities: [String: PerDimension<Double?>] = [:], now: Double
    ) -> ClassifierReport {
        classification.classify(delta, allocations: allocations, capacities: capacities, now: now)
    }

    /// Replaces the spend so far of the budget windows in progress at `now` (seeded from the rollups
    /// at start: a month-long window began before the events the loop reads).
    public func seedSpend(_ spent: [String: [BudgetWindow: Double]], now: Double) {
        classification.seedSpend(spent, now: now)
    }

    /// The state to persist.
    public func state() -> ClassifierState {
        classification.state
    }
}
