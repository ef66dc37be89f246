import AllotHTTP
import AllotJSON
import AllotSQLite
import AllotStore
import AllotTime
import Foundation

/// The ingest benchmark (SPEC section 13: at least 100,000 events/s through HTTP in batches, every
/// acknowledged event present afterwards), run by `allot bench ingest`.
///
/// Each run starts a real ``AllotHTTP/HTTPServer`` with ``TelemetryRoute`` on an ephemeral loopback
/// port over a fresh database in a temporary directory (with the service's durability,
/// `synchronous=FULL`, unless configured otherwise), then ``Configuration/clients`` concurrent
/// ``AllotHTTP/HTTPClient`` tasks post realistic batches (``TelemetryLoadGenerator``) for
/// ``Configuration/duration`` seconds. Afterwards every acknowledged batch is checked in SQLite:
/// its `[first_id, last_id]` range holds exactly `stored` rows and the table holds nothing else.
///
/// Beside the HTTP figure it measures, on the same machine and the same rows, the layers below:
/// the store without HTTP (decoded batches into ``AllotStore/TelemetryStore``, same concurrency),
/// decoding alone (one core), and a plain bulk insert of the rows (``AllotStore/TelemetryBulkInsert``,
/// 1,000 rows per transaction): the physical limit the HTTP path is compared with.
///
/// Figures are medians over ``Configuration/runs`` runs. Tests never assert on them.
public enum IngestBenchmark {
    public struct Configuration: Sendable {
        /// Concurrent HTTP clients (each posts a batch, waits for the answer, posts the next).
        public var clients: Int
        /// Events per batch.
        public var batchSize: Int
        /// Seconds each run posts for.
        public var duration: Double
        /// Runs (the report gives medians).
        public var runs: Int
        /// Distinct tenants in the generated traffic.
        public var tenants: Int
        /// Distinct batch bodies generated up front (cycled; every event is still stored anew).
        public var distinctBatches: Int
        /// `PRAGMA synchronous` of the database (the service uses `FULL`).
        public var synchronous: SQLiteConfiguration.Synchronous
        /// Group commit: batches per transaction (1 turns it off).
        public var maxBatchesPerTransaction: Int
        /// Where the temporary databases go (default: the system's temporary directory).
        public var directory: String?
        /// Also measure the layers below HTTP (store, decoding, bulk insert) after each run.
        public var measureLayers: Bool
        /// Post every batch with an `Idempotency-Key` of its own (``AllotStore/TelemetryBatchKey``): the body's
        /// SHA-256, the key's lookup and its row.
        public var idempotencyKeys: Bool

        /// - Parameters:
        ///   - clients: Default 4.
        ///   - batchSize: Default 1,000.
        ///   - duration: Default 5 s.
        ///   - runs: Default 3.
        ///   - tenants: Default 1,000.
        ///   - distinctBatches: Default 32.
        ///   - synchronous: Default `FULL`.
        ///   - maxBatchesPerTransaction: Default 16 (``AllotStore/TelemetryStore/Configuration``).
        ///   - directory: Default nil (the system's temporary directory).
        ///   - measureLayers: Default true.
        ///   - idempotencyKeys: Default false.
        public init(
            clients: Int = 4, batchSize: Int = 1_000, duration: Double = 5, runs: Int = 3, tenants: Int = 1_000,
            distinctBatches: Int = 32, synchronous: SQLiteConfiguration.Synchronous = .full,
            maxBatchesPerTransaction: Int = 16, directory: String? = nil, measureLayers: Bool = true,
            idempotencyKeys: Bool = false
        ) {
            self.idempotencyKeys = idempotencyKeys
            self.clients = max(1, clients)
            self.batchSize = max(1, batchSize)
            self.duration = max(0.01, duration)
            self.runs = max(1, runs)
            self.tenants = max(1, tenants)
            self.distinctBatches = max(1, distinctBatches)
            self.synchronous = synchronous
            self.maxBatchesPerTransaction = max(1, maxBatchesPerTransaction)
            self.directory = directory
            self.measureLayers = measureLayers
        }
    }

    /// One run through HTTP.
    public struct Run: Sendable, Equatable {
        /// Acknowledged (200) events and batches.
        public var events: Int
        public var batches: Int
        /// Answers other than 200, and transport errors.
        public var failures: Int
        public var seconds: Double
        public var eventsPerSecond: Double
        /// Batch round-trip latency percentiles, milliseconds.
        public var p50Milliseconds: Double
        public var p99Milliseconds: Double
        /// Transactions the store committed (group commit makes them fewer than batches).
        public var transactions: Int
        /// Process CPU time (user + system, all threads: clients, server, SQLite) per acknowledged
        /// event, in microseconds. On a machine shared with other work this is steadier than
        /// events/s; 2 cores give 20 µs per event at 100,000 events/s.
        public var cpuMicrosecondsPerEvent: Double
        /// True when every acknowledged event was found and nothing else.
        public var verified: Bool
    }

    public struct Report: Sendable, Equatable {
        public var configuration: String
        public var runs: [Run]
        /// Medians over the runs, through HTTP.
        public var eventsPerSecond: Double
        public var p50Milliseconds: Double
        public var p99Milliseconds: Double
        /// Median process CPU per event through HTTP, microseconds.
        public var cpuMicrosecondsPerEvent: Double
        /// Median events/s of decoded batches straight into the store (no HTTP, no JSON).
        public var storeEventsPerSecond: Double
        /// Median events/s of decoding and validating alone, one core.
        public var decodeEventsPerSecond: Double
        /// Median rows/s of a plain bulk insert of the same rows, 1,000 per transaction.
        public var bulkInsertRowsPerSecond: Double
        /// True when every run verified.
        public var verified: Bool

        /// The report as printed by `allot bench ingest`.
        public var text: String {
            var lines = ["ingest benchmark: \(configuration)"]
            for (index, run) in runs.enumerated() {
                lines.append(
                    "  run \(index + 1): \(Self.rate(run.eventsPerSecond)) events/s, \(run.events) events in "
                        + "\(run.batches) batches (\(run.transactions) transactions) in \(Self.fixed(run.seconds, 2)) s, "
                        + "p50 \(Self.fixed(run.p50Milliseconds, 1)) ms, p99 \(Self.fixed(run.p99Milliseconds, 1)) ms, "
                        + "\(Self.fixed(run.cpuMicrosecondsPerEvent, 1)) µs CPU/event, "
                        + "failures \(run.failures), \(run.verified ? "all acknowledged events present" : "VERIFICATION FAILED")"
                )
            }
            lines.append(
                "  HTTP ingest (median):        \(Self.rate(eventsPerSecond)) events/s, p50 \(Self.fixed(p50Milliseconds, 1)) ms, "
                    + "p99 \(Self.fixed(p99Milliseconds, 1)) ms per batch, \(Self.fixed(cpuMicrosecondsPerEvent, 1)) µs CPU per event"
            )
            if bulkInsertRowsPerSecond > 0 {
                lines.append("  store without HTTP (median): \(Self.rate(storeEventsPerSecond)) events/s")
                lines.append("  decode + validate, 1 core:   \(Self.rate(decodeEventsPerSecond)) events/s")
                lines.append("  plain bulk insert (limit):   \(Self.rate(bulkInsertRowsPerSecond)) rows/s")
            }
            lines.append("  verified: \(verified ? "yes" : "NO")")
            return lines.joined(separator: "\n")
        }

        static func rate(_ value: Double) -> String {
            let rounded = Int((value / 100).rounded()) * 100
            var digits = String(rounded)
            var groups: [String] = []
            while digits.count > 3 {
                groups.insert(String(digits.suffix(3)), at: 0)
                digits.removeLast(3)
            }
            groups.insert(digits, at: 0)
            return groups.joined(separator: ",")
        }

        static func fixed(_ value: Double, _ digits: Int) -> String {
            String(format: "%.\(digits)f", value)
        }
    }

    /// Runs the benchmark; `progress` receives a line per finished run.
    public static func run(_ configuration: Configuration, progress: @Sendable (String) -> Void = { _ in })
        async throws -> Report
    {
        let startMs = EpochTime.milliseconds(fromSeconds: SystemClock().now) - 60_000
        var generator = TelemetryLoadGenerator(seed: 0xA110_7, tenants: configuration.tenants)
        let bodies = (0..<configuration.distinctBatches).map { number in
            generator.batch(
                count: configuration.batchSize, startMs: startMs + Int64(number * configuration.batchSize),
                batchNumber: number)
        }
        let decoder = TelemetryDecoder(validation: TelemetryValidation(maxEvents: max(10_000, configuration.batchSize)))
        let now = SystemClock().now

        var runs: [Run] = []
        var storeRates: [Double] = []
        var decodeRates: [Double] = []
        var bulkRates: [Double] = []
        for index in 0..<configuration.runs {
            let run = try await httpRun(configuration, bodies: bodies, decoder: decoder)
            runs.append(run)
            progress(
                "run \(index + 1)/\(configuration.runs): \(Report.rate(run.eventsPerSecond)) events/s through HTTP"
                    + (run.verified ? "" : " (VERIFICATION FAILED)"))
            guard configuration.measureLayers else { continue }
            decodeRates.append(
                try decodeRate(bodies, decoder: decoder, now: now, seconds: min(1, configuration.duration)))
            let batches = try bodies.map { try decoder.decode($0, format: .jsonArray, now: now) }
            storeRates.append(try await storeRate(configuration, batches: batches))
            bulkRates.append(try await bulkInsertRate(configuration, batches: batches))
        }
        return Report(
            configuration:
                "\(configuration.clients) clients, batches of \(configuration.batchSize), \(Report.fixed(configuration.duration, 1)) s × "
                + "\(configuration.runs) runs, synchronous=\(configuration.synchronous.rawValue), "
                + "group commit \(configuration.maxBatchesPerTransaction > 1 ? "up to \(configuration.maxBatchesPerTransaction) batches" : "off")"
                + (configuration.idempotencyKeys ? ", an Idempotency-Key per batch" : ""),
            runs: runs,
            eventsPerSecond: median(runs.map(\.eventsPerSecond)),
            p50Milliseconds: median(runs.map(\.p50Milliseconds)),
            p99Milliseconds: median(runs.map(\.p99Milliseconds)),
            cpuMicrosecondsPerEvent: median(runs.map(\.cpuMicrosecondsPerEvent)),
            storeEventsPerSecond: median(storeRates),
            decodeEventsPerSecond: median(decodeRates),
            bulkInsertRowsPerSecond: median(bulkRates),
            verified: runs.allSatisfy(\.verified))
    }

    // MARK: HTTP

    private struct Acknowledgement: Sendable {
        var firstID: Int64
        var lastID: Int64
        var stored: Int
    }

    private struct ClientTally: Sendable {
        var acknowledgements: [Acknowledgement] = []
        var latencies: [Double] = []
        var failures = 0
    }

    private static func httpRun(_ configuration: Configuration, bodies: [[UInt8]], decoder: TelemetryDecoder)
        async throws -> Run
    {
        let database = try TemporaryDatabase(configuration)
        defer { database.remove() }
        let pool = try await StoreDatabase.open(path: database.path, configuration: database.sqlite)
        let store = TelemetryStore(
            pool: pool, configuration: .init(maxBatchesPerTransaction: configuration.maxBatchesPerTransaction))
        var router = Router()
        TelemetryRoute(store: store, decoder: decoder, defaultTier: { "standard" }).register(in: &router)
        let largest = bodies.map(\.count).max() ?? 0
        let server = HTTPServer(
            configuration: HTTPServerConfiguration(port: 0, maxBodyBytes: max(8 << 20, largest * 2)), responder: router)
        let port = try await server.start()
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                timeout: .seconds(60), maxConnectionsPerHost: configuration.clients * 2,
                maxIdleConnectionsPerHost: configuration.clients * 2))
        let url = "http://127.0.0.1:\(port)\(TelemetryRoute.path)"
        let headers: HTTPHeaders = ["Content-Type": "application/json"]

        // Warm-up (connections, statement cache, name interning), not counted.
        var warmup = ClientTally()
        for body in bodies.prefix(2) { await post(client, url, body, headers, into: &warmup) }

        let start = MonotonicClock.now()
        let cpuStart = processCPUSeconds()
        let deadline = start + UInt64(configuration.duration * 1e9)
        let tallies = await withTaskGroup(of: ClientTally.self) { group in
            for clientIndex in 0..<configuration.clients {
                group.addTask {
                    var tally = ClientTally()
                    var next = clientIndex
                    // At least one batch per client: on a loaded machine a client task may first
                    // run after a short deadline, and a run must still measure (and verify) something.
                    repeat {
                        var batchHeaders = headers
                        if configuration.idempotencyKeys {
                            batchHeaders.add(name: "Idempotency-Key", value: "b-\(next)")
                        }
                        await post(client, url, bodies[next % bodies.count], batchHeaders, into: &tally)
                        next += configuration.clients
                    } while MonotonicClock.now() < deadline
                    return tally
                }
            }
            var all: [ClientTally] = []
            for await tally in group { all.append(tally) }
            return all
        }
        let seconds = MonotonicClock.seconds(since: start)
        let cpuSeconds = processCPUSeconds() - cpuStart
        await client.shutdown()
        await server.shutdown(gracePeriod: .seconds(5))

        let acknowledgements = tallies.flatMap(\.acknowledgements)
        let events = acknowledgements.map(\.stored).reduce(0, +)
        let verified = try await verify(acknowledgements + warmup.acknowledgements, pool: pool)
        let transactions = await store.counters.transactions
        await pool.close()
        let latencies = tallies.flatMap(\.latencies).sorted()
        return Run(
            events: events, batches: acknowledgements.count, failures: tallies.map(\.failures).reduce(0, +),
            seconds: seconds, eventsPerSecond: Double(events) / max(seconds, 1e-9),
            p50Milliseconds: percentile(latencies, 0.50) * 1_000, p99Milliseconds: percentile(latencies, 0.99) * 1_000,
            transactions: transactions, cpuMicrosecondsPerEvent: cpuSeconds / Double(max(events, 1)) * 1e6,
            verified: verified && warmup.failures == 0)
    }

    private static func post(
        _ client: HTTPClient, _ url: String, _ body: [UInt8], _ headers: HTTPHeaders, into tally: inout ClientTally
    ) async {
        let sent = MonotonicClock.now()
        do {
            let response = try await client.post(url, body: body, headers: headers)
            tally.latencies.append(MonotonicClock.seconds(since: sent))
            guard response.status.code == 200, let json = try? response.json(),
                let first = json["first_id"]?.int64Value, let last = json["last_id"]?.int64Value,
                let stored = json["stored"]?.intValue, json["duplicate"] == nil
            else {
                tally.failures += 1
                return
            }
            tally.acknowledgements.append(Acknowledgement(firstID: first, lastID: last, stored: stored))
        } catch {
            tally.failures += 1
        }
    }

    /// Every acknowledged range holds exactly its batch, and the table holds nothing more.
    private static func verify(_ acknowledgements: [Acknowledgement], pool: DatabasePool) async throws -> Bool {
        try await pool.read { connection in
            for ack in acknowledgements {
                let count = try connection.queryOne(
                    "SELECT count(*) FROM events WHERE id BETWEEN ? AND ?", ack.firstID, ack.lastID
                ) { $0.int64(0) }
                guard count == Int64(ack.stored), ack.lastID - ack.firstID + 1 == Int64(ack.stored) else {
                    return false
                }
            }
            let total = try connection.queryOne("SELECT count(*) FROM events") { $0.int64(0) } ?? -1
            return total == Int64(acknowledgements.map(\.stored).reduce(0, +))
        }
    }

    // MARK: Layers below HTTP

    private static func decodeRate(_ bodies: [[UInt8]], decoder: TelemetryDecoder, now: Double, seconds: Double)
        throws -> Double
    {
        let start = MonotonicClock.now()
        var events = 0
        repeat {
            for body in bodies { events += try decoder.decode(body, format: .jsonArray, now: now).events.count }
        } while MonotonicClock.seconds(since: start) < seconds
        return Double(events) / MonotonicClock.seconds(since: start)
    }

    private static func storeRate(_ configuration: Configuration, batches: [TelemetryBatch]) async throws -> Double {
        let database = try TemporaryDatabase(configuration)
        defer { database.remove() }
        let pool = try await StoreDatabase.open(path: database.path, configuration: database.sqlite)
        let store = TelemetryStore(
            pool: pool, configuration: .init(maxBatchesPerTransaction: configuration.maxBatchesPerTransaction))
        _ = try await store.ingest(batches[0], defaultTier: "standard", now: SystemClock().now)
        let start = MonotonicClock.now()
        let deadline = start + UInt64(min(configuration.duration, 3) * 1e9)
        let events = try await withThrowingTaskGroup(of: Int.self) { group in
            for clientIndex in 0..<configuration.clients {
                group.addTask {
                    var stored = 0
                    var next = clientIndex
                    while MonotonicClock.now() < deadline {
                        let batch = batches[next % batches.count]
                        stored += try await store.ingest(batch, defaultTier: "standard", now: SystemClock().now).stored
                        next += configuration.clients
                    }
                    return stored
                }
            }
            return try await group.reduce(0, +)
        }
        let seconds = MonotonicClock.seconds(since: start)
        await pool.close()
        return Double(events) / seconds
    }

    private static func bulkInsertRate(_ configuration: Configuration, batches: [TelemetryBatch]) async throws
        -> Double
    {
        let database = try TemporaryDatabase(configuration)
        defer { database.remove() }
        let pool = try await StoreDatabase.open(path: database.path, configuration: database.sqlite)
        let rows = batches.flatMap(\.events)
        _ = try await TelemetryBulkInsert.insert(Array(rows.prefix(1_000)), into: pool)
        let start = MonotonicClock.now()
        var inserted = 0
        repeat {
            inserted += try await TelemetryBulkInsert.insert(rows, into: pool, rowsPerTransaction: 1_000)
        } while MonotonicClock.seconds(since: start) < min(1, configuration.duration)
        let seconds = MonotonicClock.seconds(since: start)
        await pool.close()
        return Double(inserted) / seconds
    }

    // MARK: Helpers

    /// A database file in a fresh temporary directory, removed afterwards.
    private struct TemporaryDatabase {
        let directory: URL
        let path: String
        let sqlite: SQLiteConfiguration

        init(_ configuration: Configuration) throws {
            let base =
                configuration.directory.map { URL(fileURLWithPath: $0) } ?? FileManager.default.temporaryDirectory
            directory = base.appendingPathComponent("allot-bench-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            path = directory.appendingPathComponent("allot.sqlite").path
            sqlite = SQLiteConfiguration(synchronous: configuration.synchronous)
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    /// User + system CPU time of the whole process so far.
    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let index = min(sorted.count - 1, max(0, Int((Double(sorted.count) * fraction).rounded(.up)) - 1))
        return sorted[index]
    }
}
