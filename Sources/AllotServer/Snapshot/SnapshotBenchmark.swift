import AllotHTTP
import AllotLoop
import AllotProtocol
import AllotSQLite
import AllotStore
import AllotTime
import Foundation

/// The snapshot endpoint's benchmarks (SPEC 13), behind `allot bench longpoll` and
/// `allot bench snapshot`: real sockets on loopback, the real route, publisher and SQLite.
///
/// - ``longPoll(_:log:)``: `watchers` gateways long-poll (`wait=60`, `If-None-Match` = the current
///   version), each on its own connection; one publish must answer all of them (goal: within
///   100 ms). The wake latency of each is measured from the moment the version became visible
///   (after it was persisted) to the moment its client has the whole response.
/// - ``conditional(_:log:)``: keep-alive clients send `If-None-Match` with the current version as
///   fast as they can and get 304s (goal: ≥ 20,000/s), measured by an in-process client and, when
///   it is installed, by `wrk` (the command is printed).
///
/// The snapshot is realistic for a large fleet: `tenants` tenants each served by
/// `gatewaysPerTenant` of the gateways, so every gateway receives its own small slice (encoded once
/// per version and gateway) while the global view is a multi-megabyte document.
public enum SnapshotBenchmark {
    public struct Configuration: Sendable {
        /// Long-polls held at once.
        public var watchers: Int
        /// Tenants in the snapshot.
        public var tenants: Int
        /// Gateways serving each tenant.
        public var gatewaysPerTenant: Int
        /// Measured runs (the report gives medians).
        public var runs: Int
        /// Conditional benchmark: concurrent keep-alive connections.
        public var connections: Int
        /// Conditional benchmark: seconds per run.
        public var seconds: Double
        /// Server event-loop threads.
        public var eventLoops: Int
        /// Also drive the conditional benchmark with `wrk` when it is on the PATH.
        public var useWrk: Bool

        /// - Parameters: defaults `watchers` 5,000, `tenants` 10,000, `gatewaysPerTenant` 2, `runs` 5,
        ///   `connections` 64, `seconds` 5, `eventLoops` 1, `useWrk` true.
        public init(
            watchers: Int = 5_000, tenants: Int = 10_000, gatewaysPerTenant: Int = 2, runs: Int = 5,
            connections: Int = 64, seconds: Double = 5, eventLoops: Int = 1, useWrk: Bool = true
        ) {
            self.watchers = max(1, watchers)
            self.tenants = max(1, tenants)
            self.gatewaysPerTenant = max(1, gatewaysPerTenant)
            self.runs = max(1, runs)
            self.connections = max(1, connections)
            self.seconds = max(0.1, seconds)
            self.eventLoops = max(1, eventLoops)
            self.useWrk = useWrk
        }
    }

    /// One publish answering every held long-poll.
    public struct WakeRun: Sendable {
        /// Long-polls answered with the new version (of `watchers`).
        public var answered: Int
        /// Wake latencies, seconds: median, 99th percentile, maximum.
        public var p50: Double
        public var p99: Double
        public var max: Double
        /// The publish call itself: encode, persist, make visible (before any wake-up).
        public var publishSeconds: Double
        /// Median response body size (a gateway's slice).
        public var bodyBytes: Int
    }

    public struct WakeReport: Sendable {
        public var configuration: Configuration
        public var runs: [WakeRun]

        /// The median over runs of the slowest watcher's wake-up, seconds.
        public var medianMax: Double { median(runs.map(\.max)) }
        /// Every run answered every watcher.
        public var everyWatcherAnswered: Bool { runs.allSatisfy { $0.answered == configuration.watchers } }

        public var text: String {
            var lines = [
                "long-poll wake-up: \(configuration.watchers) watchers over loopback, \(configuration.tenants) tenants "
                    + "on \(configuration.gatewaysPerTenant) gateways each (every watcher gets its own slice)"
            ]
            for (index, run) in runs.enumerated() {
                lines.append(
                    "  run \(index + 1): answered \(run.answered)/\(configuration.watchers)  p50 \(ms(run.p50))  "
                        + "p99 \(ms(run.p99))  max \(ms(run.max))  (publish \(ms(run.publishSeconds)), "
                        + "slice \(run.bodyBytes) B)")
            }
            lines.append(
                "  median of \(runs.count) runs: p50 \(ms(median(runs.map(\.p50))))  p99 \(ms(median(runs.map(\.p99))))  "
                    + "max \(ms(median(runs.map(\.max))))  (goal: every watcher within 100 ms)")
            return lines.joined(separator: "\n")
        }
    }

    public struct ConditionalRun: Sendable {
        public var requests: Int
        public var seconds: Double
        public var failures: Int
        public var perSecond: Double { seconds > 0 ? Double(requests) / seconds : 0 }
    }

    public struct ConditionalReport: Sendable {
        public var configuration: Configuration
        public var runs: [ConditionalRun]
        /// Requests per second `wrk` measured per run, when it ran.
        public var wrk: [Double]
        /// The `wrk` command used (with the port of the last run).
        public var wrkCommand: String

        /// Requests per second: `wrk`'s median when it ran (an external load generator), else the
        /// in-process client's median.
        public var medianPerSecond: Double { wrk.isEmpty ? median(runs.map(\.perSecond)) : median(wrk) }

        public var text: String {
            var lines = [
                "conditional snapshot requests (If-None-Match = current version → 304), "
                    + "\(configuration.connections) keep-alive connections, \(formatted(configuration.seconds)) s per run"
            ]
            for (index, run) in runs.enumerated() {
                lines.append(
                    "  run \(index + 1): \(Int(run.perSecond.rounded())) req/s (\(run.requests) requests, "
                        + "\(run.failures) failures)")
            }
            lines.append(
                "  in-process client, median: \(Int(median(runs.map(\.perSecond)).rounded())) req/s (goal ≥ 20,000)")
            if !wrk.isEmpty {
                lines.append(
                    "  wrk, median of \(wrk.count): \(Int(median(wrk).rounded())) req/s — \(wrkCommand)")
            } else {
                lines.append("  wrk not found; to measure with it: \(wrkCommand)")
            }
            return lines.joined(separator: "\n")
        }
    }

    // MARK: Long-poll wake-up

    /// Measures how long one publish takes to answer every held long-poll. The watchers are plain
    /// sockets read by one thread (``LongPollWatchers``), so the figure is the server's.
    public static func longPoll(_ configuration: Configuration, log: @Sendable (String) -> Void = { _ in }) async throws
        -> WakeReport
    {
        let bench = try await Bench.start(configuration, connections: configuration.watchers)
        defer { bench.stopSync() }
        let watchers = try LongPollWatchers(count: configuration.watchers, port: bench.port)
        let visibleAt = Box<UInt64>(0)
        await bench.publisher.onPublish { _ in visibleAt.value = MonotonicClock.now() }
        var runs: [WakeRun] = []
        for run in 0...configuration.runs {
            let version = bench.publisher.current?.version ?? 0
            try watchers.send { index in
                Array(
                    ("GET \(SnapshotRoute.path)?gateway=\(Bench.gateway(index))&wait=60 HTTP/1.1\r\n"
                        + "Host: 127.0.0.1\r\nIf-None-Match: \"\(version)\"\r\n\r\n").utf8)
            }
            let deadline = MonotonicClock.now() + 60_000_000_000
            while bench.publisher.watcherCount < configuration.watchers, MonotonicClock.now() < deadline {
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            log("run \(run): \(bench.publisher.watcherCount) long-polls held; publishing")
            // The reader thread waits in poll(2) before the publish, so it notes each answer as it lands.
            let collected = Box<[LongPollWatchers.Response]>([])
            let finished = DispatchSemaphore(value: 0)
            let reader = Thread {
                collected.value = watchers.collect(timeout: 60)
                finished.signal()
            }
            reader.start()
            try await Task.sleep(nanoseconds: 20_000_000)
            let started = MonotonicClock.now()
            try await bench.publish()
            let publishSeconds = MonotonicClock.seconds(since: started)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    finished.wait()
                    continuation.resume()
                }
            }
            let answered = collected.value.filter { $0.status == 200 && $0.completedAt > 0 }
            var latencies = answered.map {
                $0.completedAt > visibleAt.value ? Double($0.completedAt - visibleAt.value) / 1e9 : 0
            }
            var sizes = answered.map(\.bodyBytes)
            latencies.sort()
            sizes.sort()
            let result = WakeRun(
                answered: answered.count, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99),
                max: latencies.last ?? 0, publishSeconds: publishSeconds,
                bodyBytes: sizes.isEmpty ? 0 : sizes[sizes.count / 2])
            // Run 0 warms up: connections, slice caches, code paths.
            if run > 0 {
                runs.append(result)
                log(
                    "run \(run): p50 \(ms(result.p50)) p99 \(ms(result.p99)) max \(ms(result.max)), answered \(answered.count)"
                )
            }
        }
        await bench.stop()
        return WakeReport(configuration: configuration, runs: runs)
    }

    // MARK: Conditional requests

    /// Measures conditional requests answered with 304 per second.
    public static func conditional(_ configuration: Configuration, log: @Sendable (String) -> Void = { _ in })
        async throws -> ConditionalReport
    {
        let bench = try await Bench.start(configuration, connections: configuration.connections * 2 + 64)
        defer { bench.stopSync() }
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                maxConnectionsPerHost: configuration.connections, maxIdleConnectionsPerHost: configuration.connections))
        let version = bench.publisher.current?.version ?? 0
        let url = bench.url + "?gateway=\(Bench.gateway(0))"
        var runs: [ConditionalRun] = []
        for run in 0...configuration.runs {
            let seconds = run == 0 ? min(1, configuration.seconds) : configuration.seconds
            let started = MonotonicClock.now()
            let end = started + UInt64(seconds * 1e9)
            let counts = await withTaskGroup(of: (Int, Int).self) { group in
                for _ in 0..<configuration.connections {
                    group.addTask {
                        var done = 0
                        var failed = 0
                        // At least one request per connection, even when this task starts after
                        // `end` on a loaded machine (a short run would otherwise count nothing).
                        repeat {
                            do {
                                let response = try await client.get(url, headers: ["If-None-Match": "\"\(version)\""])
                                if response.status == .notModified { done += 1 } else { failed += 1 }
                            } catch {
                                failed += 1
                            }
                        } while MonotonicClock.now() < end
                        return (done, failed)
                    }
                }
                var total = (0, 0)
                for await (done, failed) in group {
                    total.0 += done
                    total.1 += failed
                }
                return total
            }
            let result = ConditionalRun(
                requests: counts.0, seconds: MonotonicClock.seconds(since: started), failures: counts.1)
            if run > 0 {
                runs.append(result)
                log("run \(run): \(Int(result.perSecond)) req/s")
            }
        }
        await client.shutdown()

        let command =
            "wrk -t2 -c\(configuration.connections) -d\(Int(configuration.seconds.rounded(.up)))s "
            + "-H 'If-None-Match: \"\(version)\"' '\(url)'"
        var wrk: [Double] = []
        if configuration.useWrk, let path = Self.wrkPath() {
            for run in 1...configuration.runs {
                guard
                    let perSecond = runWrk(
                        path, connections: configuration.connections, seconds: configuration.seconds,
                        version: version, url: url)
                else { break }
                wrk.append(perSecond)
                log("wrk run \(run): \(Int(perSecond)) req/s")
            }
        }
        await bench.stop()
        return ConditionalReport(configuration: configuration, runs: runs, wrk: wrk, wrkCommand: command)
    }

    private static func wrkPath() -> String? {
        for directory in ["/usr/bin", "/usr/local/bin", "/bin"]
        where FileManager.default.isExecutableFile(atPath: directory + "/wrk") {
            return directory + "/wrk"
        }
        return nil
    }

    /// Runs wrk once and reads its `Requests/sec:` line.
    private static func runWrk(_ path: String, connections: Int, seconds: Double, version: Int64, url: String)
        -> Double?
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = [
            "-t2", "-c\(connections)", "-d\(Int(seconds.rounded(.up)))s", "-H", "If-None-Match: \"\(version)\"", url,
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            return nil
        }
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("Requests/sec:") }) else {
            return nil
        }
        return Double(line.dropFirst("Requests/sec:".count).trimmingCharacters(in: .whitespaces))
    }

    // MARK: Fixture

    /// A server with the snapshot route and a publisher that has a version published.
    private final class Bench: Sendable {
        let server: HTTPServer
        let publisher: AllocationPublisher
        let configuration: Configuration
        let url: String
        let port: Int
        let version = Box<Int>(0)

        private init(server: HTTPServer, publisher: AllocationPublisher, configuration: Configuration, port: Int) {
            self.server = server
            self.publisher = publisher
            self.configuration = configuration
            self.port = port
            self.url = "http://127.0.0.1:\(port)\(SnapshotRoute.path)"
        }

        static func start(_ configuration: Configuration, connections: Int) async throws -> Bench {
            let pool = try await StoreDatabase.temporary()
            let publisher = AllocationPublisher(store: SnapshotStore(pool: pool), clock: SystemClock())
            let signal = ShutdownSignal()
            let route = SnapshotRoute(publisher: publisher, shutdownSignal: signal)
            var router = Router()
            router.get(SnapshotRoute.path) { request in try await route.respond(to: request) }
            let server = HTTPServer(
                configuration: HTTPServerConfiguration(
                    port: 0, backlog: 8192, maxConnections: connections + 256, idleTimeout: .seconds(600),
                    eventLoopCount: configuration.eventLoops),
                responder: router, shutdownSignal: signal)
            let port = try await server.start()
            let bench = Bench(server: server, publisher: publisher, configuration: configuration, port: port)
            try await bench.publish()
            return bench
        }

        static func gateway(_ index: Int) -> String { "gw-\(index)" }

        /// Publishes the next version (rates change a little each time, so each is a new document).
        func publish() async throws {
            version.value += 1
            try await publisher.publish(
                SnapshotBenchmark.content(configuration, generation: version.value), now: SystemClock().now)
        }

        func stop() async {
            await server.shutdown(gracePeriod: .seconds(2))
        }

        /// For `defer`: the server is stopped by `stop()` on the normal path; this covers errors.
        func stopSync() {
            let server = self.server
            Task { await server.shutdown(gracePeriod: .seconds(1)) }
        }
    }

    /// `tenants` tenants on one pool, tenant `i` served by gateways `i mod G`, `i + 1 mod G`, …
    /// (G = `watchers`), in uneven shares.
    static func content(_ configuration: Configuration, generation: Int) -> SnapshotContent {
        let gatewayCount = configuration.watchers
        let limits = RateLimits(rpm: Bucket(rate: 1, burst: 1), tpm: Bucket(rate: 1000, burst: 166))
        var tenants: [TenantEntry] = []
        var sharesByTenant: [[String: Double]] = []
        tenants.reserveCapacity(configuration.tenants)
        for index in 0..<configuration.tenants {
            let rpm = Double(10 + (index * 7 + generation) % 90)
            let tpm = rpm * 1000
            tenants.append(
                TenantEntry(
                    id: "tenant-\(index)", upstream: "openai/gpt-4o", tier: index % 10 == 0 ? "premium" : "standard",
                    priority: index % 10 == 0 ? 1 : 2, rpm: Bucket(rate: rpm, burst: rpm / 6),
                    tpm: Bucket(rate: tpm, burst: tpm / 6), queueWeight: 1,
                    reason: Reasons(rpm: "fair_share", tpm: "demand"), maxConcurrency: 256,
                    tokenEstimate: TokenEstimate(p50: 200, p95: 900)))
            var shares: [String: Double] = [:]
            for part in 0..<configuration.gatewaysPerTenant {
                shares[Bench.gateway((index + part) % gatewayCount)] = Double(part + 1)
            }
            sharesByTenant.append(shares)
        }
        let gateways = (0..<gatewayCount).map(Bench.gateway).sorted()
        var index: [String: Int32] = [:]
        for (position, id) in gateways.enumerated() { index[id] = Int32(position) }
        let plan = SlicePlan(
            gateways: gateways,
            tenants: zip(tenants, sharesByTenant).map { entry, shares in
                SlicePlan.split(
                    rpm: entry.rpm.rate, tpm: entry.tpm.rate, shares: shares, index: index, minimumShare: 0.05)
            })
        let now = SystemClock().now
        let snapshot = Snapshot(
            version: 0, generatedAt: now, expiresAt: now + 300, refreshMs: 5000, policyVersion: "bench",
            upstreams: [
                UpstreamEntry(
                    id: "openai/gpt-4o", state: "healthy",
                    capacity: DimensionValues(rpm: Double(configuration.tenants) * 100, tpm: 1e9))
            ],
            tenants: tenants, defaultLimits: limits, fallback: Fallback(tenants: [], defaultLimits: limits))
        return SnapshotContent(snapshot: snapshot, plan: plan)
    }

    // MARK: Helpers

    /// A value shared with callbacks. `@unchecked Sendable`: every access holds `lock`.
    fileprivate final class Box<Value>: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: Value

        init(_ value: Value) { stored = value }

        var value: Value {
            get { lock.withLock { stored } }
            set { lock.withLock { stored = newValue } }
        }
    }

    static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(0, rank), sorted.count - 1)]
    }

    static func median(_ values: [Double]) -> Double {
        percentile(values.sorted(), 0.5)
    }

    static func ms(_ seconds: Double) -> String {
        "\(formatted(seconds * 1000)) ms"
    }

    static func formatted(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }
}
