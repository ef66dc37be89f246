import AllotCore

/// The Upstream Capacity Observer as the loop drives it (SPEC 4): one of the four actors.
///
/// `CapacityObserver` is the implementation; the protocol lets tests and experiments drive the
/// loop with a scripted observer.
public protocol CapacityObserving: Actor {
    /// Its rolling state: persisted in checkpoints so a restart resumes (SPEC 7).
    associatedtype State: Codable & Sendable

    /// Swaps in a new policy (declared capacities, header windows, thresholds).
    func apply(policy: Policy)

    /// Folds one tick's new telemetry into the rolling state and reports every upstream pool.
    func observe(_ delta: TelemetryDelta, now: Double) -> ObserverReport

    /// A copy of the rolling state.
    func state() -> State
}

/// The Tenant Consumption Classifier as the loop drives it (SPEC 5): one of the four actors.
public protocol ConsumptionClassifying: Actor {
    associatedtype State: Codable & Sendable

    func apply(policy: Policy)

    /// Folds one tick's new telemetry into the rolling state and reports every tenant.
    ///
    /// - Parameters:
    ///   - allocations: What each tenant was allowed since the last tick, per minute (its published
    ///     rate plus burst credit; ``SnapshotContent/unlimited`` for a dimension that is not
    ///     allocated): starvation and `sustained_over` compare demand and usage with it.
    ///   - capacities: This tick's capacity estimates per pool (the Observer's), for cold-start
    ///     priors given as a percentage of capacity.
    func classify(
        _ delta: TelemetryDelta, allocations: [AllocationKey: PerDimension<Double>],
        capacities: [String: PerDimension<Double?>], now: Double
    ) -> ClassifierReport

    /// Spend already incurred in each budget window, per tenant (a cold start without state reads
    /// it from the telemetry rollups, so budgets survive the loss of the checkpoint).
    func seedSpend(_ spent: [String: [BudgetWindow: Double]], now: Double)

    func state() -> State
}

/// Builds the two estimators for a loop, from a checkpoint's state when there is one.
public struct EstimatorFactory: Sendable {
    /// (policy, encoded state or nil) → observer. Throws ``LoopStateError`` for state it cannot read.
    public var makeObserver: @Sendable (Policy, [UInt8]?) throws -> any CapacityObserving
    /// (policy, encoded state or nil) → classifier.
    public var makeClassifier: @Sendable (Policy, [UInt8]?) throws -> any ConsumptionClassifying

    public init(
        makeObserver: @escaping @Sendable (Policy, [UInt8]?) throws -> any CapacityObserving,
        makeClassifier: @escaping @Sendable (Policy, [UInt8]?) throws -> any ConsumptionClassifying
    ) {
        self.makeObserver = makeObserver
        self.makeClassifier = makeClassifier
    }
}

extension CapacityObserver: CapacityObserving {}

extension ConsumptionClassifier: ConsumptionClassifying {}

extension EstimatorFactory {
    /// The service's estimators: ``CapacityObserver`` and ``ConsumptionClassifier``, resumed from
    /// their saved state (``StateCodec``) when there is one.
    public static let standard = EstimatorFactory(
        makeObserver: { policy, bytes in
            CapacityObserver(
                policy: policy,
                state: try bytes.map { try StateCodec.decode(ObserverState.self, from: $0, component: "observer") })
        },
        makeClassifier: { policy, bytes in
            ConsumptionClassifier(
                policy: policy,
                state: try bytes.map { try StateCodec.decode(ClassifierState.self, from: $0, component: "classifier") })
        })
}
