import AllotCore
import AllotTime

/// Settings of the loop that are not policy (the policy sets the interval, lease and thresholds).
public struct LoopConfiguration: Sendable {
    /// Most telemetry rows one tick reads: a backlog (after a restart, or an ingest burst) is worked
    /// off over several ticks instead of making one tick unbounded.
    public var maxEventsPerTick: Int
    /// A checkpoint of the estimators' state is saved every this many ticks (and at shutdown).
    public var checkpointEveryTicks: Int
    /// A tick longer than this fraction of the interval is `slow`: logged and alerted.
    public var slowTickFraction: Double
    public var publisher: AllocationPublisher.Configuration
    /// Seconds on a clock that is never stepped (any origin): how long the loop has really gone without a tick,
    /// whatever its wall clock says (``LoopRunner/stall(now:)``). Tests pass their own.
    public var steadyClock: @Sendable () -> Double

    /// - Parameters:
    ///   - maxEventsPerTick: Default 250,000 (50,000 events/s at the default 5 s interval).
    ///   - checkpointEveryTicks: Default 6 (every 30 s at the default interval).
    ///   - slowTickFraction: Default 0.5.
    ///   - publisher: Publisher settings.
    ///   - steadyClock: Default `CLOCK_MONOTONIC` (``MonotonicClock``).
    public init(
        maxEventsPerTick: Int = 250_000, checkpointEveryTicks: Int = 6, slowTickFraction: Double = 0.5,
        publisher: AllocationPublisher.Configuration = AllocationPublisher.Configuration(),
        steadyClock: @escaping @Sendable () -> Double = { Double(MonotonicClock.now()) / 1e9 }
    ) {
        self.maxEventsPerTick = max(1, maxEventsPerTick)
        self.checkpointEveryTicks = max(1, checkpointEveryTicks)
        self.slowTickFraction = max(0, slowTickFraction)
        self.publisher = publisher
        self.steadyClock = steadyClock
    }
}

/// The phases of a tick, for timings (`allot_tick_duration_seconds{phase}`) and failures.
public enum TickPhase: String, Sendable, Hashable, CaseIterable {
    /// Operator inputs: overrides, proposal resolutions, burst requests.
    case inputs
    /// Reading the new telemetry rows.
    case read
    case observe
    case classify
    case decide
    /// Building the snapshot's content from the decision (entries, slices, fallback).
    case assemble
    /// Make-before-break, persisting and making the version visible.
    case publish
    /// The part of `publish` spent writing to SQLite (a sub-phase: not added to `total` twice).
    case persist
    /// Gateway lag and drift alerts.
    case review
    case total
}

/// What one tick did.
public struct TickReport: Sendable {
    /// The tick's sequence number since the loop's first start (continues across restarts).
    public var tick: Int64
    public var now: Double
    /// Telemetry rows read.
    public var events: Int
    /// The read stopped at `maxEventsPerTick`: more rows wait for the next tick.
    public var backlog: Bool
    /// Seconds per phase.
    public var durations: [TickPhase: Double]
    /// Versions made visible, oldest first.
    public var published: [Int64]
    /// Make-before-break held growth back.
    public var heldGrowth: Bool
    /// The phase that failed, and why; nil for a tick that completed.
    public var failure: (phase: TickPhase, message: String)?

    public var succeeded: Bool { failure == nil }
}

/// Everything the API reads from the loop (`GET /v1/tenants`, `/v1/upstreams`, `/v1/alerts`):
/// the latest reports, decision and alerts. Immutable values, replaced at each tick.
public struct LoopView: Sendable {
    /// Ticks run (continues across restarts).
    public var tick: Int64
    /// The time of the last tick that completed.
    public var lastTickAt: Double?
    public var observer: ObserverReport?
    public var classifier: ClassifierReport?
    public var decision: Decision?
    /// Every alert in force: the Observer's, the Classifier's, the engine's (with when each
    /// started), the Publisher's (`gateway_lag`, `drift`) and the loop's own (`tick_failed`,
    /// `tick_slow`, `policy_error`, `operator_inputs`, `state_restore`, `checkpoint_failed`),
    /// sorted by kind then subject.
    public var alerts: [LoopAlert]
    public var policy: Policy
    public var policyVersion: String
    public var lastReport: TickReport?

    public init(
        tick: Int64 = 0, lastTickAt: Double? = nil, observer: ObserverReport? = nil,
        classifier: ClassifierReport? = nil,
        decision: Decision? = nil, alerts: [LoopAlert] = [], policy: Policy, policyVersion: String,
        lastReport: TickReport? = nil
    ) {
        self.tick = tick
        self.lastTickAt = lastTickAt
        self.observer = observer
        self.classifier = classifier
        self.decision = decision
        self.alerts = alerts
        self.policy = policy
        self.policyVersion = policyVersion
        self.lastReport = lastReport
    }
}

/// Remembers when each level-triggered condition started, so an alert that holds tick after tick
/// keeps its original `since`.
struct AlertBook {
    private struct Key: Hashable {
        var kind: String
        var upstream: String?
        var tenant: String?
        var detail: String?
    }

    private var since: [Key: Double] = [:]

    /// The engine's alerts for this tick as loop alerts; conditions that ended are forgotten.
    mutating func convert(_ alerts: [EngineAlert], now: Double) -> [LoopAlert] {
        var next: [Key: Double] = [:]
        let converted = alerts.map { alert -> LoopAlert in
            let key = Key(
                kind: alert.kind, upstream: alert.upstream, tenant: alert.tenant, detail: alert.dimension?.rawValue)
            let start = since[key] ?? next[key] ?? now
            next[key] = start
            return LoopAlert(
                kind: alert.kind, severity: LoopAlert.Severity(rawValue: alert.severity.rawValue) ?? .warning,
                upstream: alert.upstream, tenant: alert.tenant, message: alert.message, since: start)
        }
        since = next
        return converted
    }
}

extension LoopAlert {
    /// The order of `/v1/alerts`: kind, then subject.
    static func ordered(_ lhs: LoopAlert, _ rhs: LoopAlert) -> Bool {
        (lhs.kind, lhs.upstream ?? "", lhs.tenant ?? "", lhs.gateway ?? "", lhs.message)
            < (rhs.kind, rhs.upstream ?? "", rhs.tenant ?? "", rhs.gateway ?? "", rhs.message)
    }
}
