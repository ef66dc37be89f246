import AllotCore
import Foundation

/// One simulated story (docs/scenarios.md): upstream pools with a hidden true capacity, agentic
/// tenants, how many gateways, and the metric the story is about. Decoded and validated from JSON
/// by ``Scenario/decode(_:source:)``; `count` is already expanded into individual tenants.
public struct Scenario: Sendable, Equatable {
    public var name: String
    public var description: String
    public var headline: ScenarioHeadline
    /// Simulated seconds.
    public var durationSeconds: Double
    public var sampleIntervalSeconds: Double
    public var gateways: Int
    /// The loop's tick interval (also `equal-split`'s); nil: the default policy's.
    public var tickIntervalSeconds: Double?
    public var pools: [ScenarioPool]
    public var tenants: [ScenarioTenant]
    /// Per tenant, in `tenants`' order, the file's `tenants` entry it was expanded from, so that a warning names
    /// the entry once, not each tenant of its `count`. Empty for a scenario built in code: each tenant is then
    /// its own entry.
    public var tenantEntries: [ScenarioTenantEntry]

    public init(
        name: String, description: String, headline: ScenarioHeadline, durationSeconds: Double,
        sampleIntervalSeconds: Double = 10, gateways: Int = 3, tickIntervalSeconds: Double? = nil,
        pools: [ScenarioPool], tenants: [ScenarioTenant], tenantEntries: [ScenarioTenantEntry] = []
    ) {
        self.name = name
        self.description = description
        self.headline = headline
        self.durationSeconds = durationSeconds
        self.sampleIntervalSeconds = sampleIntervalSeconds
        self.gateways = gateways
        self.tickIntervalSeconds = tickIntervalSeconds
        self.pools = pools
        self.tenants = tenants
        self.tenantEntries = tenantEntries
    }
}

/// One entry of a scenario file's `tenants`, as written (before `count` expansion).
public struct ScenarioTenantEntry: Sendable, Equatable {
    /// Its index in the file's `tenants`.
    public var index: Int
    /// Its `id` as written (with `count` > 1 its tenants are `id-01` … `id-NN`, numbered to the width of `count`, at
    /// least two digits).
    public var id: String
    public var count: Int

    public init(index: Int, id: String, count: Int) {
        self.index = index
        self.id = id
        self.count = count
    }

    /// How errors and warnings name the entry: `tenants[2] ("doc-reader" with count 5)`.
    public var label: String { "tenants[\(index)] (\"\(id)\"\(count > 1 ? " with count \(count)" : ""))" }
}

/// The metric a scenario's story is judged by, and which direction is better.
public struct ScenarioHeadline: Sendable, Equatable {
    /// A report metric key: `utilisation`, `upstream_429_rate`, `starvation_tenant_minutes`,
    /// `total_variation`, `convergence_s`, `time_to_first_allocation_s`, or a per-tier one
    /// (`slo_attainment`, `task_latency_p50_s`, `task_latency_p95_s`, `task_latency_p99_s`, `jain`)
    /// with ``tier``.
    public var metric: String
    public var tier: String?
    public var higherIsBetter: Bool

    public init(metric: String, tier: String? = nil, higherIsBetter: Bool) {
        self.metric = metric
        self.tier = tier
        self.higherIsBetter = higherIsBetter
    }

    public static let globalMetrics = [
        "utilisation", "upstream_429_rate", "starvation_tenant_minutes", "sustained_starvation_tenant_minutes",
        "total_variation", "convergence_s", "time_to_first_allocation_s",
    ]
    public static let tierMetrics = [
        "slo_attainment", "task_latency_p50_s", "task_latency_p95_s", "task_latency_p99_s", "jain",
    ]
    /// The metrics that are better higher; every other is better lower (`headline.better` must agree).
    public static let higherIsBetter: Set<String> = ["utilisation", "slo_attainment", "jain"]

    /// `metric` or `metric[tier]`, for tables.
    public var label: String { tier.map { "\(metric)[\($0)]" } ?? metric }
}

extension Scenario {
    /// The start of the run's last trace interval (the last may be shorter than `sample_interval_s`).
    public var lastSampleStart: Double {
        (max(1, (durationSeconds / sampleIntervalSeconds).rounded(.up)) - 1) * sampleIntervalSeconds
    }

    /// When some pool's true capacity changes within the run, sorted: each step that changes rpm or tpm from the
    /// step before it, at or before the start of the run's last trace interval (``lastSampleStart``). A step that
    /// repeats the one before it changes nothing; counted as a change, convergence would be measured on a pool that
    /// never moved. A step inside the last interval has no interval of its own to judge it by: counted, every
    /// strategy's convergence read "never".
    public var capacityChangeTimes: [Double] {
        var changes: [Double] = []
        for pool in pools {
            for (previous, step) in zip(pool.capacity, pool.capacity.dropFirst())
            where step.at <= lastSampleStart && (step.rpm != previous.rpm || step.tpm != previous.tpm) {
                changes.append(step.at)
            }
        }
        return changes.sorted()
    }

    /// When the latency warning of a capacity drop begins (`latency_warning_s` before each step that lowers rpm or
    /// tpm, not before t = 0), sorted; empty without warnings.
    public var warningStartTimes: [Double] {
        var starts: [Double] = []
        for pool in pools where pool.latencyWarningSeconds > 0 {
            for (previous, step) in zip(pool.capacity, pool.capacity.dropFirst())
            where step.at < durationSeconds && step.drops(from: previous) {
                starts.append(max(0, step.at - pool.latencyWarningSeconds))
            }
        }
        return starts.sorted()
    }
}

/// Which provider's headers and error statuses the simulated upstream speaks.
public enum ProviderStyle: String, Sendable, Equatable, CaseIterable {
    case openai, anthropic
}

/// One upstream pool of a scenario.
public struct ScenarioPool: Sendable, Equatable {
    public var id: String
    public var provider: ProviderStyle
    public var declaredRPM: Double
    public var declaredTPM: Double
    /// The hidden true capacity, piecewise constant; the first step starts at 0.
    public var capacity: [CapacityStep]
    public var latency: LatencyModel
    /// Seconds before each capacity drop during which latency already rises.
    public var latencyWarningSeconds: Double
    public var overload: [OverloadWindow]
    public var headerJitter: Double
    public var headerMissing: Double

    public init(
        id: String, provider: ProviderStyle, declaredRPM: Double, declaredTPM: Double, capacity: [CapacityStep],
        latency: LatencyModel = LatencyModel(), latencyWarningSeconds: Double = 0, overload: [OverloadWindow] = [],
        headerJitter: Double = 0, headerMissing: Double = 0
    ) {
        self.id = id
        self.provider = provider
        self.declaredRPM = declaredRPM
        self.declaredTPM = declaredTPM
        self.capacity = capacity
        self.latency = latency
        self.latencyWarningSeconds = latencyWarningSeconds
        self.overload = overload
        self.headerJitter = headerJitter
        self.headerMissing = headerMissing
    }

    /// The true capacity step in force at `time`.
    public func capacity(at time: Double) -> CapacityStep {
        var current = capacity[0]
        for step in capacity where step.at <= time { current = step }
        return current
    }
}

public struct CapacityStep: Sendable, Equatable {
    public var at: Double
    public var rpm: Double
    public var tpm: Double

    public init(at: Double, rpm: Double, tpm: Double) {
        self.at = at
        self.rpm = rpm
        self.tpm = tpm
    }

    /// Whether this step lowers the pool's rpm or tpm from `previous` (a drop, which a latency warning precedes).
    public func drops(from previous: CapacityStep) -> Bool { rpm < previous.rpm || tpm < previous.tpm }
}

/// Latency of one call: `base + per-1k-output × completion/1000`, times a factor that grows
/// linearly from 1 at utilisation `knee` to `maxFactor` at utilisation 1 (queueing upstream).
public struct LatencyModel: Sendable, Equatable {
    public var baseMs: Double
    public var perThousandOutputTokensMs: Double
    public var knee: Double
    public var maxFactor: Double

    public init(baseMs: Double = 600, perThousandOutputTokensMs: Double = 20, knee: Double = 0.8, maxFactor: Double = 4) {
        self.baseMs = baseMs
        self.perThousandOutputTokensMs = perThousandOutputTokensMs
        self.knee = knee
        self.maxFactor = maxFactor
    }
}

/// A window in which a fraction of attempts is answered with an overload error (529 / 503).
public struct OverloadWindow: Sendable, Equatable {
    public var from: Double
    public var to: Double
    public var rate: Double

    public init(from: Double, to: Double, rate: Double) {
        self.from = from
        self.to = to
        self.rate = rate
    }
}

/// How a tenant's clients behave when denied.
public enum TenantBehaviour: String, Sendable, Equatable, CaseIterable {
    /// Waits the denial's retry-after, declares honest token estimates.
    case honest
    /// Retries a denial at once, ignores retry-after, and declares half its real token estimate.
    case gaming
}

/// One tenant (after `count` expansion).
public struct ScenarioTenant: Sendable, Equatable {
    public var id: String
    public var tier: String
    public var pool: String
    /// Piecewise-constant task arrival rate; zero before the first step.
    public var arrivals: [ArrivalStep]
    /// The task its arrivals bring from t = 0 (until the first of `taskChanges`).
    public var task: TaskShape
    /// Later shapes of its tasks (`task_changes`), by `at`, increasing: a task takes the shape in force when it
    /// arrives, for all of its calls. The class never changes.
    public var taskChanges: [TaskChange]
    public var behaviour: TenantBehaviour
    public var maxRetries: Int
    /// The quota the `static` baseline provisioned for this tenant (per minute); nil: the weight rule's. Other
    /// strategies ignore it.
    public var staticQuota: StaticQuota?
    /// The customer it belongs to (`group`): the policy's `tenants` entry for it gets this group, whose active
    /// tenants on a pool share one weight (policies/README.md, *Groups*). nil: none, or the policy's own.
    public var group: String?

    public init(
        id: String, tier: String, pool: String, arrivals: [ArrivalStep], task: TaskShape,
        taskChanges: [TaskChange] = [], behaviour: TenantBehaviour = .honest, maxRetries: Int = 6,
        staticQuota: StaticQuota? = nil, group: String? = nil
    ) {
        self.group = group
        self.id = id
        self.tier = tier
        self.pool = pool
        self.arrivals = arrivals
        self.task = task
        self.taskChanges = taskChanges
        self.behaviour = behaviour
        self.maxRetries = maxRetries
        self.staticQuota = staticQuota
    }

    /// Every shape its tasks take: `task`, then each change's.
    public var shapes: [TaskShape] { [task] + taskChanges.map(\.task) }

    /// The position in ``shapes`` of the shape in force at `time`.
    public func shapeIndex(at time: Double) -> Int {
        var index = 0
        for (position, change) in taskChanges.enumerated() where change.at <= time { index = position + 1 }
        return index
    }

    /// The shape at position `index` of ``shapes``.
    public func shape(_ index: Int) -> TaskShape { index == 0 ? task : taskChanges[index - 1].task }

    /// The shape of a task arriving at `time`.
    public func task(at time: Double) -> TaskShape {
        shape(shapeIndex(at: time))
    }

    /// When its first task could be due: for each shape, its first arrival step with a rate above 0 within the
    /// shape's span (from its change, or 0, to the next change or `end`), plus the shape's deadline; the earliest.
    public func earliestDue(before end: Double) -> Double? {
        var earliest: Double?
        for index in 0..<shapes.count {
            let from = index == 0 ? 0 : taskChanges[index - 1].at
            let to = index < taskChanges.count ? taskChanges[index].at : end
            let starts = [from] + arrivals.map(\.at).filter { $0 > from && $0 < to }
            guard let first = starts.first(where: { arrivalRate(at: $0) > 0 }) else { continue }
            let due = first + shape(index).deadlineSeconds
            earliest = min(earliest ?? due, due)
        }
        return earliest
    }

    /// Calls and tokens per minute its arrivals schedule, averaged over `[start, start + length)`: the arrival rate
    /// times the mean calls (and tokens) of the shape in force, each piece weighted by how long it lasts.
    public func averageLoad(from start: Double, length: Double) -> (rpm: Double, tpm: Double) {
        guard !taskChanges.isEmpty else {
            let rpm = averageArrivalRate(from: start, length: length) * task.meanCalls
            return (rpm, rpm * task.meanTokensPerCall)
        }
        var load = (rpm: 0.0, tpm: 0.0)
        var t = start
        let end = start + length
        while t < end {
            let next = min(end, taskChanges.first(where: { $0.at > t })?.at ?? end)
            let shape = task(at: t)
            let rpm = averageArrivalRate(from: t, length: next - t) * shape.meanCalls
            load.rpm += rpm * (next - t) / length
            load.tpm += rpm * shape.meanTokensPerCall * (next - t) / length
            t = next
        }
        return load
    }

    /// Tasks per minute at `time`.
    public func arrivalRate(at time: Double) -> Double {
        var rate = 0.0
        for step in arrivals where step.at <= time { rate = step.tasksPerMinute }
        return rate
    }

    /// Tasks per minute averaged over `[start, start + length)`, the steps weighted by how long each is in force.
    public func averageArrivalRate(from start: Double, length: Double) -> Double {
        var total = 0.0
        var t = start
        let end = start + length
        while t < end {
            let next = min(end, arrivals.first(where: { $0.at > t })?.at ?? end)
            total += arrivalRate(at: t) * (next - t)
            t = next
        }
        return total / length
    }
}

/// A tenant's task shape from `at` on (`task_changes`): what its tasks arriving from then make.
public struct TaskChange: Sendable, Equatable {
    public var at: Double
    public var task: TaskShape

    public init(at: Double, task: TaskShape) {
        self.at = at
        self.task = task
    }
}

/// A quota set by hand, per minute: what `static` provisioned for a tenant (one set at onboarding that went stale).
public struct StaticQuota: Sendable, Equatable {
    public var rpm: Double
    public var tpm: Double

    public init(rpm: Double, tpm: Double) {
        self.rpm = rpm
        self.tpm = tpm
    }
}

public struct ArrivalStep: Sendable, Equatable {
    public var at: Double
    public var tasksPerMinute: Double

    public init(at: Double, tasksPerMinute: Double) {
        self.at = at
        self.tasksPerMinute = tasksPerMinute
    }
}

/// What one agentic task does: `calls` LLM calls, `parallelism` of them in flight at once.
public struct TaskShape: Sendable, Equatable {
    public var taskClass: TaskClass
    public var minCalls: Int
    public var maxCalls: Int
    public var parallelism: Int
    public var promptTokens: TokenShape
    public var completionTokens: TokenShape
    public var deadlineSeconds: Double
    public var thinkSeconds: Double

    public init(
        taskClass: TaskClass, minCalls: Int, maxCalls: Int, parallelism: Int, promptTokens: TokenShape,
        completionTokens: TokenShape, deadlineSeconds: Double, thinkSeconds: Double = 0
    ) {
        self.taskClass = taskClass
        self.minCalls = minCalls
        self.maxCalls = maxCalls
        self.parallelism = parallelism
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.deadlineSeconds = deadlineSeconds
        self.thinkSeconds = thinkSeconds
    }

    /// Mean tokens (prompt + completion) of one call: of the draws, clamped at 1 (``TokenShape/expected``).
    public var meanTokensPerCall: Double { promptTokens.expected + completionTokens.expected }
    public var meanCalls: Double { Double(minCalls + maxCalls) / 2 }
}

/// A normal distribution of token counts, clamped to at least 1.
public struct TokenShape: Sendable, Equatable {
    public var mean: Double
    public var sd: Double

    public init(mean: Double, sd: Double) {
        self.mean = mean
        self.sd = sd
    }

    /// The mean of the draws, `E[max(1, X)]` for `X ~ N(mean, sd)`: `mean` itself unless `sd` is a good part of
    /// it. A prompt of mean 2,000 and sd 6,000 draws 3,526 tokens a call on average, not 2,000 — demand and
    /// entitlement read at `mean` were a third short.
    public var expected: Double {
        guard sd > 0, sd.isFinite else { return max(1, mean) }
        let z = (1 - mean) / sd
        let below = 0.5 * erfc(-z / 2.0.squareRoot())
        let density = exp(-z * z / 2) / (2 * Double.pi).squareRoot()
        return below + mean * (1 - below) + sd * density
    }
}
