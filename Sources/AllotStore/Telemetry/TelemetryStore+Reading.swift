import AllotCore
import AllotSQLite
import AllotSignals

/// Reads for the feedback loop, showback and tenant history. All run on the pool's reader
/// connection (WAL: they neither wait for nor block ingest) and see committed batches only.
extension TelemetryStore {
    /// Events with `id > afterID`, in id order, at most `limit` of them: the loop's incremental
    /// read (SPEC section 2: by row id, never the whole table). Pass the last id seen; 0 at start.
    ///
    /// The array is sized once for the rows there can be (the limit, or fewer when the largest id says so): grown
    /// by doubling, a catch-up read of 250,000 events held the old and the new buffer at once and copied them
    /// (`allot bench memory`'s peak 341–375 MiB → 322 with this alone; 242 with the loop's wait for a checkpoint).
    public nonisolated func events(afterID: Int64, limit: Int) async throws -> [StoredEvent] {
        try await pool.read { connection in
            let newest = try Self.newestID(connection)
            let from = max(0, afterID)  // ids start at 1: a negative cursor reads from the start
            let bound = max(0, min(Int64(max(0, limit)), max(from, newest ?? from) - from))
            return try connection.queryAll(
                Self.selectEventsSQL, afterID, Int64(max(0, limit)), reservingCapacity: Int(bound)
            ) { row in
                Self.storedEvent(row)
            }
        }
    }

    /// The largest event id (0 when no event was ever stored): where a loop that only wants new
    /// events starts.
    public nonisolated func lastEventID() async throws -> Int64 {
        try await pool.read { connection in try Self.newestID(connection) ?? 0 }
    }

    /// The id of the first event whose `ts` is at or after `milliseconds` (epoch ms), or nil when there is
    /// none: where a loop without a checkpoint may start reading recent history instead of the whole
    /// retention window. Found through the per-block time bounds (``EventBlocks``), scanning only the
    /// block that holds the answer, so it stays cheap without an index on `ts_ms`.
    public nonisolated func firstEventID(atOrAfterMs milliseconds: Int64) async throws -> Int64? {
        try await pool.read { connection in
            try EventBlocks.firstEventID(atOrAfter: milliseconds, connection: connection)
        }
    }

    /// Every interned name (tenants with their tiers, upstreams, gateways, model versions).
    public nonisolated func names() async throws -> TelemetryNames {
        try await pool.read { connection in
            var names = TelemetryNames()
            try connection.query("SELECT ref, id, tier, first_seen_ms, last_seen_ms FROM tenants") { row in
                let record = TenantRecord(
                    ref: row.int64(0), id: row.string(1) ?? "", tier: row.string(2) ?? "", firstSeenMs: row.int64(3),
                    lastSeenMs: row.int64(4))
                names.tenants[record.ref] = record
            }
            try connection.query("SELECT ref, id, first_seen_ms, last_seen_ms FROM upstreams") { row in
                names.upstreams[row.int64(0)] = NamedRecord(
                    ref: row.int64(0), id: row.string(1) ?? "", firstSeenMs: row.int64(2), lastSeenMs: row.int64(3))
            }
            try connection.query("SELECT ref, id, first_seen_ms, last_seen_ms FROM gateways") { row in
                names.gateways[row.int64(0)] = NamedRecord(
                    ref: row.int64(0), id: row.string(1) ?? "", firstSeenMs: row.int64(2), lastSeenMs: row.int64(3))
            }
            try connection.query("SELECT ref, id, first_seen_ms FROM model_versions") { row in
                names.modelVersions[row.int64(0)] = NamedRecord(
                    ref: row.int64(0), id: row.string(1) ?? "", firstSeenMs: row.int64(2), lastSeenMs: nil)
            }
            return names
        }
    }

    /// Usage per tenant, upstream and task class over the minutes starting in `[fromMs, toMs)`,
    /// summed from the per-minute rollups (showback, spend windows: SPEC section 6). Rollups have
    /// minute resolution: an event counts in the range its minute starts in. Sorted by tenant,
    /// upstream, task class.
    ///
    /// - Parameter tenant: Only this tenant; nil for all.
    public nonisolated func usage(fromMs: Int64, toMs: Int64, tenant: String? = nil) async throws -> [UsageTotal] {
        try? await flushRollups()  // exact when the database can be written; one flush interval stale at worst
        return try await pool.read { connection in
            let sql = tenant == nil ? Self.usageSQL : Self.usageForTenantSQL
            var bindings: [(any SQLiteBindable)?] = [fromMs, toMs]
            if let tenant { bindings.append(tenant) }
            var totals: [UsageTotal] = []
            try connection.query(sql, bindings: bindings) { row in
                totals.append(
                    UsageTotal(
                        tenant: row.string(0) ?? "", upstream: row.string(1) ?? "",
                        taskClass: TaskClass(storageCode: row.int(2)) ?? .interactive,
                        counters: MinuteCounters(row: row, from: 3)))
            }
            return totals
        }
    }

    /// The per-minute rollup rows with minutes in `[fromMs, toMs)`, in minute order (then upstream,
    /// task class): tenant history, and a warm start for the loop after a restart.
    ///
    /// - Parameter tenant: Only this tenant (a prefix range of the rollups' primary key); nil for all.
    public nonisolated func rollups(fromMs: Int64, toMs: Int64, tenant: String? = nil) async throws
        -> [MinuteRollup]
    {
        try? await flushRollups()  // exact when the database can be written; one flush interval stale at worst
        return try await pool.read { connection in
            let sql = tenant == nil ? Self.rollupsSQL : Self.rollupsForTenantSQL
            var bindings: [(any SQLiteBindable)?] = [fromMs, toMs]
            if let tenant { bindings.append(tenant) }
            var rows: [MinuteRollup] = []
            try connection.query(sql, bindings: bindings) { row in
                rows.append(
                    MinuteRollup(
                        tenant: row.string(0) ?? "", upstream: row.string(1) ?? "",
                        taskClass: TaskClass(storageCode: row.int(2)) ?? .interactive, minuteMs: row.int64(3),
                        counters: MinuteCounters(row: row, from: 4)))
            }
            return rows
        }
    }

    // MARK: SQL

    /// The largest event id, nil when the table is empty (the rowid's B-tree: one lookup).
    static func newestID(_ connection: SQLiteConnection) throws -> Int64? {
        try connection.queryOne("SELECT max(id) FROM events") { $0.optionalInt64(0) } ?? nil
    }

    static let selectEventsSQL =
        "SELECT id, \(TelemetryWriter.eventColumns.joined(separator: ", ")) FROM events WHERE id > ? ORDER BY id LIMIT ?"

    /// Column 0 is `id`, then `TelemetryWriter.eventColumns` in order.
    static func storedEvent(_ row: SQLiteRow) -> StoredEvent {
        func optionalInt(_ index: Int) -> Int? { row.optionalInt64(index).map { Int(truncatingIfNeeded: $0) } }
        let signals = EventSignals(
            family: row.optionalInt64(17).flatMap { HeaderFamily(storageCode: Int($0)) },
            limitRequests: row.optionalInt64(18), remainingRequests: row.optionalInt64(19),
            resetRequestsMs: row.optionalInt64(20), windowRequestsMs: row.optionalInt64(21),
            limitTokens: row.optionalInt64(22), remainingTokens: row.optionalInt64(23),
            resetTokensMs: row.optionalInt64(24), windowTokensMs: row.optionalInt64(25),
            limitInputTokens: row.optionalInt64(26), remainingInputTokens: row.optionalInt64(27),
            limitOutputTokens: row.optionalInt64(28), remainingOutputTokens: row.optionalInt64(29),
            retryAfterMs: row.optionalInt64(30), utilization: row.optionalDouble(31))
        return StoredEvent(
            id: row.int64(0), timestampMs: row.int64(1), tenant: row.int64(2), upstream: row.int64(3),
            gateway: row.int64(4), outcome: Outcome(storageCode: row.int(5)) ?? .serverError,
            taskClass: TaskClass(storageCode: row.int(6)) ?? .interactive, status: optionalInt(7),
            latencyMs: row.optionalDouble(8), queueMs: row.optionalDouble(9), promptTokens: row.optionalInt64(10),
            completionTokens: row.optionalInt64(11), estimatedTokens: row.optionalInt64(12), retry: optionalInt(13),
            taskID: row.string(14), modelVersion: row.optionalInt64(15), errorType: row.string(16), signals: signals,
            unparseableHeaders: row.int(32))
    }

    /// `sum(…)` of every counter column, `max(…)` of the maxima, in `rollupCounterColumns` order.
    private static let aggregatedCounters = TelemetryWriter.rollupCounterColumns.map { column in
        column.hasSuffix("_max_ms")
            ? "max(r.\(column))" : "sum(\(TelemetryWriter.rollupReadExpression(column, table: "r.")))"
    }.joined(separator: ", ")

    private static let plainCounters = TelemetryWriter.rollupCounterColumns.map {
        TelemetryWriter.rollupReadExpression($0, table: "r.")
    }.joined(separator: ", ")

    private static let rollupJoin =
        "FROM rollups_minute r JOIN tenants t ON t.ref = r.tenant_ref JOIN upstreams u ON u.ref = r.upstream_ref "

    static let usageSQL =
        "SELECT t.id, u.id, r.task_class, \(aggregatedCounters) \(rollupJoin)"
        + "WHERE r.minute_ms >= ?1 AND r.minute_ms < ?2 "
        + "GROUP BY r.tenant_ref, r.upstream_ref, r.task_class ORDER BY t.id, u.id, r.task_class"

    static let usageForTenantSQL =
        "SELECT t.id, u.id, r.task_class, \(aggregatedCounters) \(rollupJoin)"
        + "WHERE t.id = ?3 AND r.minute_ms >= ?1 AND r.minute_ms < ?2 "
        + "GROUP BY r.tenant_ref, r.upstream_ref, r.task_class ORDER BY t.id, u.id, r.task_class"

    static let rollupsSQL =
        "SELECT t.id, u.id, r.task_class, r.minute_ms, \(plainCounters) \(rollupJoin)"
        + "WHERE r.minute_ms >= ?1 AND r.minute_ms < ?2 ORDER BY r.minute_ms, t.id, u.id, r.task_class"

    static let rollupsForTenantSQL =
        "SELECT t.id, u.id, r.task_class, r.minute_ms, \(plainCounters) \(rollupJoin)"
        + "WHERE t.id = ?3 AND r.minute_ms >= ?1 AND r.minute_ms < ?2 ORDER BY r.minute_ms, u.id, r.task_class"
}

extension MinuteCounters {
    /// Reads the counters from `row`, starting at column `first`, in `rollupCounterColumns` order.
    init(row: SQLiteRow, from first: Int) {
        self.init()
        var index = first
        func next() -> Int64 {
            defer { index += 1 }
            return row.int64(index)
        }
        func nextDouble() -> Double {
            defer { index += 1 }
            return row.double(index)
        }
        requests = next()
        ok = next()
        quotaExhausted = next()
        spendCap = next()
        overloaded = next()
        serverError = next()
        timeout = next()
        deniedLocal = next()
        queued = next()
        retries = next()
        promptTokens = next()
        completionTokens = next()
        estimatedTokens = next()
        latencyCount = next()
        latencySumMs = nextDouble()
        latencyMaxMs = nextDouble()
        queueCount = next()
        queueSumMs = nextDouble()
        queueMaxMs = nextDouble()
        latencyBuckets = (0..<8).map { _ in next() }
        servedPromptTokens = next()
        servedCompletionTokens = next()
    }
}
