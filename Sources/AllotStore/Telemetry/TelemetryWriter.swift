import AllotSQLite

/// Interned names → refs, as far as the store has seen them committed.
struct NameCache: Sendable {
    var tenants: [String: Int64] = [:]
    var upstreams: [String: Int64] = [:]
    var gateways: [String: Int64] = [:]
    var models: [String: Int64] = [:]

    mutating func merge(_ other: NameCache) {
        tenants.merge(other.tenants) { _, new in new }
        upstreams.merge(other.upstreams) { _, new in new }
        gateways.merge(other.gateways) { _, new in new }
        models.merge(other.models) { _, new in new }
    }
}

/// Row ids of one stored batch.
struct StoredRows: Sendable {
    var count: Int
    var firstID: Int64
    var lastID: Int64
    var registeredTenants: [String]
}

/// The SQL of the telemetry write path, run inside one transaction on the writer connection.
///
/// Everything is done with cached prepared statements bound per row: no SQL text is built per
/// event, and the insert statement is the bulk-insert fast path SQLite documents.
enum TelemetryWriter {
    /// What a group transaction produced: one ``StoredRows`` per batch, in order, and the names
    /// it interned (to be added to the cache only once the transaction has committed).
    struct GroupResult: Sendable {
        var batches: [StoredRows]
        var learned: NameCache
    }

    /// Writes `batches` on `connection`, which must be inside a write transaction.
    static func write(_ batches: [PreparedBatch], cache: NameCache, connection: SQLiteConnection) throws
        -> GroupResult
    {
        var interner = Interner(cache: cache, connection: connection)
        var results: [StoredRows] = []
        results.reserveCapacity(batches.count)
        for batch in batches {
            results.append(try write(batch, interner: &interner, connection: connection))
        }
        return GroupResult(batches: results, learned: interner.learned)
    }

    private static func write(_ batch: PreparedBatch, interner: inout Interner, connection: SQLiteConnection) throws
        -> StoredRows
    {
        var registered: [String] = []
        var tenantRefs: [String: Int64] = [:]
        for (name, seen) in batch.tenants {
            let (ref, isNew) = try interner.tenant(name, tier: batch.defaultTier, seen: seen)
            tenantRefs[name] = ref
            if isNew { registered.append(name) }
        }
        var upstreamRefs: [String: Int64] = [:]
        for (name, seen) in batch.upstreams {
            upstreamRefs[name] = try interner.upstream(name, seen: seen)
        }
        var gatewayRefs: [String: Int64] = [:]
        for name in batch.gateways {
            gatewayRefs[name] = try interner.gateway(name, receivedMs: batch.receivedMs)
        }
        var modelRefs: [String: Int64] = [:]
        for (name, firstSeen) in batch.models {
            modelRefs[name] = try interner.model(name, firstSeenMs: firstSeen)
        }

        let insert = try connection.cachedStatement(insertEventSQL)
        var firstID: Int64 = 0
        for (position, event) in batch.events.enumerated() {
            try bind(
                event, to: insert, tenant: tenantRefs[event.tenant]!, upstream: upstreamRefs[event.upstream]!,
                gateway: gatewayRefs[event.gateway]!, model: event.modelVersion.flatMap { modelRefs[$0] })
            try insert.step()
            insert.reset()
            if position == 0 { firstID = connection.lastInsertRowID }
        }
        let lastID = connection.lastInsertRowID

        let upsert = try connection.cachedStatement(upsertRollupSQL)
        for (key, counters) in batch.rollups {
            try bind(
                counters, to: upsert, tenant: tenantRefs[key.tenant]!, upstream: upstreamRefs[key.upstream]!,
                taskClass: key.taskClass, minuteMs: key.minuteMs)
            try upsert.step()
            upsert.reset()
        }
        return StoredRows(
            count: batch.events.count, firstID: firstID, lastID: lastID, registeredTenants: registered.sorted())
    }

    // MARK: Events

    static let eventColumns = [
        "ts_ms", "tenant_ref", "upstream_ref", "gateway_ref", "outcome", "task_class", "status", "latency_ms",
        "queue_ms", "prompt_tokens", "completion_tokens", "estimated_tokens", "retry", "task_id", "model_ref",
        "error_type", "header_family", "limit_requests", "remaining_requests", "reset_requests_ms",
        "window_requests_ms", "limit_tokens", "remaining_tokens", "reset_tokens_ms", "window_tokens_ms",
        "limit_input_tokens", "remaining_input_tokens", "limit_output_tokens", "remaining_output_tokens",
        "retry_after_ms", "utilization", "unparseable_headers",
    ]

    static let insertEventSQL =
        "INSERT INTO events (\(eventColumns.joined(separator: ", "))) VALUES ("
        + Array(repeating: "?", count: eventColumns.count).joined(separator: ", ") + ")"

    @inline(__always)
    private static func bind(
        _ event: TelemetryEvent, to statement: SQLiteStatement, tenant: Int64, upstream: Int64, gateway: Int64,
        model: Int64?
    ) throws(SQLiteError) {
        let signals = event.signals
        try statement.bind(event.timestampMs, at: 1)
        try statement.bind(tenant, at: 2)
        try statement.bind(upstream, at: 3)
        try statement.bind(gateway, at: 4)
        try statement.bind(Int64(event.outcome.storageCode), at: 5)
        try statement.bind(Int64(event.taskClass.storageCode), at: 6)
        try bindOptional(event.status.map(Int64.init), statement, 7)
        try bindOptional(event.latencyMs, statement, 8)
        try bindOptional(event.queueMs, statement, 9)
        try bindOptional(event.promptTokens, statement, 10)
        try bindOptional(event.completionTokens, statement, 11)
        try bindOptional(event.estimatedTokens, statement, 12)
        try bindOptional(event.retry.map(Int64.init), statement, 13)
        try bindOptional(event.taskID, statement, 14)
        try bindOptional(model, statement, 15)
        try bindOptional(event.errorType, statement, 16)
        try bindOptional(signals.family.map { Int64($0.storageCode) }, statement, 17)
        try bindOptional(signals.limitRequests, statement, 18)
        try bindOptional(signals.remainingRequests, statement, 19)
        try bindOptional(signals.resetRequestsMs, statement, 20)
        try bindOptional(signals.windowRequestsMs, statement, 21)
        try bindOptional(signals.limitTokens, statement, 22)
        try bindOptional(signals.remainingTokens, statement, 23)
        try bindOptional(signals.resetTokensMs, statement, 24)
        try bindOptional(signals.windowTokensMs, statement, 25)
        try bindOptional(signals.limitInputTokens, statement, 26)
        try bindOptional(signals.remainingInputTokens, statement, 27)
        try bindOptional(signals.limitOutputTokens, statement, 28)
        try bindOptional(signals.remainingOutputTokens, statement, 29)
        try bindOptional(signals.retryAfterMs, statement, 30)
        try bindOptional(signals.utilization, statement, 31)
        try statement.bind(Int64(event.unparseableHeaders), at: 32)
    }

    @inline(__always)
    static func bindOptional(_ value: Int64?, _ statement: SQLiteStatement, _ index: Int) throws(SQLiteError) {
        if let value { try statement.bind(value, at: index) } else { try statement.bindNull(at: index) }
    }

    @inline(__always)
    static func bindOptional(_ value: Double?, _ statement: SQLiteStatement, _ index: Int) throws(SQLiteError) {
        if let value { try statement.bind(value, at: index) } else { try statement.bindNull(at: index) }
    }

    @inline(__always)
    static func bindOptional(_ value: String?, _ statement: SQLiteStatement, _ index: Int) throws(SQLiteError) {
        if let value { try statement.bind(value, at: index) } else { try statement.bindNull(at: index) }
    }

    // MARK: Rollups

    static let rollupCounterColumns = [
        "requests", "ok", "quota_exhausted", "spend_cap", "overloaded", "server_error", "timeout", "denied_local",
        "queued", "retries", "prompt_tokens", "completion_tokens", "estimated_tokens", "latency_count",
        "latency_sum_ms", "latency_max_ms", "queue_count", "queue_sum_ms", "queue_max_ms", "latency_le_250ms",
        "latency_le_500ms", "latency_le_1s", "latency_le_2500ms", "latency_le_5s", "latency_le_10s",
        "latency_le_30s", "latency_gt_30s",
    ]

    /// Inserts a minute's row or adds to it: sums add, maxima take the larger.
    static let upsertRollupSQL: String = {
        let keys = ["tenant_ref", "minute_ms", "upstream_ref", "task_class"]
        let columns = keys + rollupCounterColumns
        let updates = rollupCounterColumns.map { column in
            column.hasSuffix("_max_ms") ? "\(column) = max(\(column), excluded.\(column))" : "\(column) = \(column) + excluded.\(column)"
        }
        return "INSERT INTO rollups_minute (\(columns.joined(separator: ", "))) VALUES ("
            + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ") "
            + "ON CONFLICT (tenant_ref, minute_ms, upstream_ref, task_class) DO UPDATE SET "
            + updates.joined(separator: ", ")
    }()

    private static func bind(
        _ counters: MinuteCounters, to statement: SQLiteStatement, tenant: Int64, upstream: Int64,
        taskClass: TaskClass, minuteMs: Int64
    ) throws(SQLiteError) {
        try statement.bind(tenant, at: 1)
        try statement.bind(minuteMs, at: 2)
        try statement.bind(upstream, at: 3)
        try statement.bind(Int64(taskClass.storageCode), at: 4)
        let integers: [Int64] = [
            counters.requests, counters.ok, counters.quotaExhausted, counters.spendCap, counters.overloaded,
            counters.serverError, counters.timeout, counters.deniedLocal, counters.queued, counters.retries,
            counters.promptTokens, counters.completionTokens, counters.estimatedTokens, counters.latencyCount,
        ]
        var index = 5
        for value in integers {
            try statement.bind(value, at: index)
            index += 1
        }
        try statement.bind(counters.latencySumMs, at: index)
        try statement.bind(counters.latencyMaxMs, at: index + 1)
        try statement.bind(counters.queueCount, at: index + 2)
        try statement.bind(counters.queueSumMs, at: index + 3)
        try statement.bind(counters.queueMaxMs, at: index + 4)
        index += 5
        for value in counters.latencyBuckets {
            try statement.bind(value, at: index)
            index += 1
        }
    }
}

/// Looks names up in the cache, then in the database, and registers the missing ones, remembering
/// what it learnt so that the store can cache it after commit (never before: a rolled-back
/// transaction must not leave refs in the cache that the database does not have).
private struct Interner {
    let cache: NameCache
    let connection: SQLiteConnection
    var learned = NameCache()

    init(cache: NameCache, connection: SQLiteConnection) {
        self.cache = cache
        self.connection = connection
    }

    /// The tenant's ref and whether it was registered just now (with `tier`).
    mutating func tenant(_ name: String, tier: String, seen: PreparedBatch.SeenRange) throws -> (Int64, Bool) {
        if let ref = cache.tenants[name] ?? learned.tenants[name] {
            try connection.run(
                "UPDATE tenants SET first_seen_ms = min(first_seen_ms, ?1), last_seen_ms = max(last_seen_ms, ?2) "
                    + "WHERE ref = ?3", seen.first, seen.last, ref)
            return (ref, false)
        }
        if let ref = try connection.queryOne("SELECT ref FROM tenants WHERE id = ?", name, map: { $0.int64(0) }) {
            learned.tenants[name] = ref
            return (try tenant(name, tier: tier, seen: seen).0, false)
        }
        try connection.run(
            "INSERT INTO tenants (id, tier, first_seen_ms, last_seen_ms) VALUES (?, ?, ?, ?)", name, tier, seen.first,
            seen.last)
        let ref = connection.lastInsertRowID
        learned.tenants[name] = ref
        return (ref, true)
    }

    mutating func upstream(_ name: String, seen: PreparedBatch.SeenRange) throws -> Int64 {
        if let ref = cache.upstreams[name] ?? learned.upstreams[name] {
            try connection.run(
                "UPDATE upstreams SET first_seen_ms = min(first_seen_ms, ?1), last_seen_ms = max(last_seen_ms, ?2) "
                    + "WHERE ref = ?3", seen.first, seen.last, ref)
            return ref
        }
        if let ref = try connection.queryOne("SELECT ref FROM upstreams WHERE id = ?", name, map: { $0.int64(0) }) {
            learned.upstreams[name] = ref
            return try upstream(name, seen: seen)
        }
        try connection.run(
            "INSERT INTO upstreams (id, first_seen_ms, last_seen_ms) VALUES (?, ?, ?)", name, seen.first, seen.last)
        let ref = connection.lastInsertRowID
        learned.upstreams[name] = ref
        return ref
    }

    mutating func gateway(_ name: String, receivedMs: Int64) throws -> Int64 {
        if let ref = cache.gateways[name] ?? learned.gateways[name] {
            try connection.run("UPDATE gateways SET last_seen_ms = max(last_seen_ms, ?1) WHERE ref = ?2", receivedMs, ref)
            return ref
        }
        if let ref = try connection.queryOne("SELECT ref FROM gateways WHERE id = ?", name, map: { $0.int64(0) }) {
            learned.gateways[name] = ref
            return try gateway(name, receivedMs: receivedMs)
        }
        try connection.run(
            "INSERT INTO gateways (id, first_seen_ms, last_seen_ms) VALUES (?, ?, ?)", name, receivedMs, receivedMs)
        let ref = connection.lastInsertRowID
        learned.gateways[name] = ref
        return ref
    }

    mutating func model(_ name: String, firstSeenMs: Int64) throws -> Int64 {
        if let ref = cache.models[name] ?? learned.models[name] { return ref }
        if let ref = try connection.queryOne("SELECT ref FROM model_versions WHERE id = ?", name, map: { $0.int64(0) }) {
            learned.models[name] = ref
            return ref
        }
        try connection.run("INSERT INTO model_versions (id, first_seen_ms) VALUES (?, ?)", name, firstSeenMs)
        let ref = connection.lastInsertRowID
        learned.models[name] = ref
        return ref
    }
}
