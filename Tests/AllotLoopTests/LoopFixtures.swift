import AllotCore
import AllotLog
import AllotLoop
import AllotMetrics
import AllotProtocol
import AllotSQLite
import AllotStore
import AllotTime
import Foundation
import Testing

// Fixtures for the loop and publisher tests: scripted estimators (so a test states exactly what
// the Observer and the Classifier report), policies, and databases in temporary directories.

let pool4o = "openai/gpt-4o"

/// A value shared between a test and the code under test. `@unchecked Sendable`: every access
/// holds `lock`.
final class Box<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) { stored = value }

    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// A Capacity Observer that reports the capacities and states a test sets.
actor ScriptedObserver: CapacityObserving {
    struct State: Codable, Sendable, Equatable {
        var eventsSeen = 0
        var capacity: [String: PerDimension<Double?>] = [:]
        var states: [String: UpstreamState] = [:]
    }

    private var current: State

    init(policy: Policy, state: State? = nil) {
        current = state ?? State()
        for upstream in policy.upstreams where current.capacity[upstream.id] == nil {
            current.capacity[upstream.id] = upstream.capacity
        }
    }

    func apply(policy: Policy) {}

    func set(_ upstream: String, capacity: PerDimension<Double?>? = nil, state: UpstreamState? = nil) {
        if let capacity { current.capacity[upstream] = capacity }
        if let state { current.states[upstream] = state }
    }

    func observe(_ delta: TelemetryDelta, now: Double) -> ObserverReport {
        current.eventsSeen += delta.events.count
        let ids = current.capacity.keys.sorted()
        return ObserverReport(
            pools: ids.map {
                PoolObservation(upstream: $0, capacity: current.capacity[$0]!, state: current.states[$0] ?? .healthy)
            },
            upstreams: ids.map { id in
                let state = current.states[id] ?? .healthy
                return UpstreamStatus(
                    upstream: id, state: state, declared: current.capacity[id]!, estimate: current.capacity[id]!,
                    confidence: 1, circuitOpen: state == .overloaded, shed: state == .overloaded ? ["background"] : [])
            },
            alerts: [])
    }

    func state() -> State { current }
}

/// A Consumption Classifier that reports the demands a test sets, and remembers the allocations
/// the loop handed it.
actor ScriptedClassifier: ConsumptionClassifying {
    struct Demand: Codable, Sendable, Equatable {
        var tenant: String
        var upstream: String
        var rpm: Double
        var tpm: Double
        var shares: [String: Double]
        var served: [String: PerDimension<Double>]
        var young = false
    }

    struct State: Codable, Sendable, Equatable {
        var demands: [Demand] = []
        var eventsSeen = 0
        var seeded: [String: [BudgetWindow: Double]] = [:]
    }

    private var current: State
    private(set) var lastAllocations: [AllocationKey: PerDimension<Double>] = [:]
    /// The spend reported with every classification (not kept across a restart).
    private var spend: [TenantSpend] = []

    init(policy: Policy, state: State? = nil) {
        current = state ?? State()
    }

    func apply(policy: Policy) {}

    func setDemand(
        _ tenant: String, upstream: String = pool4o, rpm: Double, tpm: Double, shares: [String: Double] = [:],
        served: [String: PerDimension<Double>] = [:], young: Bool = false
    ) {
        current.demands.removeAll { $0.tenant == tenant && $0.upstream == upstream }
        current.demands.append(
            Demand(
                tenant: tenant, upstream: upstream, rpm: rpm, tpm: tpm, shares: shares, served: served,
                young: young))
    }

    func classify(
        _ delta: TelemetryDelta, allocations: [AllocationKey: PerDimension<Double>],
        capacities: [String: PerDimension<Double?>], now: Double
    ) -> ClassifierReport {
        current.eventsSeen += delta.events.count
        lastAllocations = allocations
        let demands = current.demands.sorted {
            AllocationKey(tenant: $0.tenant, upstream: $0.upstream)
                < AllocationKey(tenant: $1.tenant, upstream: $1.upstream)
        }
        return ClassifierReport(
            tenants: demands.map {
                TenantObservation(
                    tenant: $0.tenant, upstream: $0.upstream, demand: PerDimension(rpm: $0.rpm, tpm: $0.tpm),
                    served: PerDimension(rpm: $0.rpm, tpm: $0.tpm))
            },
            spend: spend,
            statuses: demands.map {
                TenantStatus(
                    key: AllocationKey(tenant: $0.tenant, upstream: $0.upstream), tenantClass: .steady,
                    demand: PerDimension(rpm: $0.rpm, tpm: $0.tpm), completionTokensP50: 120,
                    completionTokensP95: 480, gatewayShares: $0.shares, gatewayServed: $0.served,
                    young: $0.young)
            },
            alerts: [])
    }

    func setSpend(_ spend: [TenantSpend]) { self.spend = spend }

    func seedSpend(_ spent: [String: [BudgetWindow: Double]], now: Double) {
        current.seeded = spent
    }

    func state() -> State { current }
}

/// The scripted estimators a loop was opened with (the latest ones, after a restart).
final class ScriptedEstimators: Sendable {
    let observers = Box<[ScriptedObserver]>([])
    let classifiers = Box<[ScriptedClassifier]>([])

    var observer: ScriptedObserver { observers.value.last! }
    var classifier: ScriptedClassifier { classifiers.value.last! }

    var factory: EstimatorFactory {
        EstimatorFactory(
            makeObserver: { [observers] policy, bytes in
                let state = try bytes.map {
                    try StateCodec.decode(ScriptedObserver.State.self, from: $0, component: "observer")
                }
                let observer = ScriptedObserver(policy: policy, state: state)
                observers.value.append(observer)
                return observer
            },
            makeClassifier: { [classifiers] policy, bytes in
                let state = try bytes.map {
                    try StateCodec.decode(ScriptedClassifier.State.self, from: $0, component: "classifier")
                }
                let classifier = ScriptedClassifier(policy: policy, state: state)
                classifiers.value.append(classifier)
                return classifier
            })
    }
}

/// A policy for loop tests: one pool of `rpm`/`tpm`, one tier, no safety margin or headroom, and
/// dampening that follows targets at once (tests that study dampening pass their own).
func loopPolicy(
    rpm: Double = 100, tpm: Double = 100_000, interval: Double = 5, lease: Double = 300,
    dampening: DampeningSettings = DampeningSettings(
        alpha: 1, deadband: 0, persistTicks: 1, maxUp: 100, maxDown: 1, minStep: .absolute(1_000_000)),
    surplus: SurplusMode = .hold, tiers: [Tier] = [Tier(name: "standard", priority: 2)],
    tenants: [TenantPolicy] = []
) -> Policy {
    Policy(
        loop: LoopSettings(intervalSeconds: interval, leaseSeconds: lease),
        allocation: AllocationSettings(safetyMargin: 0, demandHeadroom: 0, surplus: surplus, burstReserve: 0),
        dampening: dampening, tiers: tiers,
        upstreams: [UpstreamPolicy(id: pool4o, capacity: PerDimension(rpm: rpm, tpm: tpm))], tenants: tenants,
        taskBudgets: [.batch: TaskBudgetPolicy(maxCalls: 500, maxTokens: 5_000_000)])
}

/// A directory removed when the value is released.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "allot-loop-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    var databasePath: String { path + "/allot.sqlite" }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A loop on a real SQLite file, reopenable to simulate a restart.
final class LoopHarness: Sendable {
    let directory: TemporaryDirectory
    let clock: ManualClock
    let estimators = ScriptedEstimators()
    let operators = InMemoryOperatorInputs()
    let pool: Box<DatabasePool?> = Box(nil)
    let loop: Box<LoopRunner?> = Box(nil)

    init(start: Double = 1_800_000_000) throws {
        directory = try TemporaryDirectory()
        clock = ManualClock(now: start)
    }

    var runner: LoopRunner { loop.value! }
    var store: TelemetryStore { runner.telemetry }
    var publisher: AllocationPublisher { runner.publisher }
    var observer: ScriptedObserver { estimators.observer }
    var classifier: ScriptedClassifier { estimators.classifier }

    /// Opens (or reopens) the database and the loop.
    @discardableResult
    func open(
        policy: Policy = loopPolicy(), configuration: LoopConfiguration = LoopConfiguration(),
        snapshots: (@Sendable (DatabasePool) -> any SnapshotPersistence)? = nil, estimators: EstimatorFactory? = nil,
        metrics: MetricsRegistry? = nil, logger: Logger = .disabled
    ) async throws -> LoopRunner {
        let database = try await StoreDatabase.open(
            path: directory.databasePath, configuration: SQLiteConfiguration(synchronous: .off))
        pool.value = database
        let runner = try await LoopRunner.open(
            store: TelemetryStore(pool: database, clock: clock), policy: policy,
            policyVersion: LoopRunner.policyVersion(of: policy), clock: clock,
            estimators: estimators ?? self.estimators.factory, operators: operators, configuration: configuration,
            metrics: metrics, logger: logger, snapshots: snapshots?(database))
        loop.value = runner
        return runner
    }

    /// Shuts the loop down and closes the database (a clean stop).
    func close() async {
        await loop.value?.shutdown()
        await pool.value?.close()
        loop.value = nil
        pool.value = nil
    }

    /// Closes the database without the loop's shutdown (a crash: no final checkpoint).
    func crash() async {
        await pool.value?.close()
        loop.value = nil
        pool.value = nil
    }

    /// Advances the clock and ticks.
    @discardableResult
    func tick(by seconds: Double = 5) async -> TickReport {
        clock.advance(by: seconds)
        return await runner.tick(now: clock.now)
    }
}

/// The snapshot currently served (its slice for `gateway`), decoded from the bytes gateways receive.
func servedSnapshot(_ publisher: AllocationPublisher, gateway: String? = nil) throws -> Snapshot {
    let current = try #require(publisher.current)
    return try Snapshot(decoding: current.body(forGateway: gateway))
}

extension Snapshot {
    func tenant(_ id: String, upstream: String = pool4o) -> TenantEntry? {
        tenants.first { $0.id == id && $0.upstream == upstream }
    }
}

/// Whether `value` is within a relative 10⁻⁹ of `expected` (slices carry a 10⁻¹² rounding margin).
func isClose(_ value: Double?, _ expected: Double) -> Bool {
    guard let value else { return false }
    return abs(value - expected) <= 1e-9 * max(1, abs(expected))
}

/// Returns once `count` long-polls are parked on `publisher` (their deadlines then have a sweeper).
func waitForWatchers(_ publisher: AllocationPublisher, _ count: Int) async {
    while publisher.watcherCount < count { await Task.yield() }
}
