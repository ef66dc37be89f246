// AllotSimulation — see README.md, "Simulator".
//
// The contract between the simulation run (scenario → upstream, tenants, gateways, strategy) and
// the metrics/report side (report.json, timeline.csv, timeline.svg, the table). A run records
// what happened; the metrics are computed from this record alone, the same way for every
// strategy, so a baseline can never be judged by different rules than `allot`.

/// Everything one strategy's run of one scenario recorded.
public struct SimulationTrace: Sendable, Equatable {
    public var scenario: String
    public var strategy: String
    public var seed: UInt64
    /// Simulated seconds.
    public var durationSeconds: Double
    /// Width of each `samples` interval in seconds (10 s by default).
    public var sampleIntervalSeconds: Double
    public var pools: [TracePool]
    public var tenants: [TraceTenant]
    /// One per interval, in time order; `samples[k]` covers `[k·interval, (k+1)·interval)`.
    public var samples: [TraceSample]
    /// Every task that arrived (finished, failed or still running at the end).
    public var tasks: [TaskOutcome]
    /// Times (s) at which any pool's hidden true capacity changed: the steps that change its RPM or TPM (one that
    /// repeats the step before it is none).
    public var capacityChangeTimes: [Double]
    /// Times (s) at which the latency warning of a capacity drop begins (`latency_warning_s` before it), sorted: the
    /// next change's story starts there, and convergence after the change before is judged only until then.
    public var warningStartTimes: [Double]

    public init(
        scenario: String, strategy: String, seed: UInt64, durationSeconds: Double, sampleIntervalSeconds: Double,
        pools: [TracePool], tenants: [TraceTenant], samples: [TraceSample], tasks: [TaskOutcome],
        capacityChangeTimes: [Double], warningStartTimes: [Double] = []
    ) {
        self.scenario = scenario
        self.strategy = strategy
        self.seed = seed
        self.durationSeconds = durationSeconds
        self.sampleIntervalSeconds = sampleIntervalSeconds
        self.pools = pools
        self.tenants = tenants
        self.samples = samples
        self.tasks = tasks
        self.capacityChangeTimes = capacityChangeTimes
        self.warningStartTimes = warningStartTimes
    }
}

public struct TracePool: Sendable, Equatable {
    public var id: String
    /// Capacity declared in the policy (what `static` provisions against).
    public var declaredRPM: Double
    public var declaredTPM: Double

    public init(id: String, declaredRPM: Double, declaredTPM: Double) {
        self.id = id
        self.declaredRPM = declaredRPM
        self.declaredTPM = declaredTPM
    }
}

public struct TraceTenant: Sendable, Equatable {
    public var id: String
    public var tier: String
    public var pool: String
    /// Weight, floor (per minute, against the declared capacity) and ceiling used to compute each tenant's
    /// entitlement: its terms as the engine resolves them, the tier's with the policy's tenant entry on top.
    public var weight: Double
    public var floorRPM: Double
    public var floorTPM: Double
    /// An absolute ceiling, per minute (nil: none, or one given as a share).
    public var ceilingRPM: Double?
    public var ceilingTPM: Double?
    /// A ceiling given as a share of the pool (`"20%"` → 0.2): resolved against the true capacity of each interval,
    /// as the engine resolves it against the capacity it allocates (outside evaluation round 33: resolved against
    /// the declared capacity, `allot` was counted as starving free tenants it held to 20 % of a pool cut to 400 of a
    /// declared 1,000 rpm — 27.3 starved tenant-minutes that were its policy).
    public var ceilingShareRPM: Double?
    public var ceilingShareTPM: Double?

    /// Its ceiling per minute in each dimension, a share resolved against a pool capacity of `rpm` and `tpm`
    /// (infinity: none).
    public func ceiling(rpm: Double, tpm: Double) -> (rpm: Double, tpm: Double) {
        (
            min(ceilingRPM ?? .infinity, ceilingShareRPM.map { $0 * rpm } ?? .infinity),
            min(ceilingTPM ?? .infinity, ceilingShareTPM.map { $0 * tpm } ?? .infinity)
        )
    }

    /// Whether it has a ceiling in either dimension.
    public var hasCeiling: Bool {
        ceilingRPM != nil || ceilingTPM != nil || ceilingShareRPM != nil || ceilingShareTPM != nil
    }
    /// Simulated time of the tenant's first request (nil if it never sent one).
    public var firstRequestAt: Double?
    /// Simulated time at which the tenant first had its own allocation at its gateways
    /// (for baselines: when the strategy first gave it capacity). nil if never.
    public var firstAllocationAt: Double?
    /// Its group (``ScenarioTenant/group``, or the policy's): in each interval ``weight`` is shared with the group's
    /// other tenants on the pool that have arrived demand then, as the engine shares it among the active ones.
    public var group: String?

    public init(
        id: String, tier: String, pool: String, weight: Double, floorRPM: Double, floorTPM: Double,
        ceilingRPM: Double?, ceilingTPM: Double?, ceilingShareRPM: Double? = nil, ceilingShareTPM: Double? = nil,
        firstRequestAt: Double?, firstAllocationAt: Double?, group: String? = nil
    ) {
        self.group = group
        self.id = id
        self.tier = tier
        self.pool = pool
        self.weight = weight
        self.floorRPM = floorRPM
        self.floorTPM = floorTPM
        self.ceilingRPM = ceilingRPM
        self.ceilingTPM = ceilingTPM
        self.ceilingShareRPM = ceilingShareRPM
        self.ceilingShareTPM = ceilingShareTPM
        self.firstRequestAt = firstRequestAt
        self.firstAllocationAt = firstAllocationAt
    }
}

/// One interval. All rates are per minute, averaged over the interval.
public struct TraceSample: Sendable, Equatable {
    public var start: Double
    public var pools: [PoolSample]
    /// Same order as `SimulationTrace.tenants`.
    public var tenants: [TenantSample]

    public init(start: Double, pools: [PoolSample], tenants: [TenantSample]) {
        self.start = start
        self.pools = pools
        self.tenants = tenants
    }
}

public struct PoolSample: Sendable, Equatable {
    /// Hidden true capacity during the interval.
    public var trueRPM: Double
    public var trueTPM: Double
    /// Requests and tokens per minute the tenants wanted to send (their offered load, before any
    /// admission control or retry inflation), and what the upstream served.
    public var demandRPM: Double
    public var demandTPM: Double
    public var servedRPM: Double
    public var servedTPM: Double
    /// Counts in the interval.
    public var upstreamAttempts: Int
    public var upstream429s: Int
    public var upstreamOverloaded: Int
    /// Allot's capacity estimate (nil for baselines).
    public var estimatedRPM: Double?
    public var estimatedTPM: Double?

    public init(
        trueRPM: Double, trueTPM: Double, demandRPM: Double, demandTPM: Double, servedRPM: Double, servedTPM: Double,
        upstreamAttempts: Int, upstream429s: Int, upstreamOverloaded: Int, estimatedRPM: Double?, estimatedTPM: Double?
    ) {
        self.trueRPM = trueRPM
        self.trueTPM = trueTPM
        self.demandRPM = demandRPM
        self.demandTPM = demandTPM
        self.servedRPM = servedRPM
        self.servedTPM = servedTPM
        self.upstreamAttempts = upstreamAttempts
        self.upstream429s = upstream429s
        self.upstreamOverloaded = upstreamOverloaded
        self.estimatedRPM = estimatedRPM
        self.estimatedTPM = estimatedTPM
    }
}

public struct TenantSample: Sendable, Equatable {
    /// Offered load (calls the tenant's tasks wanted to make), per minute.
    public var demandRPM: Double
    public var demandTPM: Double
    /// Served by the upstream (successful calls), per minute.
    public var servedRPM: Double
    public var servedTPM: Double
    /// The tenant's allocation summed over gateways (the strategy's quota for it; nil when the
    /// strategy has no per-tenant quota, e.g. fifo-backoff).
    public var allocationRPM: Double?
    public var allocationTPM: Double?
    /// Local denials and upstream 429s this tenant saw in the interval.
    public var denials: Int
    public var upstream429s: Int
    /// Upstream overload refusals (503/529) this tenant saw in the interval: throttling too, by the upstream.
    public var upstreamOverloaded: Int
    /// Its calls that waited in a gateway's admission queue for 5 s or longer (counted once each, in the interval
    /// they left the queue or the first one they had waited that long by its close): held back, not paced.
    public var longQueueWaits: Int
    /// Every way the tenant was throttled in the interval: local denials, upstream 429s, overload refusals and
    /// long waits in a queue.
    public var throttles: Int { denials + upstream429s + upstreamOverloaded + longQueueWaits }
    /// Whether some call of the tenant's was held back at some moment of the interval: waiting in a gateway's
    /// admission queue, or for a retry after a denial or an upstream refusal. A tenant with nothing held back is
    /// getting all it asks for now. (True when unknown.)
    public var heldBack: Bool
    /// The tasks that arrived in the interval × their mean calls (and × mean tokens per call), per minute:
    /// the demand the Poisson draw actually produced, where `demandRPM` is its expectation. The same for
    /// every strategy; entitlements are judged against it (``RunMetrics``).
    public var arrivedRPM: Double
    public var arrivedTPM: Double

    public init(
        demandRPM: Double, demandTPM: Double, servedRPM: Double, servedTPM: Double, allocationRPM: Double?,
        allocationTPM: Double?, denials: Int, upstream429s: Int, upstreamOverloaded: Int = 0, longQueueWaits: Int = 0,
        heldBack: Bool = true,
        arrivedRPM: Double? = nil, arrivedTPM: Double? = nil
    ) {
        self.demandRPM = demandRPM
        self.demandTPM = demandTPM
        self.arrivedRPM = arrivedRPM ?? demandRPM
        self.arrivedTPM = arrivedTPM ?? demandTPM
        self.servedRPM = servedRPM
        self.servedTPM = servedTPM
        self.allocationRPM = allocationRPM
        self.allocationTPM = allocationTPM
        self.denials = denials
        self.upstream429s = upstream429s
        self.upstreamOverloaded = upstreamOverloaded
        self.longQueueWaits = longQueueWaits
        self.heldBack = heldBack
    }
}

public struct TaskOutcome: Sendable, Equatable {
    /// Index into `SimulationTrace.tenants`.
    public var tenant: Int
    public var taskClass: String
    public var arrival: Double
    /// Absolute deadline (s).
    public var deadline: Double
    /// When the last call finished; nil if the task never completed (gave up or ran out of time).
    public var finished: Double?

    public init(tenant: Int, taskClass: String, arrival: Double, deadline: Double, finished: Double?) {
        self.tenant = tenant
        self.taskClass = taskClass
        self.arrival = arrival
        self.deadline = deadline
        self.finished = finished
    }

    /// Completed by its deadline.
    public var metSLO: Bool { finished.map { $0 <= deadline } ?? false }
}
