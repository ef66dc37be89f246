import AllotCore
import AllotEnforcement
import AllotProtocol
import AllotSignals
import Foundation

/// One strategy's run of one scenario: a discrete-event simulation on a virtual clock.
///
/// Tenants' tasks arrive (Poisson, by the scenario's piecewise rate) and fan out into calls, at
/// most `parallelism` in flight per task. Each call goes through one of the scenario's gateways
/// (round-robin per tenant; `fifo-backoff`'s all through the first, its one global bucket), each an
/// `AllotEnforcement.Enforcer` whose limits come from the strategy (the real loop's slices for `allot`; fixed,
/// re-divided or global buckets for the baselines). Admitted calls go to the simulated upstream; answers come back
/// after their latency; 429s and overloads are retried per the strategy's client and the tenant's behaviour. Every
/// `sample_interval_s` the counters become one ``TraceSample``.
///
/// Not `Sendable`: it lives in the one task that runs the simulation.
final class SimulationRun {
    let scenario: Scenario
    let strategy: SimulationStrategy
    let seed: UInt64
    let policy: Policy
    let tickInterval: Double
    let epoch = 1_800_000_000.0

    private var queue = EventQueue()
    private var upstreams: [SimUpstream]
    private var tenants: [TenantRun]
    private var tasks: [TaskRun] = []
    private var calls: [CallRun] = []
    private let gateways: [Enforcer]
    private var wakeScheduled: [Double?]
    private let inbox = DecisionInbox()
    private var allot: AllotDriver?
    private var baselineVersion: Int64 = 0
    private var retryRandom: SimRandom
    private var poolIndex: [String: Int] = [:]
    /// Per tenant: the allocation summed over gateways (per minute), as of the last tick.
    private var allocation: [(rpm: Double, tpm: Double)?]
    /// Per tenant: simulated time of the last call it wanted to make (equal-split's "active").
    private var lastDemandAt: [Double]

    // Sampling.
    private var samples: [TraceSample] = []
    private var sampleIndex = 0
    private var tenantCounters: [TenantCounters]
    private var poolCounters: [PoolCounters]
    /// Per tenant: its calls held back now — waiting in a gateway's admission queue, or for a retry after a denial
    /// or an upstream refusal (``hold(_:)``).
    private var heldCalls: [Int]
    /// Calls waiting in a gateway's admission queue now, by id, with when they began to: one that has waited
    /// ``longQueueWait`` is counted once in its tenant's ``TenantCounters/longQueueWaits``.
    private var queuedSince: [Int: Double] = [:]
    private var now = 0.0
    /// `ALLOT_SIM_DEBUG`: the run's trace on stderr (see docs/scenarios.md), ending with ``deniedBy``.
    private let debug: Bool
    /// `ALLOT_SIM_TENANTS`: the tenants whose allocations are traced after every tick of `allot` (`*`: all).
    private let watched: Set<String>?
    /// Where the traces go, one line at a time (without its newline): stderr, or a test's collector.
    private let log: (String) -> Void
    /// Local denials per tenant and code/limit, counted only with ``debug``.
    private var deniedBy: [String: Int] = [:]

    /// `environment`: where `ALLOT_SIM_DEBUG` and `ALLOT_SIM_TENANTS` are read; `log`: where their lines go.
    init(
        scenario: Scenario, strategy: SimulationStrategy, seed: UInt64, basePolicy: Policy? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        log: @escaping (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }
    ) async throws {
        self.scenario = scenario
        self.strategy = strategy
        self.seed = seed
        // Set and not "0", "false", "no" or empty (round 14: `ALLOT_SIM_DEBUG=0` switched the trace on).
        debug = environment["ALLOT_SIM_DEBUG"].map { !["", "0", "false", "no"].contains($0.lowercased()) } ?? false
        watched = environment["ALLOT_SIM_TENANTS"].map { Set($0.split(separator: ",").map(String.init)) }
        self.log = log
        policy = try SimulationPolicy.policy(for: scenario, base: basePolicy)
        tickInterval = policy.loop.intervalSeconds
        for (index, pool) in scenario.pools.enumerated() { poolIndex[pool.id] = index }
        upstreams = scenario.pools.enumerated().map { index, pool in
            SimUpstream(pool: pool, epoch: 1_800_000_000, seed: seed, stream: UInt64(index))
        }
        let pools = poolIndex
        tenants = scenario.tenants.enumerated().map { index, tenant in
            TenantRun(spec: tenant, pool: pools[tenant.pool]!, seed: seed, index: index)
        }
        retryRandom = SimRandom(seed: seed, stream: 0x7E7E)
        allocation = Array(repeating: nil, count: scenario.tenants.count)
        lastDemandAt = Array(repeating: -.infinity, count: scenario.tenants.count)
        tenantCounters = Array(repeating: TenantCounters(), count: scenario.tenants.count)
        heldCalls = Array(repeating: 0, count: scenario.tenants.count)
        poolCounters = Array(repeating: PoolCounters(), count: scenario.pools.count)
        wakeScheduled = Array(repeating: nil, count: scenario.gateways)
        if strategy == .allot {
            allot = try await AllotDriver(policy: policy, epoch: epoch)
        }
        let sink = allot?.sink
        // Lending idle allocation between tenants is part of Allot's enforcement. The baselines keep what
        // they are: `static` and `equal-split` enforce fixed per-tenant quotas (a tenant never gets more
        // than its quota), and `fifo-backoff` has a single shared bucket (nothing to lend).
        // Likewise the gateway's cap on its total admissions per upstream (`GatewayCap`) and its brake on a
        // lower stated limit.
        let allotEnforcement = strategy == .allot
        gateways = (0..<scenario.gateways).map { index in
            Enforcer(
                configuration: GatewayConfiguration(
                    gatewayID: "gw-\(index + 1)", maxQueueLength: 100_000, borrowIdle: allotEnforcement,
                    capWindow: allotEnforcement ? GatewayConfiguration.defaultCapWindow : 0,
                    newcomerCapShare: Self.newcomerCapShare(gateways: scenario.gateways),
                    followStatedLimits: allotEnforcement),
                telemetry: sink)
        }
    }

    /// Each simulated gateway's ``GatewayConfiguration/newcomerCapShare``, as an operator deploying `gateways`
    /// instances would set it: the default's 0.34 for the default's fleet of three, so that the whole fleet
    /// starts from 102 % of an upstream's capacity where no gateway holds a slice yet, whatever its size. At the
    /// default 0.34 each, eight gateways start from 2.7 times a pool, and a fresh 100-rpm pool behind eight
    /// answered 17 of its first 31 attempts with 429s (a held-out random scenario: 3.12 % of the run's
    /// attempts; 1.65 % with this, utilisation 87.4 → 88.3 %; behind 16 gateways another 0.99 → 0.45 %;
    /// tpm-vs-rpm behind 32, seeds 1–4, 0.24 → 0.17 %, utilisation 85.2 → 87.3 %). Below the share, each
    /// gateway still admits one `default` burst at once. The built-ins (three gateways) are unchanged.
    static func newcomerCapShare(gateways: Int) -> Double {
        0.34 * 3 / Double(max(1, gateways))
    }

    // MARK: Running

    func execute() async throws -> SimulationTrace {
        do {
            let trace = try await loop()
            await allot?.close()
            return trace
        } catch {
            await allot?.close()
            throw error
        }
    }

    private func loop() async throws -> SimulationTrace {
        // A name that is not a tenant of the scenario would trace nothing, silently (a typo, or a `count`ed id).
        if strategy == .allot, let watched {
            let unknown = watched.subtracting(scenario.tenants.map(\.id) + ["*"]).sorted()
            if !unknown.isEmpty {
                log(
                    "ALLOT_SIM_TENANTS: no tenant \(unknown.joined(separator: ", ")) in scenario \(scenario.name) "
                        + "(ignored; a tenant with count N is id-01 … id-NN, numbered to the width of N and at least "
                        + "two digits: id-001 … id-100 for 100)")
            }
        }
        for index in tenants.indices { scheduleNextArrival(index, after: 0) }
        queue.push(0, .tick)
        let end = scenario.durationSeconds
        var processed = 0
        var kinds = [0, 0, 0, 0, 0]
        var nextReport = 60.0
        while let event = queue.pop() {
            if event.time >= end { break }
            processed += 1
            if debug {
                switch event.kind {
                case .arrival: kinds[0] += 1
                case .ready: kinds[1] += 1
                case .done: kinds[2] += 1
                case .wake: kinds[3] += 1
                case .tick: kinds[4] += 1
                }
            }
            if debug, event.time >= nextReport {
                nextReport += 60
                let waiting = gateways.map {
                    (
                        $0.status(now: epoch + event.time).queueLength, $0.statistics.deniedTotal,
                        $0.statistics.reportedWhileQueued
                    )
                }
                log("t=\(Int(event.time)) events=\(processed) pending=\(queue.count) kinds=\(kinds) waiting=\(waiting)")
            }
            closeSamples(upTo: event.time)
            now = event.time
            switch event.kind {
            case .arrival(let tenant): arrive(tenant)
            case .ready(let call): dispatch(call)
            case .done(let call): finish(call)
            case .wake(let gateway):
                // A wake superseded by an earlier one is stale: that one already pumped and re-armed.
                guard wakeScheduled[gateway] == event.time else { continue }
                wakeScheduled[gateway] = nil
                gateways[gateway].pump(now: epoch + now)
                drainInbox()
                scheduleWake(gateway)
            case .tick:
                try await tick()
                queue.push(now + tickInterval, .tick)
                if debug, let allot {
                    for line in allot.observerTrace(at: now) { log(line) }
                }
                if let watched, let allot {
                    for line in allot.tenantTrace(at: now, tenants: watched) { log(line) }
                }
                // Between events the run never suspends (an actor hop to a free actor runs inline), so
                // without this a simulation holds a thread of the shared cooperative pool for its whole
                // run: on a 2-core machine two of them left every other task (a server's handlers, a
                // client's continuations) waiting for seconds. Yielding once a simulated tick lets them
                // in; the run's order of events, and so its result, does not depend on it.
                await Task.yield()
            }
        }
        closeSamples(upTo: end)
        if debug {
            for (key, count) in deniedBy.sorted(by: { $0.key < $1.key }) {
                log("denied \(key) \(count)")
            }
        }
        return trace()
    }

    // MARK: Tasks and calls

    private func scheduleNextArrival(_ tenant: Int, after time: Double) {
        var t = time
        let spec = tenants[tenant].spec
        while t < scenario.durationSeconds {
            let rate = spec.arrivalRate(at: t)
            let nextStep = spec.arrivals.first(where: { $0.at > t })?.at ?? .infinity
            if rate <= 0 {
                guard nextStep.isFinite else { return }
                t = nextStep
                continue
            }
            let gap = tenants[tenant].arrivals.exponential(mean: 60 / rate)
            if t + gap < nextStep {
                queue.push(t + gap, .arrival(tenant))
                return
            }
            // The rate changes before the next arrival: memorylessness lets us restart there.
            t = nextStep
        }
    }

    private func arrive(_ tenant: Int) {
        scheduleNextArrival(tenant, after: now)
        let spec = tenants[tenant].spec
        let shapeIndex = spec.shapeIndex(at: now)
        let shape = spec.shape(shapeIndex)
        var random = tenants[tenant].work
        let count = random.int(in: shape.minCalls...shape.maxCalls)
        tenants[tenant].work = random
        tenantCounters[tenant].arrivedTasks += 1
        tenantCounters[tenant].arrivedCalls += shape.meanCalls
        tenantCounters[tenant].arrivedTokens += shape.meanCalls * shape.meanTokensPerCall
        let task = tasks.count
        tasks.append(
            TaskRun(
                tenant: tenant, arrival: now, deadline: now + shape.deadlineSeconds,
                giveUpAt: now + 2 * shape.deadlineSeconds, calls: count, shape: shapeIndex))
        for _ in 0..<min(shape.parallelism, count) { startCall(task, at: now) }
    }

    private func startCall(_ task: Int, at time: Double) {
        let tenant = tasks[task].tenant
        let shape = tenants[tenant].spec.shape(tasks[task].shape)
        var random = tenants[tenant].work
        let prompt = max(1, Int(random.normal(mean: shape.promptTokens.mean, sd: shape.promptTokens.sd).rounded()))
        let completion = max(
            1, Int(random.normal(mean: shape.completionTokens.mean, sd: shape.completionTokens.sd).rounded()))
        tenants[tenant].work = random
        tasks[task].started += 1
        let id = calls.count
        calls.append(CallRun(task: task, tenant: tenant, prompt: prompt, completion: completion))
        queue.push(time, .ready(id))
    }

    /// The call waits (in a gateway's queue, or for a retry): its tenant is held back from now until it is released.
    private func hold(_ id: Int) {
        guard !calls[id].held else { return }
        calls[id].held = true
        heldCalls[calls[id].tenant] += 1
        tenantCounters[calls[id].tenant].heldBack = true
    }

    private func release(_ id: Int) {
        guard calls[id].held else { return }
        calls[id].held = false
        heldCalls[calls[id].tenant] -= 1
        if let since = queuedSince.removeValue(forKey: id) { countLongQueueWait(id, since: since) }
    }

    /// A call that waited in a gateway's queue for ``longQueueWait`` or longer throttled its tenant, as a denial
    /// does (counted once per call: when it leaves the queue, or at the close of an interval it is still waiting
    /// in).
    private func countLongQueueWait(_ id: Int, since: Double) {
        guard !calls[id].countedLongWait, now - since >= Self.longQueueWait else { return }
        calls[id].countedLongWait = true
        tenantCounters[calls[id].tenant].longQueueWaits += 1
    }

    /// How long a call waits in a gateway's queue before it throttles its tenant for the starvation metric: a
    /// wait that long is being held back, not paced (the interactive class's maximum wait).
    static let longQueueWait = 5.0

    private func dispatch(_ id: Int) {
        release(id)
        let call = calls[id]
        let tenant = call.tenant
        guard !tasks[call.task].isOver else { return }
        if now >= tasks[call.task].giveUpAt {
            failTask(call.task)
            return
        }
        if tenants[tenant].firstRequestAt == nil {
            tenants[tenant].firstRequestAt = now
            if strategy == .static { tenants[tenant].firstAllocationAt = now }
        }
        lastDemandAt[tenant] = now
        // fifo-backoff is one global bucket and one FIFO queue: every call goes through the first gateway, which
        // enforces the whole declared capacity (``applyBaseline(_:)``).
        let gateway = strategy == .fifoBackoff ? 0 : tenants[tenant].nextGateway(of: gateways.count)
        calls[id].gateway = gateway
        let spec = tenants[tenant].spec
        // Every call carries its task's context, as an agent framework's gateway client would: the deadline, and
        // once one of the task's calls has been admitted, when that was (the task's work began then; until then
        // its calls rank by arrival, like calls of a task not started yet). For each strategy that enforces
        // per-tenant limits with the gateway library; fifo-backoff is one global FIFO by definition.
        let task = tasks[call.task]
        let withContext = strategy != .fifoBackoff
        let request = AdmissionRequest(
            tenant: strategy == .fifoBackoff ? Self.sharedTenant : spec.id, upstream: spec.pool,
            taskClass: strategy == .fifoBackoff ? .batch : spec.task.taskClass,
            estimatedTokens: spec.behaviour == .gaming ? (call.prompt + call.completion) / 2 : nil,
            promptTokens: call.prompt, taskID: "task-\(call.task)", retry: call.attempts + call.denials,
            taskStartedAt: withContext ? task.startedAt.map { epoch + $0 } : nil,
            taskDeadline: withContext ? epoch + task.deadline : nil)
        let inbox = self.inbox
        let submission = gateways[gateway].submit(request, now: epoch + now) { admission in
            inbox.post(id, admission)
        }
        switch submission {
        case .decided(let admission): decided(id, admission)
        case .queued:
            hold(id)
            queuedSince[id] = now
        }
        drainInbox()
        scheduleWake(gateway)
    }

    private func drainInbox() {
        while let (id, admission) = inbox.next() { decided(id, admission) }
    }

    private func scheduleWake(_ gateway: Int) {
        guard let next = gateways[gateway].nextWakeTime else { return }
        // A wake due now was just handled by the pump that preceded this call: the next one is later.
        let time = max(now + Self.wakeResolution, next - epoch)
        if let scheduled = wakeScheduled[gateway], scheduled <= time { return }
        wakeScheduled[gateway] = time
        queue.push(time, .wake(gateway))
    }

    private func decided(_ id: Int, _ admission: Admission) {
        let call = calls[id]
        switch admission {
        case .admitted(let ticket):
            release(id)
            guard !tasks[call.task].isOver else {
                gateways[call.gateway].release(ticket, now: epoch + now)
                return
            }
            calls[id].ticket = ticket
            if tasks[call.task].startedAt == nil { tasks[call.task].startedAt = now }
            let pool = tenants[call.tenant].pool
            let response = upstreams[pool].attempt(
                at: now, promptTokens: call.prompt, completionTokens: call.completion)
            calls[id].response = response
            poolCounters[pool].attempts += 1
            if response.kind == .success {
                // Served when the upstream takes it, the instant its capacity is spent: counted at completion, the
                // calls in flight across a drop to 1 rpm were served "after" it, 473 times the new capacity.
                tenantCounters[call.tenant].servedRequests += 1
                tenantCounters[call.tenant].servedTokens += Double(call.prompt + call.completion)
                poolCounters[pool].servedRequests += 1
                poolCounters[pool].servedTokens += Double(call.prompt + call.completion)
            }
            queue.push(now + response.latency, .done(id))
        case .denied(let denial):
            release(id)
            tenantCounters[call.tenant].denials += 1
            if debug {
                let spec = tenants[call.tenant].spec
                deniedBy["\(spec.id) \(spec.pool) \(denial.code)/\(denial.limit.rawValue)", default: 0] += 1
            }
            let behaviour = tenants[call.tenant].spec.behaviour
            // A denial without a retry-after is final (a task budget used up, a deadline passed): an agent
            // framework gives the task up rather than retrying into the same refusal every second. A gaming
            // tenant hammers on regardless.
            if denial.retryAfter == nil, behaviour != .gaming {
                failTask(call.task)
                return
            }
            let wait: Double
            if behaviour == .gaming {
                wait = 0.2
            } else if strategy == .fifoBackoff {
                wait = backoff(attempt: calls[id].denials)
            } else {
                wait = (denial.retryAfter ?? 1) * (1 + 0.1 * retryRandom.unit())
            }
            calls[id].denials += 1
            hold(id)
            queue.push(now + max(0.01, wait), .ready(id))
        }
    }

    private func finish(_ id: Int) {
        let call = calls[id]
        guard let response = call.response, let ticket = call.ticket else { return }
        calls[id].ticket = nil
        calls[id].response = nil
        let success = response.kind == .success
        gateways[call.gateway].complete(
            ticket,
            AttemptResult(
                status: response.status, promptTokens: success ? call.prompt : nil,
                completionTokens: success ? call.completion : nil, latency: response.latency,
                headers: response.headers, errorType: response.errorType),
            now: epoch + now)
        drainInbox()
        scheduleWake(call.gateway)
        let pool = tenants[call.tenant].pool
        switch response.kind {
        case .success:
            completeCall(call.task)
        case .quota, .overloaded:
            if response.kind == .quota {
                tenantCounters[call.tenant].upstream429s += 1
                poolCounters[pool].upstream429s += 1
            } else {
                tenantCounters[call.tenant].overloaded += 1
                poolCounters[pool].overloaded += 1
            }
            calls[id].attempts += 1
            let spec = tenants[call.tenant].spec
            guard calls[id].attempts <= spec.maxRetries, !tasks[call.task].isOver else {
                failTask(call.task)
                return
            }
            let wait: Double
            if spec.behaviour == .gaming {
                wait = 0.2
            } else if response.kind == .quota, strategy != .fifoBackoff,
                let advised = ProviderSignals(headerFields: response.headers, now: epoch + now).retryAfter
            {
                wait = advised * (1 + 0.1 * retryRandom.unit())
            } else {
                wait = backoff(attempt: calls[id].attempts - 1)
            }
            hold(id)
            queue.push(now + wait, .ready(id))
        }
    }

    /// Exponential backoff with full jitter: uniform in [0, min(32, 0.5 · 2^attempt)] seconds.
    private func backoff(attempt: Int) -> Double {
        let cap = min(32, 0.5 * pow(2, Double(min(attempt, 10))))
        return max(0.05, cap * retryRandom.unit())
    }

    private func completeCall(_ task: Int) {
        guard !tasks[task].isOver else { return }
        tasks[task].done += 1
        if tasks[task].done == tasks[task].calls {
            tasks[task].finished = now
            return
        }
        if tasks[task].started < tasks[task].calls {
            let think = tenants[tasks[task].tenant].spec.shape(tasks[task].shape).thinkSeconds
            startCall(task, at: now + think)
        }
    }

    private func failTask(_ task: Int) {
        tasks[task].failed = true
    }

    // MARK: Strategy ticks

    static let sharedTenant = "shared-pool"
    /// The smallest step between two wakes of one gateway's queue (1 ms of simulated time).
    static let wakeResolution = 0.001

    private func tick() async throws {
        switch strategy {
        case .allot:
            guard let allot else { return }
            try await allot.tick(at: now)
            // Take the new version; poll again enforcing it, which confirms a make-before-break shrink;
            // then publish the held growth here, at this instant, rather than from the publisher's own
            // task at an instant that would depend on scheduling; and take that too.
            try await syncGateways(allot)
            try await syncGateways(allot)
            try await allot.releaseHeldGrowth(at: now)
            try await syncGateways(allot)
        case .static:
            if baselineVersion == 0 { applyBaseline(staticLimits()) }
        case .equalSplit:
            applyBaseline(equalSplitLimits())
        case .fifoBackoff:
            if baselineVersion == 0 { applyBaseline(globalLimits()) }
        }
        for gateway in gateways.indices {
            gateways[gateway].pump(now: epoch + now)
            drainInbox()
            scheduleWake(gateway)
        }
        refreshAllocations()
    }

    /// Every gateway polls once, as `GET /v1/snapshot?gateway=ID` with the version it enforces, and applies
    /// what it gets.
    private func syncGateways(_ allot: AllotDriver) async throws {
        for (index, gateway) in gateways.enumerated() {
            if let snapshot = try await allot.poll(gateway: "gw-\(index + 1)", enforcing: gateway.enforcedVersion) {
                gateway.apply(snapshot, now: epoch + now)
            }
        }
    }

    /// Per-tenant limits (per minute, whole tenant) for a baseline.
    private struct Limits {
        var tenant: String
        var pool: String
        var tier: String
        var rpm: Double
        var tpm: Double
    }

    /// Each tenant's `static_quota`, else `declared × weight / Σweights` of its pool. The sum is over every tenant of
    /// the pool, those with a quota of their own included, so that giving one tenant a quota changes no other's:
    /// like quotas set by hand over time, they need not add up to the declared capacity. The tenants of a group on
    /// the pool share their weight, as provisioning one customer's keys would.
    private func staticLimits() -> [Limits] {
        var limits: [Limits] = []
        for (poolIndex, pool) in scenario.pools.enumerated() {
            let members = tenants.filter { $0.pool == poolIndex }
            let memberTerms = members.map { terms(of: $0) }
            var groupSize: [String: Int] = [:]
            for terms in memberTerms { if let group = terms.group { groupSize[group, default: 0] += 1 } }
            let weights = memberTerms.map { terms in terms.weight / Double(terms.group.flatMap { groupSize[$0] } ?? 1) }
            let total = weights.reduce(0, +)
            for (member, weight) in zip(members, weights) {
                let share = weight / total
                let quota = member.spec.staticQuota
                limits.append(
                    Limits(
                        tenant: member.spec.id, pool: pool.id, tier: member.spec.tier,
                        rpm: quota?.rpm ?? pool.declaredRPM * share, tpm: quota?.tpm ?? pool.declaredTPM * share))
            }
        }
        return limits
    }

    private func equalSplitLimits() -> [Limits] {
        var limits: [Limits] = []
        for (poolIndex, pool) in scenario.pools.enumerated() {
            let active = tenants.indices.filter { tenants[$0].pool == poolIndex && now - lastDemandAt[$0] <= 60 }
            guard !active.isEmpty else { continue }
            let share = 1 / Double(active.count)
            for index in active {
                let spec = tenants[index].spec
                limits.append(
                    Limits(
                        tenant: spec.id, pool: pool.id, tier: spec.tier, rpm: pool.declaredRPM * share,
                        tpm: pool.declaredTPM * share))
                if tenants[index].firstAllocationAt == nil, tenants[index].firstRequestAt != nil {
                    tenants[index].firstAllocationAt = now
                }
            }
        }
        return limits
    }

    /// `max_concurrency` for a gateway entry that bounds nothing.
    static let unboundedConcurrency = 1_000_000

    private func globalLimits() -> [Limits] {
        scenario.pools.map {
            Limits(tenant: Self.sharedTenant, pool: $0.id, tier: "standard", rpm: $0.declaredRPM, tpm: $0.declaredTPM)
        }
    }

    /// The tenant's terms as the engine resolves them (``Policy/terms(ofTenant:upstream:overrides:now:)``): its
    /// tier's weight, floor and ceiling, with what the policy's `tenants` gives it on top. `static` and the metrics'
    /// entitlement use these, so that a tenant given its own weight in tenants.json is judged by the terms `allot`
    /// was given (with only the tier's, one at weight 0.5 of a tier at 2 was entitled to twice what allot gave it).
    private func terms(of tenant: TenantRun) -> TenantTerms {
        policy.terms(ofTenant: tenant.spec.id, upstream: scenario.pools[tenant.pool].id, overrides: [], now: 0)
    }

    /// Hands each gateway an equal slice of `limits` as a snapshot (buckets of 10 s, like Allot's
    /// default), with no lease expiry — `fifo-backoff` the whole of them, as all its calls go through the first
    /// gateway. A per-tenant quota (`static`, `equal-split`) comes with the tenant's tier's
    /// `max_concurrency`, as `allot`'s gateways enforce it: provisioned with the quota, and the same for every
    /// strategy that knows tenants (outside evaluation round 10: 40-s answers held `allot`'s tenants to 64 × 60 ÷ 40
    /// calls a minute while `static`'s ran unbounded). `fifo-backoff`'s one global bucket knows no tenant.
    private func applyBaseline(_ limits: [Limits]) {
        baselineVersion += 1
        // fifo-backoff's one global bucket sits at the one gateway all its calls go through; the per-tenant
        // baselines split each quota evenly between the gateways, which the calls reach in turn.
        let share = strategy == .fifoBackoff ? 1 : 1 / Double(gateways.count)
        let entries = limits.map { limit in
            TenantEntry(
                id: limit.tenant, upstream: limit.pool, tier: limit.tier, priority: 0,
                rpm: Bucket(rate: limit.rpm * share, burst: limit.rpm * share / 6),
                tpm: Bucket(rate: limit.tpm * share, burst: limit.tpm * share / 6), queueWeight: 1,
                reason: Reasons(rpm: strategy.rawValue, tpm: strategy.rawValue),
                maxConcurrency: strategy == .fifoBackoff
                    ? Self.unboundedConcurrency
                    : policy.tier(named: limit.tier)?.maxConcurrency ?? Self.unboundedConcurrency)
        }
        let none = RateLimits(rpm: Bucket(rate: 0, burst: 0), tpm: Bucket(rate: 0, burst: 0))
        for gateway in gateways {
            let snapshot = Snapshot(
                version: baselineVersion, generatedAt: epoch + now, expiresAt: epoch + 1e9, refreshMs: 5_000,
                policyVersion: strategy.rawValue,
                upstreams: scenario.pools.map {
                    UpstreamEntry(
                        id: $0.id, state: "healthy", capacity: DimensionValues(rpm: $0.declaredRPM, tpm: $0.declaredTPM)
                    )
                },
                tenants: entries, defaultLimits: none, fallback: Fallback(tenants: [], defaultLimits: none))
            gateway.apply(snapshot, now: epoch + now)
        }
    }

    /// Each tenant's allocation summed over gateways, from the snapshots they enforce.
    private func refreshAllocations() {
        guard strategy != .fifoBackoff else { return }
        var byKey: [String: (rpm: Double, tpm: Double, idle: Bool)] = [:]
        for gateway in gateways {
            guard let snapshot = gateway.snapshot else { continue }
            for entry in snapshot.tenants {
                let key = entry.id + "\u{1}" + entry.upstream
                var sum = byKey[key] ?? (0, 0, true)
                sum.rpm += entry.rpm.rate
                sum.tpm += entry.tpm.rate
                sum.idle = sum.idle && entry.reason.rpm == "idle"
                byKey[key] = sum
            }
        }
        for index in tenants.indices {
            let spec = tenants[index].spec
            if let sum = byKey[spec.id + "\u{1}" + spec.pool] {
                allocation[index] = (sum.rpm, sum.tpm)
                if strategy == .allot, !sum.idle, sum.rpm > 0, tenants[index].firstRequestAt != nil,
                    tenants[index].firstAllocationAt == nil
                {
                    tenants[index].firstAllocationAt = now
                }
            } else if allocation[index] != nil {
                // Gone from every snapshot after having had an allocation: 0. Before its first allocation a
                // tenant has none (nil), so its entry is not counted as a move of its allocation.
                allocation[index] = (0, 0)
            }
        }
    }

    // MARK: Samples

    private func closeSamples(upTo time: Double) {
        let interval = scenario.sampleIntervalSeconds
        while Double(sampleIndex + 1) * interval <= time
            || (time >= scenario.durationSeconds
                && Double(sampleIndex) * interval < scenario.durationSeconds)
        {
            let start = Double(sampleIndex) * interval
            let length = min(interval, scenario.durationSeconds - start)
            let perMinute = 60 / length
            var tenantSamples: [TenantSample] = []
            tenantSamples.reserveCapacity(tenants.count)
            var poolDemand = Array(repeating: (rpm: 0.0, tpm: 0.0), count: scenario.pools.count)
            // Calls still waiting: one that has waited long enough is counted in this interval.
            for (id, since) in queuedSince { countLongQueueWait(id, since: since) }
            for index in tenants.indices {
                let spec = tenants[index].spec
                let (demandRPM, demandTPM) = spec.averageLoad(from: start, length: length)
                poolDemand[tenants[index].pool].rpm += demandRPM
                poolDemand[tenants[index].pool].tpm += demandTPM
                let counters = tenantCounters[index]
                // The calls (and tokens) the arrived tasks bring at their shapes' means; one shape: the same product.
                let arrived =
                    spec.taskChanges.isEmpty
                    ? (
                        rpm: Double(counters.arrivedTasks) * perMinute * spec.task.meanCalls,
                        tpm: Double(counters.arrivedTasks) * perMinute * spec.task.meanCalls
                            * spec.task.meanTokensPerCall
                    ) : (rpm: counters.arrivedCalls * perMinute, tpm: counters.arrivedTokens * perMinute)
                tenantSamples.append(
                    TenantSample(
                        demandRPM: demandRPM, demandTPM: demandTPM,
                        servedRPM: Double(counters.servedRequests) * perMinute,
                        servedTPM: counters.servedTokens * perMinute, allocationRPM: allocation[index]?.rpm,
                        allocationTPM: allocation[index]?.tpm, denials: counters.denials,
                        upstream429s: counters.upstream429s, upstreamOverloaded: counters.overloaded,
                        longQueueWaits: counters.longQueueWaits, heldBack: counters.heldBack,
                        arrivedRPM: arrived.rpm, arrivedTPM: arrived.tpm))
            }
            let poolSamples = scenario.pools.indices.map { index in
                let pool = scenario.pools[index]
                let capacity = averageCapacity(pool, from: start, length: length)
                let counters = poolCounters[index]
                let estimate = allot?.estimate(pool: pool.id)
                return PoolSample(
                    trueRPM: capacity.rpm, trueTPM: capacity.tpm, demandRPM: poolDemand[index].rpm,
                    demandTPM: poolDemand[index].tpm, servedRPM: Double(counters.servedRequests) * perMinute,
                    servedTPM: counters.servedTokens * perMinute, upstreamAttempts: counters.attempts,
                    upstream429s: counters.upstream429s, upstreamOverloaded: counters.overloaded,
                    estimatedRPM: estimate?.rpm, estimatedTPM: estimate?.tpm)
            }
            samples.append(TraceSample(start: start, pools: poolSamples, tenants: tenantSamples))
            for index in tenantCounters.indices {
                tenantCounters[index] = TenantCounters()
                tenantCounters[index].heldBack = heldCalls[index] > 0
            }
            for index in poolCounters.indices { poolCounters[index] = PoolCounters() }
            sampleIndex += 1
        }
    }

    /// Time-weighted mean task arrival rate over `[start, start + length)`.
    private func averageCapacity(_ pool: ScenarioPool, from start: Double, length: Double) -> (rpm: Double, tpm: Double)
    {
        var rpm = 0.0
        var tpm = 0.0
        var t = start
        let end = start + length
        while t < end {
            let next = min(end, pool.capacity.first(where: { $0.at > t })?.at ?? end)
            let step = pool.capacity(at: t)
            rpm += step.rpm * (next - t)
            tpm += step.tpm * (next - t)
            t = next
        }
        return (rpm / length, tpm / length)
    }

    private func trace() -> SimulationTrace {
        SimulationTrace(
            scenario: scenario.name, strategy: strategy.rawValue, seed: seed, durationSeconds: scenario.durationSeconds,
            sampleIntervalSeconds: scenario.sampleIntervalSeconds,
            pools: scenario.pools.map {
                TracePool(id: $0.id, declaredRPM: $0.declaredRPM, declaredTPM: $0.declaredTPM)
            },
            tenants: tenants.map { tenant in
                let terms = terms(of: tenant)
                let pool = scenario.pools[tenant.pool]
                func absolute(_ ceiling: Quantity) -> Double? {
                    guard case .absolute(let value) = ceiling, value.isFinite else { return nil }
                    return value
                }
                func share(_ ceiling: Quantity) -> Double? {
                    guard case .percent(let percent) = ceiling else { return nil }
                    return percent / 100
                }
                return TraceTenant(
                    id: tenant.spec.id, tier: tenant.spec.tier, pool: tenant.spec.pool, weight: terms.weight,
                    floorRPM: terms.floor.rpm.resolved(capacity: pool.declaredRPM),
                    floorTPM: terms.floor.tpm.resolved(capacity: pool.declaredTPM),
                    ceilingRPM: absolute(terms.ceiling.rpm), ceilingTPM: absolute(terms.ceiling.tpm),
                    ceilingShareRPM: share(terms.ceiling.rpm), ceilingShareTPM: share(terms.ceiling.tpm),
                    firstRequestAt: tenant.firstRequestAt, firstAllocationAt: tenant.firstAllocationAt,
                    group: terms.group)
            },
            samples: samples,
            tasks: tasks.map {
                TaskOutcome(
                    tenant: $0.tenant, taskClass: tenants[$0.tenant].spec.task.taskClass.rawValue, arrival: $0.arrival,
                    deadline: $0.deadline, finished: $0.finished)
            },
            capacityChangeTimes: scenario.capacityChangeTimes, warningStartTimes: scenario.warningStartTimes)
    }
}

/// Admissions decided later (a queued request admitted or denied), handed from the enforcer's
/// callback to the simulation loop.
///
/// `@unchecked Sendable`: `items` is only touched while holding `lock`.
final class DecisionInbox: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [(Int, Admission)] = []
    private var head = 0

    func post(_ call: Int, _ admission: Admission) {
        lock.withLock { items.append((call, admission)) }
    }

    func next() -> (Int, Admission)? {
        lock.withLock {
            guard head < items.count else {
                if head > 0 {
                    items.removeAll(keepingCapacity: true)
                    head = 0
                }
                return nil
            }
            defer { head += 1 }
            return items[head]
        }
    }
}

struct TenantRun {
    let spec: ScenarioTenant
    let pool: Int
    /// Task arrivals.
    var arrivals: SimRandom
    /// Call counts and token sizes.
    var work: SimRandom
    var firstRequestAt: Double?
    var firstAllocationAt: Double?
    private var gatewayCursor = 0

    init(spec: ScenarioTenant, pool: Int, seed: UInt64, index: Int) {
        self.spec = spec
        self.pool = pool
        arrivals = SimRandom(seed: seed, stream: 0x1000_0000 &+ UInt64(index))
        work = SimRandom(seed: seed, stream: 0x2000_0000 &+ UInt64(index))
        gatewayCursor = index
    }

    mutating func nextGateway(of count: Int) -> Int {
        defer { gatewayCursor &+= 1 }
        return gatewayCursor % count
    }
}

struct TaskRun {
    let tenant: Int
    let arrival: Double
    let deadline: Double
    let giveUpAt: Double
    let calls: Int
    /// Its shape: the position in its tenant's ``ScenarioTenant/shapes`` in force when it arrived.
    let shape: Int
    var started = 0
    var done = 0
    var finished: Double?
    var failed = false
    /// When its first call was admitted: its work began then (sent as the calls' `taskStartedAt`).
    var startedAt: Double?

    init(tenant: Int, arrival: Double, deadline: Double, giveUpAt: Double, calls: Int, shape: Int) {
        self.tenant = tenant
        self.arrival = arrival
        self.deadline = deadline
        self.giveUpAt = giveUpAt
        self.calls = calls
        self.shape = shape
    }

    var isOver: Bool { finished != nil || failed }
}

struct CallRun {
    let task: Int
    let tenant: Int
    let prompt: Int
    let completion: Int
    var gateway = 0
    /// Upstream failures so far (429s and overloads).
    var attempts = 0
    var denials = 0
    /// Counted in its tenant's held-back calls.
    var held = false
    /// Counted in its tenant's ``TenantCounters/longQueueWaits`` (once).
    var countedLongWait = false
    var ticket: Ticket?
    var response: SimUpstream.Response?

    init(task: Int, tenant: Int, prompt: Int, completion: Int) {
        self.task = task
        self.tenant = tenant
        self.prompt = prompt
        self.completion = completion
    }
}

struct TenantCounters {
    var servedRequests = 0
    var servedTokens = 0.0
    var denials = 0
    var upstream429s = 0
    var overloaded = 0
    /// Some call of the tenant's was held back during the interval (``SimulationRun/hold(_:)``).
    var heldBack = false
    /// Calls that waited in a gateway's queue for ``SimulationRun/longQueueWait`` or longer.
    var longQueueWaits = 0
    /// Tasks that arrived. Their arrival times come from the tenant's own random stream alone, so the
    /// count is the same for every strategy (the calls a task makes are drawn from a stream that the
    /// service's timing also draws from: the metrics use the mean instead).
    var arrivedTasks = 0
    /// Their mean calls and tokens, each at the shape it arrived with (read for a tenant whose shape changes).
    var arrivedCalls = 0.0
    var arrivedTokens = 0.0
}

struct PoolCounters {
    var servedRequests = 0
    var servedTokens = 0.0
    var attempts = 0
    var upstream429s = 0
    var overloaded = 0
}
