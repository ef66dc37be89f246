import AllotCore
import AllotLog
import AllotMetrics
import AllotProtocol
import AllotStore
import AllotTime

/// The feedback loop (SPEC 2): the four actors — Capacity Observer, Consumption Classifier,
/// Policy Engine, Allocation Publisher — driven by one clock. What `allot serve` and
/// `allot simulate` hold.
///
/// One tick (``tick(now:)``): read operator inputs; read the telemetry rows after the last one seen,
/// at most ``LoopConfiguration/maxEventsPerTick`` (never the whole table), once, shared by the
/// Observer and the Classifier; observe → classify → decide → publish; then gateway lag and drift.
/// Ticks never overlap. A tick that fails (the database is locked or gone, a snapshot cannot be
/// persisted) is logged, counted and alerted (`tick_failed`), and the last snapshot keeps being
/// served; a tick slower than half the interval is alerted (`tick_slow`).
///
/// In service ``start()`` ticks every `loop.interval_s` of the policy on the loop's clock (re-read
/// when the policy changes); the simulator instead calls ``tick(now:)`` on its virtual clock.
/// Every few ticks and at ``shutdown()`` the estimators' and the engine's state is saved with the
/// telemetry cursor (`loop_checkpoint`), so a restart resumes where it stopped; the last snapshot
/// is served from the moment ``open(store:policy:policyVersion:clock:estimators:operators:configuration:metrics:logger:snapshots:)``
/// returns, before the first tick.
public actor LoopRunner {
    /// Snapshots, gateway polls, drain: what the HTTP handlers use.
    public nonisolated let publisher: AllocationPublisher
    public nonisolated let telemetry: TelemetryStore
    public nonisolated let clock: any AllotClock
    /// When the loop was opened, on its clock: before its first tick completes, a stall is judged from here.
    public nonisolated let openedAt: Double
    public nonisolated let configuration: LoopConfiguration

    private let observer: any CapacityObserving
    private let classifier: any ConsumptionClassifying
    private let engine: PolicyEngineActor
    private let operators: any OperatorInputs
    private let stateStore: LoopStateStore
    private let metrics: LoopMetrics
    private let logger: Logger
    private let latest: Locked<LoopView>
    /// The loop's ``LoopConfiguration/steadyClock`` when it opened or last completed a tick (a stall is measured on
    /// it too: a wall clock stepped back leaves the loop waiting while `now - lastTickAt` shrinks).
    private let lastTickSteady: Locked<Double>
    /// The wall-clock instant of the next tick, while the timer waits for a wall clock stepped back to reach it; kept
    /// through that tick (at most a stall's length past it), cleared once the tick returns, and when the timer is
    /// restarted or the loop shut down. Only the timer says the loop waits for its clock (``stall(now:)``): a loop
    /// whose ticks fail, or that no timer drives, is not waiting whatever the clocks read (review of session 57, H1).
    private let clockWait = Locked<Double?>(nil)

    private var policy: Policy
    private var policyVersion: String
    private var cursor: Int64
    private var tickCount: Int64
    private var names = TelemetryNames()
    private var knownRefs = KnownRefs()
    private var lastOverrides: [Override] = []
    private var allowance: [AllocationKey: PerDimension<Double>] = [:]
    private var engineAlerts = AlertBook()
    /// The loop's own conditions, by kind.
    private var loopAlerts: [String: LoopAlert] = [:]
    private var componentAlerts: [LoopAlert] = []
    private var gate = SerialGate()
    private var timer: Task<Void, Never>?
    private var checkpointTask: Task<Void, Never>?
    /// The first tick after opening writes a checkpoint rather than the `checkpointEveryTicks`-th. Opened without
    /// one, every restart started blind at the newest event until one existed, and with the periodic one alone a
    /// service killed within its first 30 s (a crash loop, round 13) never resumed anything; resumed from an old
    /// one, every restart of such a loop read and folded again all the events since (round 40: the cursor stayed at
    /// the first checkpoint's through twelve restarts, each catch-up longer).
    private var checkpointAtFirstTick = false
    /// The last tick stopped at `maxEventsPerTick`: the next one reads another full chunk of the backlog.
    private var catchingUp = false
    private var isShutDown = false

    private init(
        publisher: AllocationPublisher, telemetry: TelemetryStore, clock: any AllotClock,
        configuration: LoopConfiguration, observer: any CapacityObserving, classifier: any ConsumptionClassifying,
        engine: PolicyEngineActor, operators: any OperatorInputs, stateStore: LoopStateStore, metrics: LoopMetrics,
        logger: Logger, policy: Policy, policyVersion: String, cursor: Int64, tickCount: Int64
    ) {
        self.publisher = publisher
        self.telemetry = telemetry
        self.clock = clock
        self.openedAt = clock.now
        self.configuration = configuration
        self.observer = observer
        self.classifier = classifier
        self.engine = engine
        self.operators = operators
        self.stateStore = stateStore
        self.metrics = metrics
        self.logger = logger
        self.policy = policy
        self.policyVersion = policyVersion
        self.cursor = cursor
        self.tickCount = tickCount
        self.latest = Locked(LoopView(tick: tickCount, policy: policy, policyVersion: policyVersion))
        self.lastTickSteady = Locked(configuration.steadyClock())
    }

    // MARK: Opening

    /// Opens the loop on the service's database: serves the last persisted snapshot at once,
    /// restores the estimators, the engine and the gateway contacts from the last checkpoint (each
    /// component that cannot be read starts blind, with a `state_restore` alert), and positions the
    /// telemetry cursor. Without a checkpoint the loop starts at the newest event, seeds the
    /// Classifier's spend from the per-minute rollups, so budgets hold across the loss of state, and writes a
    /// checkpoint after its first tick.
    ///
    /// - Parameters:
    ///   - store: The telemetry store; its pool (migrated) also holds snapshots and checkpoints.
    ///   - policyVersion: Identifies `policy` in snapshots (`policy_version`); see
    ///     ``policyVersion(of:)``.
    ///   - clock: Ticks, long-poll deadlines, the make-before-break wait.
    ///   - estimators: Builds the Observer and the Classifier.
    ///   - operators: Overrides, proposal resolutions and burst requests.
    ///   - metrics: Where the loop's series are registered (a private registry when nil).
    ///   - snapshots: Where snapshots are persisted; the store's database when nil.
    /// - Throws: The database's error when it cannot be read at all.
    public static func open(
        store: TelemetryStore, policy: Policy, policyVersion: String, clock: any AllotClock,
        estimators: EstimatorFactory, operators: any OperatorInputs = InMemoryOperatorInputs(),
        configuration: LoopConfiguration = LoopConfiguration(), metrics: MetricsRegistry? = nil,
        logger: Logger = .disabled, snapshots: (any SnapshotPersistence)? = nil
    ) async throws -> LoopRunner {
        let logger = logger.labelled("loop")
        let publisher = AllocationPublisher(
            store: snapshots ?? SnapshotStore(pool: store.pool), clock: clock, configuration: configuration.publisher,
            logger: logger.labelled("publisher"))
        let stateStore = LoopStateStore(pool: store.pool)
        let now = clock.now
        var restoreAlerts: [LoopAlert] = []

        let contacts = try await stateStore.contacts()
        let audit = AuditLog(pool: store.pool)
        do {
            try await publisher.restore(contacts: contacts) {
                try await audit.entries(AuditQuery(action: "drain", limit: 1)).first
            }
        } catch let error as LoopStateError {
            logger.error(
                "the last snapshot cannot be read; serving nothing until the first tick",
                ["error": .string(error.description)])
            restoreAlerts.append(
                LoopAlert(
                    kind: "state_restore", severity: .warning,
                    message: "the last snapshot cannot be read (\(error)); versions continue above it", since: now))
        }

        let newestEvent = try await store.lastEventID()
        var checkpoint = try await stateStore.checkpoint()
        if let saved = checkpoint, saved.format != StateCodec.format {
            logger.warning(
                "the saved loop state has an unknown format; starting blind", ["format": .int(Int64(saved.format))])
            restoreAlerts.append(
                LoopAlert(
                    kind: "state_restore", severity: .warning,
                    message: "the saved loop state has format \(saved.format), this binary reads \(StateCodec.format); "
                        + "estimators start blind", since: now))
            checkpoint = nil
        }
        func restore<T>(_ component: String, _ make: ([UInt8]?) throws -> T, _ saved: [UInt8]?) rethrows -> T {
            do {
                return try make(saved)
            } catch {
                logger.error("saved \(component) state cannot be read; it starts blind", ["error": .string("\(error)")])
                restoreAlerts.append(
                    LoopAlert(
                        kind: "state_restore", severity: .warning,
                        message: "saved \(component) state cannot be read (\(error)); it starts blind", since: now))
                return try make(nil)
            }
        }
        // A checkpoint ahead of the table (a database restored from an older copy) would make the
        // loop skip every new row: fall back to the table's end.
        let cursor = min(checkpoint?.lastEventID ?? newestEvent, newestEvent)
        let allowance = restoredAllowance(publisher.current)
        // Made before the loop's own estimators: the test fixtures' factories hand out their last instance as the
        // loop's.
        var preview: RestoredView?
        if let checkpoint {
            preview = await previewRestoredState(
                checkpoint, estimators: estimators, policy: policy, operators: operators,
                allowance: allowance, cursor: cursor, now: now)
        }
        let observer = try restore("observer", { try estimators.makeObserver(policy, $0) }, checkpoint?.observer)
        let classifier = try restore(
            "classifier", { try estimators.makeClassifier(policy, $0) }, checkpoint?.classifier)
        let engineState = try restore(
            "engine",
            { bytes -> EngineState in
                guard let bytes else { return EngineState() }
                return try StateCodec.decode(EngineState.self, from: bytes, component: "engine")
            }, checkpoint?.engine)

        let loopMetrics = LoopMetrics(registry: metrics ?? MetricsRegistry(), publisher: publisher)
        let runner = LoopRunner(
            publisher: publisher, telemetry: store, clock: clock, configuration: configuration, observer: observer,
            classifier: classifier, engine: PolicyEngineActor(state: engineState), operators: operators,
            stateStore: stateStore, metrics: loopMetrics, logger: logger, policy: policy, policyVersion: policyVersion,
            cursor: cursor, tickCount: checkpoint?.tick ?? 0)
        if let registry = metrics { runner.registerGatewayMetrics(on: registry) }
        await runner.prepare(restoreAlerts: restoreAlerts, cold: checkpoint == nil, now: now, preview: preview)
        logger.info(
            "loop opened",
            [
                "snapshot_version": .int(publisher.current?.version ?? 0), "cursor": .int(cursor),
                "resumed": .bool(checkpoint != nil), "policy_version": .string(policyVersion),
            ])
        return runner
    }

    /// `allot_gateways{state}` and `allot_gateway_lag_versions_max`, computed at each scrape from
    /// the gateways' polls (SPEC 7: config drift bounded and visible as a metric).
    private nonisolated func registerGatewayMetrics(on registry: MetricsRegistry) {
        guard
            let byState = try? MetricDescriptor(
                name: "allot_gateways", help: "Gateways that polled for snapshots, by state", type: .gauge,
                labelNames: ["state"]),
            let lag = try? MetricDescriptor(
                name: "allot_gateway_lag_versions_max",
                help: "The most versions any gateway is behind the snapshot being served", type: .gauge)
        else { return }
        let publisher = self.publisher
        let latest = self.latest
        let clock = self.clock
        try? registry.registerCollector([byState, lag]) {
            let statuses = publisher.gatewayStatuses(now: clock.now, policy: latest.current.policy, tenants: false)
            var samples = GatewayStatus.State.allCases.map { state in
                CollectedSample(
                    family: byState.name, labelValues: [state.rawValue],
                    value: Double(statuses.filter { $0.state == state }.count))
            }
            samples.append(
                CollectedSample(
                    family: lag.name, value: Double(statuses.compactMap(\.lagVersions).max() ?? 0)))
            return samples
        }
    }

    private func prepare(restoreAlerts: [LoopAlert], cold: Bool, now: Double, preview: RestoredView?) async {
        metrics.snapshotVersion.set(Double(publisher.current?.version ?? 0))
        let metrics = self.metrics
        await publisher.onPublish { snapshot in
            metrics.snapshotVersion.set(Double(snapshot.version))
            metrics.published.labels(snapshot.kind.rawValue).increment()
        }
        if let first = restoreAlerts.first { loopAlerts["state_restore"] = first }
        allowance = Self.restoredAllowance(publisher.current)
        if cold { await seedSpend(now: now) }
        checkpointAtFirstTick = true
        publishView(
            observer: preview?.observer, classifier: preview?.classifier, decision: preview?.decision, now: nil,
            report: nil)
    }

    /// What each tenant was allowed by the snapshot being served (its published rates), for the Classifier's first
    /// tick after a restart.
    private static func restoredAllowance(_ current: PublishedSnapshot?) -> [AllocationKey: PerDimension<Double>] {
        var allowance: [AllocationKey: PerDimension<Double>] = [:]
        for entry in current?.snapshot.tenants ?? [] {
            allowance[AllocationKey(tenant: entry.id, upstream: entry.upstream)] = PerDimension(
                rpm: entry.rpm.rate, tpm: entry.tpm.rate)
        }
        return allowance
    }

    /// The operator views of a restored state, shown until the first tick.
    struct RestoredView: Sendable {
        var observer: ObserverReport
        var classifier: ClassifierReport
        var decision: Decision
    }

    /// Fills the operator views from the restored state before the first tick (outside evaluation round 21, F3:
    /// until then `GET /v1/upstreams` showed the declared capacities and the tenants no state). The reports and the
    /// decision are those of throwaway copies of the estimators and the engine, folded with no telemetry at the
    /// checkpoint's time, so they show the state as it was saved; nothing is published, no alert is raised, the
    /// loop's own estimators and engine are not touched, and `lastTickAt` stays nil (no tick has run since the
    /// start). The first tick replaces them. A state that cannot be read leaves the views empty, as before.
    private static func previewRestoredState(
        _ checkpoint: LoopCheckpoint, estimators: EstimatorFactory, policy: Policy,
        operators: any OperatorInputs, allowance: [AllocationKey: PerDimension<Double>], cursor: Int64, now: Double
    ) async -> RestoredView? {
        let at = EpochTime.seconds(fromMilliseconds: checkpoint.savedMs)
        guard let observer = try? estimators.makeObserver(policy, checkpoint.observer),
            let classifier = try? estimators.makeClassifier(policy, checkpoint.classifier),
            var engine = try? StateCodec.decode(EngineState.self, from: checkpoint.engine, component: "engine")
        else { return nil }
        let empty = TelemetryDelta(events: [], names: TelemetryNames(), lastEventID: cursor)
        let observed = await observer.observe(empty, now: at)
        var capacities: [String: PerDimension<Double?>] = [:]
        for pool in observed.pools { capacities[pool.upstream] = pool.capacity }
        let classified = await classifier.classify(empty, allocations: allowance, capacities: capacities, now: at)
        // The overrides in force now, as the first tick will read them (one may have expired during the downtime).
        let overrides = (try? await operators.inputs(now: now))?.overrides ?? []
        let decision = PolicyEngine.decide(
            DecisionInput(
                now: at, policy: policy, pools: observed.pools, tenants: classified.tenants, spend: classified.spend,
                overrides: overrides),
            state: &engine)
        return RestoredView(observer: observed, classifier: classified, decision: decision)
    }

    /// Seeds the Classifier's spend per budget window from the rollups (cold start only).
    private func seedSpend(now: Double) async {
        let budgeted = policy.tiers.contains { !$0.budgets.isEmpty } || policy.tenants.contains { !$0.budgets.isEmpty }
        guard budgeted else { return }
        var spent: [String: [BudgetWindow: Double]] = [:]
        do {
            for window in BudgetWindow.allCases {
                let interval = window.interval(containing: now)
                let totals = try await telemetry.usage(
                    fromMs: EpochTime.milliseconds(fromSeconds: interval.start),
                    toMs: EpochTime.milliseconds(fromSeconds: now) + 60_000)
                for total in totals {
                    spent[total.tenant, default: [:]][window, default: 0] += total.servedCost(policy: policy).amount
                }
            }
        } catch {
            logger.warning("cannot read usage to seed spend; budgets start from zero", ["error": .string("\(error)")])
            return
        }
        await classifier.seedSpend(spent, now: now)
    }

    // MARK: Reading

    /// The latest reports, decision and alerts, for the API. Never waits for a tick.
    public nonisolated var view: LoopView { latest.current }

    /// How long no tick has completed, at `now`, when that is longer than ``stallIntervals`` intervals of the policy
    /// in force (and at least ``minimumStallSeconds``): the loop is stuck in a tick, or every tick fails, or its wall
    /// clock stepped back and it waits for the time of its next tick to come round again. nil while it ticks. Read
    /// without the actor, so a loop stuck in a tick is still seen (`/readyz`).
    ///
    /// Measured on the wall clock (`now`) and on the steady clock, whichever is longer: after a step back of an hour
    /// the loop's next tick is an hour away by the wall clock (its times never go back: windows, decays and leases
    /// are reckoned in them), while `now - lastTickAt` reads small or negative. `wallClockBehind` is how far the wall
    /// clock has fallen behind the steady one since the last tick (nil within ``stepTolerance``); `waitsForClock`,
    /// whether that is all that holds the loop: its timer waits for a wall clock stepped back to reach the next
    /// tick's time (or runs that tick, for at most a stall's length), and its last tick did not fail.
    public nonisolated func stall(
        now: Double
    ) -> (seconds: Double, intervalSeconds: Double, wallClockBehind: Double?, waitsForClock: Bool)? {
        let view = latest.current
        let interval = view.policy.loop.intervalSeconds
        let wall = now - (view.lastTickAt ?? openedAt)
        let steady = configuration.steadyClock() - lastTickSteady.current
        let since = max(wall, steady)
        let threshold = Self.stallThreshold(interval: interval)
        guard since > threshold else { return nil }
        let behind = steady - wall > Self.stepTolerance ? steady - wall : nil
        let waiting = clockWait.current.map { now <= $0 + threshold } ?? false
        let failing = view.alerts.contains { $0.kind == "tick_failed" }
        return (since, interval, behind, waiting && !failing)
    }

    /// How long without a completed tick counts as a stall (``stall(now:)``).
    public static func stallThreshold(interval: Double) -> Double {
        max(stallIntervals * interval, minimumStallSeconds)
    }

    /// How far the wall clock may fall behind the steady clock before it counts as stepped back (seconds).
    public static let stepTolerance = 1.0

    /// Intervals without a completed tick after which the loop counts as stalled.
    public static let stallIntervals = 3.0
    /// The shortest stall reported, whatever the interval.
    public static let minimumStallSeconds = 30.0

    /// The telemetry row id the next tick reads after.
    public var telemetryCursor: Int64 { cursor }

    /// The policy in force and its version.
    public var policyInForce: (policy: Policy, version: String) { (policy, policyVersion) }

    // MARK: Policy

    /// Swaps in a validated policy (the file watcher validates; SPEC 10). Applied between ticks:
    /// the Observer and the Classifier get it at once, the engine and the Publisher from the next
    /// tick, the timer re-reads the interval. Clears a `policy_error` alert.
    public func apply(policy: Policy, version: String) async {
        await enter()
        defer { leave() }
        let intervalChanged = policy.loop.intervalSeconds != self.policy.loop.intervalSeconds
        self.policy = policy
        policyVersion = version
        await observer.apply(policy: policy)
        await classifier.apply(policy: policy)
        loopAlerts["policy_error"] = nil
        logger.info("policy applied", ["policy_version": .string(version)])
        if intervalChanged, timer != nil { restartTimer() }
        publishView(report: nil)
    }

    /// Loads, validates and applies policy files; on failure the policy in force stays and the
    /// error is alerted (`policy_error`) and thrown (SPEC 10).
    ///
    /// - Returns: The applied policy's version (``policyVersion(of:)``).
    @discardableResult
    public func apply(files: [PolicyFile]) async throws(PolicyError) -> String {
        let loaded: Policy
        do {
            loaded = try Policy.load(files: files)
        } catch {
            reportPolicyError(error.description)
            throw error
        }
        let version = Self.policyVersion(of: loaded)
        await apply(policy: loaded, version: version)
        return version
    }

    /// Records that a policy reload was rejected: the previous policy stays in force, and a
    /// `policy_error` alert shows the reason until a policy is applied.
    public func reportPolicyError(_ message: String) {
        let since = loopAlerts["policy_error"]?.since ?? clock.now
        loopAlerts["policy_error"] = LoopAlert(
            kind: "policy_error", severity: .critical,
            message: "policy reload rejected; the previous policy stays in force: \(message)", since: since)
        logger.error("policy reload rejected", ["error": .string(message)])
        publishView(report: nil)
    }

    /// The rejected files were put back to the policy in force: the `policy_error` alert ends.
    public func clearPolicyError() {
        guard loopAlerts["policy_error"] != nil else { return }
        loopAlerts["policy_error"] = nil
        logger.notice("policy files restored to the policy in force")
        publishView(report: nil)
    }

    /// A short stable identifier of a policy: FNV-1a (64-bit) of its canonical bytes, in hex. Equal
    /// policies get equal versions whatever files they came from. (The server may use a
    /// cryptographic hash instead; any string works for `policy_version`.)
    public nonisolated static func policyVersion(of policy: Policy) -> String {
        var hash = StableHash()
        for byte in policy.canonicalBytes { hash.add(byte) }
        return hash.hex
    }

    // MARK: Running

    /// Starts ticking every `loop.interval_s` on the loop's clock. Ticks at once when nothing has been published
    /// yet (so gateways get a first snapshot without waiting an interval). A restart waits an interval, serving the
    /// persisted snapshot meanwhile: after a downtime longer than `gateway_lag_s` every restored gateway counts as
    /// gone until it polls again, and a tick at once published a split naming none of them, so every gateway held
    /// every tenant to `default` until the next tick (review of round 21's fix, which had ticked at once). Until
    /// that first tick the operator views show the restored state (``previewRestoredState``).
    public func start() {
        guard timer == nil, !isShutDown else { return }
        restartTimer(immediately: publisher.current == nil)
    }

    private func restartTimer(immediately: Bool = false) {
        timer?.cancel()
        clockWait.withLock { $0 = nil }
        let clock = self.clock
        // The timer's own waits end at a step back of the wall clock (the service's clock otherwise sleeps to its
        // deadline by the wall clock, through the step), so that it notices the step; the loop's times still
        // never go back.
        let waits: any AllotClock = clock is SystemClock ? SystemClock(endsSleepOnStepBack: true) : clock
        // Never before the last tick's time: a policy that changes the interval during a step back restarted the
        // timer from the stepped clock, and the loop ticked at an instant before its last (review M2).
        let floor = latest.current.lastTickAt ?? -Double.infinity
        timer = Task { [weak self] in
            var interval = await self?.interval ?? 5
            var next = immediately ? max(clock.now, floor) : max(clock.now, floor) + interval
            while !Task.isCancelled {
                do {
                    // In waits of at most an interval, so that a wall clock stepped back is noticed: the next tick
                    // then lies further away than an interval, and the loop waits for its time to come round again
                    // (its times never go back), said once in the log; `/readyz` and `loop_stalled` say so.
                    var warned = false
                    while clock.now < next {
                        let wall = clock.now
                        if !warned, next - wall > interval + Self.stepTolerance {
                            warned = true
                            self?.clockWait.withLock { $0 = next }
                            await self?.noticeWallClockBehind(by: next - wall - interval, nextTick: next)
                        }
                        try await waits.sleep(until: min(next, wall + max(interval, 1)))
                    }
                } catch {
                    return
                }
                guard let self else { return }
                let started = clock.now
                await self.tick(now: started)
                self.clockWait.withLock { $0 = nil }
                interval = await self.interval
                next = max(started + interval, clock.now)
            }
        }
    }

    private var interval: Double { max(0.001, policy.loop.intervalSeconds) }

    private func noticeWallClockBehind(by seconds: Double, nextTick: Double) {
        logger.log(
            .warning,
            "the wall clock stepped back: the next tick waits until it reaches the tick's time again (the loop's "
                + "times never go back); the snapshot in force is served meanwhile",
            fields: [
                ("stepped_back_at_least_s", .double((seconds * 1000).rounded() / 1000)),
                ("next_tick_at", .string(RFC3339.format(nextTick))),
            ])
    }

    /// Stops ticking, waits for a tick in progress, answers held long-polls, and saves a final
    /// checkpoint. The loop does nothing afterwards.
    public func shutdown() async {
        timer?.cancel()
        timer = nil
        clockWait.withLock { $0 = nil }
        await enter()
        defer { leave() }
        guard !isShutDown else { return }
        isShutDown = true
        publisher.shutDown()
        await checkpointTask?.value
        checkpointTask = nil
        await saveCheckpoint()
        logger.info("loop stopped", ["tick": .int(tickCount), "cursor": .int(cursor)])
    }

    /// Runs one tick at `now` (after any tick in progress). Never throws: a failure is in the report,
    /// the log, the metrics and the alerts.
    @discardableResult
    public func tick(now: Double) async -> TickReport {
        await enter()
        defer { leave() }
        guard !isShutDown else {
            return TickReport(
                tick: tickCount, now: now, events: 0, backlog: false, durations: [:], published: [], heldGrowth: false,
                failure: (.total, "the loop is shut down"))
        }
        return await runTick(now: now)
    }

    private func runTick(now: Double) async -> TickReport {
        tickCount += 1
        let policy = self.policy
        let start = MonotonicClock.now()
        var mark = start
        var report = TickReport(
            tick: tickCount, now: now, events: 0, backlog: false, durations: [:], published: [], heldGrowth: false)
        func lap(_ phase: TickPhase) {
            let time = MonotonicClock.now()
            report.durations[phase] = Double(time &- mark) / 1e9
            mark = time
        }

        // Operator inputs: a failure keeps the last overrides and defers resolutions and bursts.
        var inputs: OperatorInputBatch
        do {
            inputs = try await operators.inputs(now: now)
            lastOverrides = inputs.overrides
            loopAlerts["operator_inputs"] = nil
        } catch {
            inputs = OperatorInputBatch(overrides: lastOverrides)
            loopAlerts["operator_inputs"] = LoopAlert(
                kind: "operator_inputs", severity: .warning,
                message: "operator inputs cannot be read (\(error)); the last overrides stay, "
                    + "approvals and burst requests wait", since: loopAlerts["operator_inputs"]?.since ?? now)
        }
        lap(.inputs)

        if catchingUp, let checkpoint = checkpointTask {
            // A catch-up tick reads a full chunk of the backlog: not while a checkpoint is being encoded, whose
            // buffers it would add to (a cold start's first-tick checkpoint during the next catch-up tick took
            // `allot bench memory`'s peak to 341–375 MiB; 242 with this wait and the read sized once).
            await checkpoint.value
        }
        let delta: TelemetryDelta
        do {
            delta = try await readDelta()
        } catch {
            return fail(&report, phase: .read, error: error, start: start, now: now)
        }
        report.events = delta.events.count
        report.backlog = delta.events.count >= configuration.maxEventsPerTick
        catchingUp = report.backlog
        lap(.read)

        let observed = await observer.observe(delta, now: now)
        lap(.observe)
        var capacities: [String: PerDimension<Double?>] = [:]
        for pool in observed.pools { capacities[pool.upstream] = pool.capacity }
        let classified = await classifier.classify(
            delta, allocations: allowance, capacities: capacities, now: now)
        // The estimators have counted these rows: never read them again.
        cursor = delta.lastEventID
        metrics.events.increment(by: delta.events.count)
        lap(.classify)

        let decision = await engine.decide(
            DecisionInput(
                now: now, policy: policy, pools: observed.pools, tenants: classified.tenants, spend: classified.spend,
                overrides: inputs.overrides, resolutions: inputs.resolutions, burstRequests: inputs.burstRequests))
        await operators.record(decision, now: now)
        var nextAllowance: [AllocationKey: PerDimension<Double>] = [:]
        var driftAllowance: [AllocationKey: PerDimension<Double?>] = [:]
        nextAllowance.reserveCapacity(decision.allocations.count)
        driftAllowance.reserveCapacity(decision.allocations.count)
        for allocation in decision.allocations {
            let key = AllocationKey(tenant: allocation.tenant, upstream: allocation.upstream)
            let credit = allocation.burstCredit?.rate ?? PerDimension(0)
            // What the gateways are given: on a pool without capacity, a budget's or an absolute ceiling's limit.
            let allowed = PerDimension<Double?>(
                rpm: allocation.published(.rpm).map { $0.rate + credit.rpm },
                tpm: allocation.published(.tpm).map { $0.rate + credit.tpm })
            driftAllowance[key] = allowed
            nextAllowance[key] = allowed.map { $0 ?? SnapshotContent.unlimited }
        }
        allowance = nextAllowance
        lap(.decide)

        let content = SnapshotAssembler.content(
            decision: decision, observer: observed, classifier: classified, policy: policy,
            policyVersion: policyVersion, gateways: publisher.gatewaySet(now: now, policy: policy),
            minimumShare: configuration.publisher.minimumGatewayShare)
        lap(.assemble)
        let inForce = publisher.current?.content.snapshot
        do {
            let outcome = try await publisher.publish(content, now: now)
            noteLapsedLease(of: inForce, now: now)
            report.published = outcome.published.map(\.version)
            report.heldGrowth = outcome.held
            report.durations[.persist] = outcome.persistSeconds
            metrics.held.set(outcome.held ? 1 : 0)
        } catch {
            componentAlerts = observed.alerts + classified.alerts + engineAlerts.convert(decision.alerts, now: now)
            publishView(observer: observed, classifier: classified, decision: decision, now: nil, report: nil)
            return fail(&report, phase: .publish, error: error, start: start, now: now)
        }
        lap(.publish)

        let reviewed = await publisher.review(
            statuses: classified.statuses, allowance: driftAllowance, policy: policy, now: now)
        componentAlerts =
            observed.alerts + classified.alerts + engineAlerts.convert(decision.alerts, now: now) + reviewed
        lap(.review)

        // A drain in force is an alert while it lasts: gateways enforce their fallback floors, where tenants
        // without a floor get nothing, and it outlives restarts (round 14: nothing showed it but a counter).
        if let since = await publisher.drainedSince {
            loopAlerts["drain"] = LoopAlert(
                kind: "drain", severity: .warning,
                message: "a drain is in force since \(RFC3339.format(since)): gateways enforce their fallback floors "
                    + "and ticks publish nothing until it ends (DELETE /v1/drain, allot drain --resume)",
                since: since)
        } else {
            loopAlerts["drain"] = nil
        }
        let total = Double(MonotonicClock.now() &- start) / 1e9
        report.durations[.total] = total
        loopAlerts["tick_failed"] = nil
        if total > policy.loop.intervalSeconds * configuration.slowTickFraction {
            loopAlerts["tick_slow"] = LoopAlert(
                kind: "tick_slow", severity: .warning,
                message: "tick \(tickCount) took \(formatted(total * 1000)) ms, more than "
                    + "\(formatted(configuration.slowTickFraction * 100))% of the \(formatted(policy.loop.intervalSeconds)) s interval",
                since: loopAlerts["tick_slow"]?.since ?? now)
            logger.log(.warning, "slow tick", fields: Self.fields(report))
        } else {
            loopAlerts["tick_slow"] = nil
            logger.log(.info, "tick", fields: Self.fields(report))
        }
        record(report, outcome: "ok")
        metrics.lastTick.set(now)
        publishView(observer: observed, classifier: classified, decision: decision, now: now, report: report)
        if checkpointAtFirstTick || tickCount % Int64(configuration.checkpointEveryTicks) == 0 {
            checkpointAtFirstTick = false
            await startCheckpoint()
        }
        return report
    }

    /// Logs and counts a lease of the version in force that ran out before this tick published (outside evaluation
    /// round 40: a service stopped for 45 s left every gateway on its fallback floors for 25 s, and nothing said so);
    /// once, by the tick that publishes, not by every tick that fails meanwhile. A version published without a lease
    /// (a drain, its end) is not a lapse.
    private func noteLapsedLease(of current: Snapshot?, now: Double) {
        guard let current, !current.bornExpired, now > current.expiresAt else { return }
        metrics.leaseLapses.increment()
        logger.log(
            .warning, "the lease of the snapshot in force ran out before this tick: gateways enforced their fallback "
                + "floors",
            [
                "version": .int(current.version), "expired_at": .string(RFC3339.format(current.expiresAt)),
                "lapsed_s": .double(((now - current.expiresAt) * 1000).rounded() / 1000),
            ])
    }

    private func fail(
        _ report: inout TickReport, phase: TickPhase, error: any Error, start: UInt64, now: Double
    ) -> TickReport {
        let message = "\(error)"
        report.failure = (phase, message)
        report.durations[.total] = Double(MonotonicClock.now() &- start) / 1e9
        loopAlerts["tick_failed"] = LoopAlert(
            kind: "tick_failed", severity: .critical,
            message: "tick \(tickCount) failed in \(phase.rawValue): \(message); the last snapshot "
                + "(version \(publisher.current?.version ?? 0)) keeps being served",
            since: loopAlerts["tick_failed"]?.since ?? now)
        logger.log(
            .error, "tick failed",
            fields: Self.fields(report) + [("phase", .string(phase.rawValue)), ("error", .string(message))])
        record(report, outcome: "failed")
        publishView(report: report)
        return report
    }

    private func record(_ report: TickReport, outcome: String) {
        metrics.ticks.labels(outcome).increment()
        for (phase, seconds) in report.durations { metrics.tickDuration.labels(phase.rawValue).observe(seconds) }
    }

    private static func fields(_ report: TickReport) -> [(String, LogValue)] {
        var fields: [(String, LogValue)] = [
            ("tick", .int(report.tick)), ("events", .int(Int64(report.events))),
            ("versions", .string(report.published.map(String.init).joined(separator: ","))),
        ]
        if report.backlog { fields.append(("backlog", .bool(true))) }
        if report.heldGrowth { fields.append(("held_growth", .bool(true))) }
        for phase in TickPhase.allCases {
            if let seconds = report.durations[phase] {
                fields.append(("\(phase.rawValue)_ms", .double(seconds * 1000)))
            }
        }
        return fields
    }

    /// The rows after the cursor (bounded), with the names they use.
    private func readDelta() async throws -> TelemetryDelta {
        let events = try await telemetry.events(afterID: cursor, limit: configuration.maxEventsPerTick)
        if events.contains(where: { !knownRefs.knows($0) }) {
            names = try await telemetry.names()
            knownRefs = KnownRefs(names)
        }
        return TelemetryDelta(events: events, names: names, lastEventID: events.last?.id ?? cursor)
    }

    private func publishView(
        observer: ObserverReport? = nil, classifier: ClassifierReport? = nil, decision: Decision? = nil, now: Double?,
        report: TickReport?
    ) {
        let alerts = (componentAlerts + loopAlerts.values).sorted(by: LoopAlert.ordered)
        logTransitions(from: latest.withLock { $0.alerts }, to: alerts)
        let tick = tickCount
        let policy = self.policy
        let version = policyVersion
        if now != nil {
            let steady = configuration.steadyClock()
            lastTickSteady.withLock { $0 = steady }
        }
        latest.withLock { view in
            view.tick = tick
            if let now { view.lastTickAt = now }
            if let observer { view.observer = observer }
            if let classifier { view.classifier = classifier }
            if let decision { view.decision = decision }
            if let report { view.lastReport = report }
            view.alerts = alerts
            view.policy = policy
            view.policyVersion = version
        }
    }

    /// Logs the alerts of the pools, gateways and loop that were raised or cleared since the last view (SPEC 6.4:
    /// degraded mode is logged, alerted and visible; until outside evaluation round 38 it was alerted and visible,
    /// never logged). Alerts about one tenant are not logged one by one (thousands of tenants can starve at once):
    /// `/v1/alerts` and the metrics have them.
    private func logTransitions(from previous: [LoopAlert], to current: [LoopAlert]) {
        let (raised, cleared) = LoopAlert.transitions(from: previous, to: current)
        let limit = 20
        for alert in raised.prefix(limit) {
            let fields: KeyValuePairs<String, LogValue> = [
                "kind": .string(alert.kind), "severity": .string(alert.severity.rawValue),
                "upstream": alert.upstream.map(LogValue.string) ?? .null,
                "gateway": alert.gateway.map(LogValue.string) ?? .null, "message": .string(alert.message),
            ]
            if alert.severity == .info {
                logger.notice("alert raised", fields)
            } else {
                logger.warning("alert raised", fields)
            }
        }
        for alert in cleared.prefix(limit) {
            logger.notice(
                "alert cleared",
                [
                    "kind": .string(alert.kind), "upstream": alert.upstream.map(LogValue.string) ?? .null,
                    "gateway": alert.gateway.map(LogValue.string) ?? .null,
                ])
        }
        let omitted = max(0, raised.count - limit) + max(0, cleared.count - limit)
        if omitted > 0 {
            logger.notice("more alerts raised or cleared", ["omitted": .int(Int64(omitted))])
        }
    }

    private func publishView(report: TickReport?) {
        publishView(observer: nil, classifier: nil, decision: nil, now: nil, report: report)
    }

    // MARK: Checkpoints

    /// The states of one tick and the cursor they correspond to, captured together between ticks.
    private struct Capture: Sendable {
        var observer: any Encodable & Sendable
        var classifier: any Encodable & Sendable
        var engine: EngineState
        var cursor: Int64
        var tick: Int64
        var now: Double
        var contacts: [GatewayContactRecord]
        var left: [(id: String, atMs: Int64)]
        var forgetBeforeMs: Int64
    }

    /// Captures the states now (cheap copies, inside the tick) and encodes and saves them in the
    /// background (skipped while the previous checkpoint is still being written).
    private func startCheckpoint() async {
        guard checkpointTask == nil else { return }
        let capture = await captureState()
        checkpointTask = Task { [weak self] in
            await self?.write(capture)
            await self?.checkpointFinished()
        }
    }

    private func checkpointFinished() { checkpointTask = nil }

    private func captureState() async -> Capture {
        let now = clock.now
        return Capture(
            observer: await observer.state(), classifier: await classifier.state(), engine: await engine.state(),
            cursor: cursor, tick: tickCount, now: now, contacts: publisher.changedContacts(),
            left: publisher.leftGateways(),
            forgetBeforeMs: EpochTime.milliseconds(fromSeconds: now - policy.loop.forgetAfterSeconds))
    }

    private func saveCheckpoint() async {
        await write(await captureState())
    }

    /// Encodes (off the actor) and saves a capture.
    private func write(_ capture: Capture) async {
        let started = MonotonicClock.now()
        do {
            let checkpoint = try await Task.detached(priority: .utility) { () throws -> LoopCheckpoint in
                LoopCheckpoint(
                    savedMs: EpochTime.milliseconds(fromSeconds: capture.now), lastEventID: capture.cursor,
                    tick: capture.tick, format: StateCodec.format, observer: try StateCodec.encode(capture.observer),
                    classifier: try StateCodec.encode(capture.classifier), engine: try StateCodec.encode(capture.engine)
                )
            }.value
            try await stateStore.save(
                checkpoint, contacts: capture.contacts, forgetBeforeMs: capture.forgetBeforeMs, leaving: capture.left)
            metrics.checkpointDuration.observe(MonotonicClock.seconds(since: started))
            metrics.checkpointBytes.set(
                Double(checkpoint.observer.count + checkpoint.classifier.count + checkpoint.engine.count))
            loopAlerts["checkpoint_failed"] = nil
            loopAlerts["state_restore"] = nil
        } catch {
            publisher.returnLeftGateways(capture.left.map(\.id))
            loopAlerts["checkpoint_failed"] = LoopAlert(
                kind: "checkpoint_failed", severity: .warning,
                message: "the loop's state cannot be saved (\(error)); a restart would resume from an older state",
                since: loopAlerts["checkpoint_failed"]?.since ?? capture.now)
            logger.error("checkpoint failed", ["error": .string("\(error)")])
        }
        // The encoded blobs are freed by now (they lived in the `do` scope).
        FreedMemory.returnToSystem()
    }

    /// Returns once the checkpoint being written in the background (if any) is saved.
    public func awaitCheckpoint() async {
        await checkpointTask?.value
    }

    /// Saves a checkpoint now (between ticks). Tests and the simulator use it; the loop saves one by
    /// itself every ``LoopConfiguration/checkpointEveryTicks`` ticks and at shutdown.
    public func checkpoint() async {
        await enter()
        defer { leave() }
        await checkpointTask?.value
        await saveCheckpoint()
    }

    // MARK: Serialisation

    private func enter() async {
        if gate.tryEnter() { return }
        await withCheckedContinuation { gate.enqueue($0) }
    }

    private func leave() {
        gate.leave()
    }
}

/// The largest interned refs the loop's copy of the names covers: refs only grow, so a larger one
/// means a name registered since the copy was read.
struct KnownRefs {
    var tenant: Int64 = 0
    var upstream: Int64 = 0
    var gateway: Int64 = 0
    var model: Int64 = 0

    init() {}

    init(_ names: TelemetryNames) {
        tenant = names.tenants.keys.max() ?? 0
        upstream = names.upstreams.keys.max() ?? 0
        gateway = names.gateways.keys.max() ?? 0
        model = names.modelVersions.keys.max() ?? 0
    }

    func knows(_ event: StoredEvent) -> Bool {
        event.tenant <= tenant && event.upstream <= upstream && event.gateway <= gateway
            && (event.modelVersion ?? 0) <= model
    }
}
