import AllotCore
import AllotMetrics
import AllotSQLite
import AllotSignals
import AllotStore
import AllotTime
import Foundation

/// The loop's benchmarks (SPEC 13), behind `allot bench tick` and `allot bench memory`.
///
/// **What "a tick over 10,000 active tenants and 1,000,000 events in the window" means here.**
/// `windowEvents` (1,000,000) telemetry rows are stored, their timestamps spread evenly over the
/// Classifier's long window (15 minutes) before the benchmark's start, from `tenants` (10,000)
/// tenants on one upstream pool through `gateways` gateways. The loop reads and folds all of them
/// into the Observer's and the Classifier's state first (catch-up ticks, at most
/// ``LoopConfiguration/maxEventsPerTick`` rows each; their time is reported as "fold"). Then each
/// measured tick is one interval later and reads the rows ingested since the previous tick: by
/// default the window's rate, 1,000,000 / 900 s × 5 s ≈ 5,556 rows (a window of 1,000,000 events
/// *is* that rate), or `tickEvents`: read → observe → classify → decide → publish (a
/// 10,000-tenant snapshot encoded, persisted in SQLite and made visible) → review. The tick's
/// wall-clock duration is what is measured (goal ≤ 250 ms, release build); the report gives each
/// phase too, the cost of a checkpoint of the estimators' and the engine's state, and the
/// process's resident memory (goal ≤ 256 MB at 10,000 tenants).
public enum LoopBenchmark {
    public struct Configuration: Sendable {
        public var tenants: Int
        public var gateways: Int
        /// Rows in the window before the measured ticks.
        public var windowEvents: Int
        /// New rows per measured tick; nil: the window's rate (`windowEvents` × 5 / 900).
        public var tickEvents: Int?
        /// Measured ticks (the report gives medians).
        public var runs: Int

        /// - Parameters: defaults `tenants` 10,000, `gateways` 20, `windowEvents` 1,000,000,
        ///   `tickEvents` nil (the window's rate), `runs` 5.
        public init(
            tenants: Int = 10_000, gateways: Int = 20, windowEvents: Int = 1_000_000, tickEvents: Int? = nil,
            runs: Int = 5
        ) {
            self.tenants = max(1, tenants)
            self.gateways = max(1, gateways)
            self.windowEvents = max(0, windowEvents)
            self.tickEvents = tickEvents.map { max(0, $0) }
            self.runs = max(1, runs)
        }

        /// The rows each measured tick reads, for an interval of `interval` seconds.
        public func eventsPerTick(interval: Double) -> Int {
            tickEvents ?? Int((Double(windowEvents) * interval / LoopBenchmark.window).rounded())
        }
    }

    /// The window the stored events span: the Classifier's long window (15 minutes).
    public static let window = 900.0

    public struct Report: Sendable {
        public var configuration: Configuration
        /// Rows per measured tick.
        public var eventsPerTick: Int
        /// Seconds to store the window's rows (ingest, not the loop).
        public var ingestSeconds: Double
        /// Seconds the catch-up ticks took to fold the window into the estimators, and how many.
        public var foldSeconds: Double
        public var foldTicks: Int
        /// The measured ticks.
        public var ticks: [TickReport]
        /// A checkpoint (capture, encode, save) of every component's state, seconds and bytes per component.
        public var checkpointSeconds: Double
        public var checkpointBytes: Int
        public var checkpointParts: (observer: Int, classifier: Int, engine: Int)
        /// Resident memory (bytes) once the window is folded in, and after the measured ticks.
        public var residentAfterFold: Double
        public var residentAfterTicks: Double
        /// Tenants allocated and the size of the global snapshot document.
        public var allocatedTenants: Int
        public var snapshotBytes: Int
        /// Resident memory at the end, and its peak (bytes).
        public var residentBytes: Double
        public var peakResidentBytes: Double

        /// Median of a phase over the measured ticks, seconds.
        public func median(_ phase: TickPhase) -> Double {
            LoopBenchmark.median(ticks.compactMap { $0.durations[phase] })
        }

        public var text: String {
            let c = configuration
            var lines = [
                "tick over \(c.tenants) tenants, \(c.windowEvents) events in the window (15 min, folded into the "
                    + "estimators first), \(eventsPerTick) new events per tick, \(c.gateways) gateways",
                "  setup: ingest \(Self.s(ingestSeconds)), fold \(Self.s(foldSeconds)) in \(foldTicks) catch-up ticks",
            ]
            for (index, tick) in ticks.enumerated() {
                let phases = TickPhase.allCases.filter { $0 != .total }.compactMap { phase in
                    tick.durations[phase].map { "\(phase.rawValue) \(Self.ms($0))" }
                }
                lines.append(
                    "  tick \(index + 1): \(Self.ms(tick.durations[.total] ?? 0)) (\(tick.events) events; "
                        + phases.joined(separator: ", ") + ")")
            }
            let phases = TickPhase.allCases.filter { $0 != .total }.map { "\($0.rawValue) \(Self.ms(median($0)))" }
            lines.append(
                "  median of \(ticks.count) ticks: \(Self.ms(median(.total))) (goal ≤ 250 ms) — "
                    + phases.joined(separator: ", "))
            lines.append(
                "  snapshot: \(allocatedTenants) tenants, \(snapshotBytes / 1024) KiB; checkpoint: "
                    + "\(Self.ms(checkpointSeconds)), \(checkpointBytes / 1024) KiB (observer "
                    + "\(checkpointParts.observer / 1024) KiB, classifier \(checkpointParts.classifier / 1024) KiB, "
                    + "engine \(checkpointParts.engine / 1024) KiB)")
            lines.append(
                "  resident memory: \(Self.mib(residentAfterFold)) after the fold, \(Self.mib(residentAfterTicks)) after "
                    + "the ticks, \(Self.mib(residentBytes)) after the checkpoint; peak \(Self.mib(peakResidentBytes)) "
                    + "(goal ≤ 256 MB at 10,000 tenants)")
            return lines.joined(separator: "\n")
        }

        static func ms(_ seconds: Double) -> String { "\(Int((seconds * 1000).rounded())) ms" }
        static func s(_ seconds: Double) -> String { "\((seconds * 10).rounded() / 10) s" }
        static func mib(_ bytes: Double) -> String { "\(Int((bytes / 1_048_576).rounded())) MiB" }
    }

    /// Runs the tick benchmark (see the type's documentation).
    ///
    /// - Parameters:
    ///   - estimators: The Observer and Classifier to drive (`EstimatorFactory.standard` in service).
    ///   - policy: The policy; by default one with 10,000 tenants' worth of capacity.
    public static func tick(
        _ configuration: Configuration = Configuration(), estimators: EstimatorFactory, policy: Policy? = nil,
        log: @Sendable (String) -> Void = { _ in }
    ) async throws -> Report {
        let policy = policy ?? benchmarkPolicy(tenants: configuration.tenants)
        let pool = try await StoreDatabase.temporary()
        let start = SystemClock().now.rounded()
        let clock = ManualClock(now: start)
        let store = TelemetryStore(pool: pool, clock: clock)
        let loop = try await LoopRunner.open(
            store: store, policy: policy, policyVersion: LoopRunner.policyVersion(of: policy), clock: clock,
            estimators: estimators, configuration: LoopConfiguration(checkpointEveryTicks: 1_000_000))
        let generator = EventGenerator(configuration: configuration)

        // The window: spread over the 15 minutes before `start`.
        log("storing \(configuration.windowEvents) events")
        var started = MonotonicClock.now()
        try await generator.store(
            count: configuration.windowEvents, from: start - 900, to: start, into: store,
            defaultTier: policy.defaultTier)
        let ingestSeconds = MonotonicClock.seconds(since: started)
        log("folding them into the estimators")
        started = MonotonicClock.now()
        var foldTicks = 0
        let newest = try await store.lastEventID()
        while await loop.telemetryCursor < newest {
            let report = await loop.tick(now: start)
            foldTicks += 1
            if let failure = report.failure { throw BenchmarkError(message: "fold tick failed: \(failure.message)") }
        }
        let foldSeconds = MonotonicClock.seconds(since: started)
        let residentAfterFold = residentMemory().current
        let eventsPerTick = configuration.eventsPerTick(interval: policy.loop.intervalSeconds)

        var ticks: [TickReport] = []
        var now = start
        for run in 0...configuration.runs {
            let interval = policy.loop.intervalSeconds
            try await generator.store(
                count: eventsPerTick, from: now, to: now + interval, into: store,
                defaultTier: policy.defaultTier)
            now += interval
            clock.advance(to: now)
            let report = await loop.tick(now: now)
            if let failure = report.failure { throw BenchmarkError(message: "tick failed: \(failure.message)") }
            // The first measured tick warms caches (statements, dictionaries); it is not counted.
            if run > 0 {
                ticks.append(report)
                log("tick \(run): \(Report.ms(report.durations[.total] ?? 0))")
            }
        }

        let residentAfterTicks = residentMemory().current
        started = MonotonicClock.now()
        await loop.checkpoint()
        let checkpointSeconds = MonotonicClock.seconds(since: started)
        // The loop's memory, before this benchmark reads the checkpoint back (its own copy of the
        // blobs, tens of MB the loop never holds, counted in both figures before).
        let memory = residentMemory()
        let parts = try await LoopStateStore(pool: pool).checkpoint().map {
            (observer: $0.observer.count, classifier: $0.classifier.count, engine: $0.engine.count)
        }
        let checkpointBytes = (parts?.observer ?? 0) + (parts?.classifier ?? 0) + (parts?.engine ?? 0)
        let current = loop.publisher.current
        await loop.shutdown()
        await pool.close()
        return Report(
            configuration: configuration, eventsPerTick: eventsPerTick, ingestSeconds: ingestSeconds,
            foldSeconds: foldSeconds, foldTicks: foldTicks, ticks: ticks, checkpointSeconds: checkpointSeconds,
            checkpointBytes: checkpointBytes,
            checkpointParts: (parts?.observer ?? 0, parts?.classifier ?? 0, parts?.engine ?? 0),
            residentAfterFold: residentAfterFold, residentAfterTicks: residentAfterTicks,
            allocatedTenants: current?.snapshot.tenants.count ?? 0, snapshotBytes: current?.body.count ?? 0,
            residentBytes: memory.current, peakResidentBytes: memory.peak)
    }

    /// A policy for the benchmark: the default tier plus a premium tier for every tenth tenant, and
    /// one pool with capacity for `tenants` tenants at about 50 requests and 50,000 tokens a minute.
    public static func benchmarkPolicy(tenants: Int) -> Policy {
        let capacity = capacity(tenants: tenants)
        let premium = Tier(name: "premium", priority: 1, weight: 4, floor: PerDimension(.percent(0.005)))
        let standard = Tier(name: "standard", priority: 2)
        return Policy(
            tiers: [premium, standard],
            upstreams: [
                UpstreamPolicy(
                    id: EventGenerator.upstream,
                    capacity: PerDimension(rpm: capacity.rpm, tpm: capacity.tpm),
                    price: Price(inputPerMillionTokens: 2.5, outputPerMillionTokens: 10))
            ],
            tenants: stride(from: 0, to: tenants, by: 10).map {
                TenantPolicy(id: EventGenerator.tenant($0), tier: "premium")
            })
    }

    /// The benchmark pool's capacity per minute: about 50 requests and 50,000 tokens per tenant.
    static func capacity(tenants: Int) -> PerDimension<Double> {
        PerDimension(rpm: Double(tenants) * 50, tpm: Double(tenants) * 50_000)
    }

    /// Resident memory now and at its peak (`VmRSS`, `VmHWM` of `/proc/self/status`), bytes.
    public static func residentMemory() -> (current: Double, peak: Double) {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else {
            return (ProcessMetrics.read().residentMemoryBytes ?? 0, 0)
        }
        func kilobytes(_ key: String) -> Double {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(key) }) else { return 0 }
            let digits = line.dropFirst(key.count).filter(\.isNumber)
            return (Double(String(digits)) ?? 0) * 1024
        }
        return (kilobytes("VmRSS:"), kilobytes("VmHWM:"))
    }

    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        return sorted[(sorted.count - 1) / 2]
    }
}

/// The benchmark could not run as set up.
public struct BenchmarkError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Deterministic telemetry for the benchmarks: tenants round-robin, a realistic mix of outcomes,
/// token counts and latencies, every event through a gateway that serves the tenant. Served events carry
/// OpenAI's rate-limit headers (the pool's capacity as the limit, most of it remaining), as a gateway in
/// front of OpenAI reports them: the Observer reads a statement from each.
struct EventGenerator: Sendable {
    static let upstream = "openai/gpt-4o"

    let configuration: LoopBenchmark.Configuration
    private let tenantIDs: [String]
    private let gatewayIDs: [String]
    private let counter = Counter()

    /// The running event number (a class so `store` can advance it on a `let`).
    private final class Counter: @unchecked Sendable {
        // Only touched by `store`, which the benchmark calls sequentially.
        var value = 0
    }

    /// What a served event's headers state.
    private let headers: EventSignals

    init(configuration: LoopBenchmark.Configuration) {
        self.configuration = configuration
        let capacity = LoopBenchmark.capacity(tenants: configuration.tenants)
        let requests = Int64(capacity.rpm)
        let tokens = Int64(capacity.tpm)
        headers = EventSignals(
            family: .openai, limitRequests: requests, remainingRequests: requests - 1, resetRequestsMs: 6,
            limitTokens: tokens, remainingTokens: tokens - 2_000, resetTokensMs: 6)
        tenantIDs = (0..<configuration.tenants).map(Self.tenant)
        gatewayIDs = (0..<configuration.gateways).map { "gw-\($0)" }
    }

    static func tenant(_ index: Int) -> String { "tenant-\(index)" }

    /// Stores `count` events with timestamps spread over `[from, to)`, in batches of 10,000.
    func store(count: Int, from: Double, to: Double, into store: TelemetryStore, defaultTier: String) async throws {
        let batchSize = 10_000
        var written = 0
        while written < count {
            let size = min(batchSize, count - written)
            var events: [TelemetryEvent] = []
            events.reserveCapacity(size)
            for offset in 0..<size {
                let position = written + offset
                let n = counter.value
                counter.value += 1
                let tenant = n % tenantIDs.count
                // A tenant is served by two gateways, mostly the first.
                let gateway = (tenant + (n % 4 == 0 ? 1 : 0)) % gatewayIDs.count
                let outcome: Outcome = n % 50 == 0 ? .deniedLocal : (n % 97 == 0 ? .queued : .ok)
                let timestamp = from + (to - from) * Double(position) / Double(max(1, count))
                events.append(
                    TelemetryEvent(
                        timestampMs: EpochTime.milliseconds(fromSeconds: timestamp), gateway: gatewayIDs[gateway],
                        tenant: tenantIDs[tenant], upstream: Self.upstream, outcome: outcome,
                        status: outcome == .ok ? 200 : nil, latencyMs: outcome == .ok ? Double(300 + n % 900) : nil,
                        promptTokens: outcome == .ok ? Int64(500 + n % 1500) : nil,
                        completionTokens: outcome == .ok ? Int64(100 + n % 400) : nil,
                        estimatedTokens: Int64(800), taskClass: n % 3 == 0 ? .batch : .interactive,
                        taskID: "task-\(n / 20)", signals: outcome == .ok ? headers : EventSignals()))
            }
            _ = try await store.ingest(
                TelemetryBatch(events: events), defaultTier: defaultTier, now: to)
            written += size
        }
    }
}
