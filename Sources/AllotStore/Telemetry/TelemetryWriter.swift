import AllotSQLite

/// Interned names → refs, as far as the store has seen them committed, with the first/last-seen
/// times last written for them.
struct NameCache: Sendable {
    struct Entry: Sendable, Equatable {
        var ref: Int64
        /// The `first_seen_ms` / `last_seen_ms` the row is known to hold (at least this recent).
        var firstSeen: Int64
        var lastSeen: Int64
    }

    var tenants: [String: Entry] = [:]
    var upstreams: [String: Entry] = [:]
    var gateways: [String: Entry] = [:]
    var models: [String: Int64] = [:]

    mutating func merge(_ other: NameCache) {
        tenants.merge(other.tenants) { _, new in new }
        upstreams.merge(other.upstreams) { _, new in new }
        gateways.merge(other.gateways) { _, new in new }
        models.merge(other.models) { _, new in new }
    }
}

/// Row ids of one stored batch, and the refs of its local names (to key its rollup rows).
struct StoredRows: Sendable {
    var count: Int
    var firstID: Int64
    var lastID: Int64
    var registeredTenants: [String]
    /// The ref of each of the batch's tenants and upstreams, by local index.
    var tenantRefs: [Int64]
    var upstreamRefs: [Int64]
}

/// The SQL of the telemetry write path, run inside one transaction on the writer connection.
///
/// Everything is done with cached prepared statements bound per row: no SQL text is built per
/// event, and the insert statement is the bulk-insert fast path SQLite documents.
enum TelemetryWriter {
    /// How stale `last_seen_ms` of a tenant, upstream or gateway may get, in ms. Updating every
    /// name's row in every batch would cost about as much as inserting the events (a batch of 1,000
    /// events from 1,000 tenants touches ~600 tenants), so a row is only rewritten when its time
    /// moved by more than this, or when an earlier `first_seen` arrives.
    static let lastSeenResolutionMs: Int64 = 1_000

    /// What one group transaction is asked to do.
    struct GroupWork: Sendable {
        var batches: [PreparedBatch]
        /// Rebuild the rollups of events above the progress mark first (after a restart).
        var recover: Bool
        /// Pending rollup rows to write, covering events up to ``flushThrough``; nil: no flush.
        var flush: [RollupRowKey: MinuteCounters]?
        var flushThrough: Int64
    }

    /// What became of one batch of a group.
    enum BatchOutcome: Sendable {
        case stored(StoredRows)
        /// Its ``TelemetryBatchKey`` had stored the same body before: that attempt's count and ids.
        case duplicate(stored: Int, firstID: Int64, lastID: Int64)
        /// Its key had stored a different body: nothing stored.
        case conflict(TelemetryKeyConflict)
    }

    /// What a group transaction produced: one ``BatchOutcome`` per batch, in order, the names it
    /// interned or touched (added to the cache only once the transaction has committed), and the
    /// largest event id once it is done.
    struct GroupResult: Sendable {
        var batches: [BatchOutcome]
        var learned: NameCache
        var lastEventID: Int64
    }

    /// Does `work` on `connection`, which must be inside a write transaction.
    static func write(_ work: GroupWork, cache: NameCache, connection: SQLiteConnection) throws -> GroupResult {
        if work.recover {
            // Before a store's first transaction nothing is pending: this counts what a previous
            // run left uncounted and moves the mark to the last event.
            try recoverRollups(connection)
        } else if let flush = work.flush {
            try writeRollups(flush, through: work.flushThrough, connection: connection)
        }
        var interner = Interner(cache: cache, connection: connection)
        var results: [BatchOutcome] = []
        results.reserveCapacity(work.batches.count)
        var lastStored: Int64?
        for batch in work.batches {
            // A key's row is written with its batch, so a second batch of the same key in this group finds it.
            if let key = batch.key, let outcome = try keyedOutcome(key, connection: connection) {
                results.append(outcome)
                continue
            }
            let rows = try write(batch, interner: &interner, connection: connection)
            if let key = batch.key {
                try connection.run(
                    insertKeySQL, key.key, key.bodySHA256, Int64(rows.count), rows.firstID, rows.lastID,
                    batch.receivedMs)
            }
            results.append(.stored(rows))
            lastStored = rows.lastID
        }
        let lastID: Int64
        if let lastStored {
            lastID = lastStored
        } else {
            lastID = try connection.queryOne("SELECT coalesce(max(id), 0) FROM events") { $0.int64(0) } ?? 0
        }
        return GroupResult(batches: results, learned: interner.learned, lastEventID: lastID)
    }

    /// What a batch with `key` amounts to when the key was used before: a duplicate of the same body, or a
    /// conflict; nil for a new key.
    private static func keyedOutcome(_ key: TelemetryBatchKey, connection: SQLiteConnection) throws -> BatchOutcome? {
        var outcome: BatchOutcome?
        try connection.query(selectKeySQL, key.key) { row in
            let stored = row.int(1)
            if row.string(0) == key.bodySHA256 {
                outcome = .duplicate(stored: stored, firstID: row.int64(2), lastID: row.int64(3))
            } else {
                outcome = .conflict(TelemetryKeyConflict(key: key.key, committedMs: row.int64(4), stored: stored))
            }
        }
        return outcome
    }

    static let selectKeySQL =
        "SELECT body_sha256, stored, first_id, last_id, committed_ms FROM telemetry_batch_keys WHERE key = ?"

    static let insertKeySQL = """
        INSERT INTO telemetry_batch_keys (key, body_sha256, stored, first_id, last_id, committed_ms)
        VALUES (?, ?, ?, ?, ?, ?)
        """

    private static func write(_ batch: PreparedBatch, interner: inout Interner, connection: SQLiteConnection) throws
        -> StoredRows
    {
        var registered: [String] = []
        var tenantRefs: [Int64] = []
        tenantRefs.reserveCapacity(batch.tenants.count)
        for (name, seen) in batch.tenants {
            let (ref, isNew) = try interner.tenant(name, tier: batch.defaultTier, seen: seen)
            tenantRefs.append(ref)
            if isNew { registered.append(name) }
        }
        let upstreamRefs = try batch.upstreams.map { try interner.upstream($0.name, seen: $0.seen) }
        let gatewayRefs = try batch.gateways.map { try interner.gateway($0, receivedMs: batch.receivedMs) }
        let modelRefs = try batch.models.map { try interner.model($0.name, firstSeenMs: $0.firstSeen) }

        let refs = EventRefs(
            batch: batch, tenants: tenantRefs, upstreams: upstreamRefs, gateways: gatewayRefs, models: modelRefs)
        let (firstID, lastID) = try insertEvents(batch.events, refs: refs, connection: connection)
        try EventBlocks.record(batch.events, firstID: firstID, connection: connection)
        return StoredRows(
            count: batch.events.count, firstID: firstID, lastID: lastID, registeredTenants: registered.sorted(),
            tenantRefs: tenantRefs, upstreamRefs: upstreamRefs)
    }

    /// The refs of each event's names.
    private struct EventRefs {
        let batch: PreparedBatch
        let tenants: [Int64]
        let upstreams: [Int64]
        let gateways: [Int64]
        let models: [Int64]

        @inline(__always)
        func bind(_ position: Int, to statement: SQLiteStatement, offset: Int) throws(SQLiteError) {
            let model = batch.eventModel[position]
            try TelemetryWriter.bind(
                batch.events[position], to: statement, offset: offset,
                tenant: tenants[Int(batch.eventTenant[position])],
                upstream: upstreams[Int(batch.eventUpstream[position])],
                gateway: gateways[Int(batch.eventGateway[position])], model: model < 0 ? nil : models[Int(model)])
        }
    }

    /// Inserts the events in order, ``rowsPerInsert`` per statement while that many are left, then one
    /// at a time; returns the first and last id. The ids are consecutive: SQLite gives every new row
    /// `max(id) + 1`, and this connection is the only writer.
    private static func insertEvents(_ events: [TelemetryEvent], refs: EventRefs, connection: SQLiteConnection)
        throws -> (first: Int64, last: Int64)
    {
        let columns = eventColumns.count
        var position = 0
        var firstID: Int64?
        if events.count >= rowsPerInsert {
            let insert = try connection.cachedStatement(insertEventsSQL)
            while position + rowsPerInsert <= events.count {
                insert.clearBindings()
                for row in 0..<rowsPerInsert { try refs.bind(position + row, to: insert, offset: row * columns) }
                try insert.step()
                insert.reset()
                if firstID == nil { firstID = connection.lastInsertRowID - Int64(rowsPerInsert - 1) }
                position += rowsPerInsert
            }
        }
        if position < events.count {
            let insert = try connection.cachedStatement(insertEventSQL)
            while position < events.count {
                insert.clearBindings()
                try refs.bind(position, to: insert, offset: 0)
                try insert.step()
                insert.reset()
                if firstID == nil { firstID = connection.lastInsertRowID }
                position += 1
            }
        }
        let first = firstID ?? 0
        let last = connection.lastInsertRowID
        guard last - first + 1 == Int64(events.count) else {
            // Only possible once ids reach Int64.max, when SQLite picks free ids at random.
            throw TelemetryStoreError(message: "event ids are no longer consecutive (last id \(last))")
        }
        return (first, last)
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

    /// Rows per multi-row INSERT. One statement inserting 32 rows costs less SQLite CPU per row than
    /// 32 runs of the one-row statement (one statement start, one statement journal and one reset
    /// for all of them); 32 × 32 parameters stays far below SQLite's limit of 32,766.
    static let rowsPerInsert = 32

    private static let eventTuple = "(" + Array(repeating: "?", count: eventColumns.count).joined(separator: ", ") + ")"

    static let insertEventSQL = "INSERT INTO events (\(eventColumns.joined(separator: ", "))) VALUES \(eventTuple)"

    /// ``insertEventSQL`` with ``rowsPerInsert`` rows.
    static let insertEventsSQL =
        "INSERT INTO events (\(eventColumns.joined(separator: ", "))) VALUES "
        + Array(repeating: eventTuple, count: rowsPerInsert).joined(separator: ", ")

    /// Binds `event` to the row at parameter `offset + 1…` of an insert statement. Only present values
    /// are bound: the statement's parameters must have been cleared (``AllotSQLite/SQLiteStatement/clearBindings()``)
    /// since it last ran, so that absent ones are NULL.
    @inline(__always)
    static func bind(
        _ event: TelemetryEvent, to statement: SQLiteStatement, offset: Int = 0, tenant: Int64, upstream: Int64,
        gateway: Int64,
        model: Int64?
    ) throws(SQLiteError) {
        let signals = event.signals
        try statement.bind(event.timestampMs, at: offset + 1)
        try statement.bind(tenant, at: offset + 2)
        try statement.bind(upstream, at: offset + 3)
        try statement.bind(gateway, at: offset + 4)
        try statement.bind(Int64(event.outcome.storageCode), at: offset + 5)
        try statement.bind(Int64(event.taskClass.storageCode), at: offset + 6)
        try bindOptional(event.status.map(Int64.init), statement, offset + 7)
        try bindOptional(event.latencyMs, statement, offset + 8)
        try bindOptional(event.queueMs, statement, offset + 9)
        try bindOptional(event.promptTokens, statement, offset + 10)
        try bindOptional(event.completionTokens, statement, offset + 11)
        try bindOptional(event.estimatedTokens, statement, offset + 12)
        try bindOptional(event.retry.map(Int64.init), statement, offset + 13)
        try bindOptional(event.taskID, statement, offset + 14)
        try bindOptional(model, statement, offset + 15)
        try bindOptional(event.errorType, statement, offset + 16)
        try bindOptional(signals.family.map { Int64($0.storageCode) }, statement, offset + 17)
        try bindOptional(signals.limitRequests, statement, offset + 18)
        try bindOptional(signals.remainingRequests, statement, offset + 19)
        try bindOptional(signals.resetRequestsMs, statement, offset + 20)
        try bindOptional(signals.windowRequestsMs, statement, offset + 21)
        try bindOptional(signals.limitTokens, statement, offset + 22)
        try bindOptional(signals.remainingTokens, statement, offset + 23)
        try bindOptional(signals.resetTokensMs, statement, offset + 24)
        try bindOptional(signals.windowTokensMs, statement, offset + 25)
        try bindOptional(signals.limitInputTokens, statement, offset + 26)
        try bindOptional(signals.remainingInputTokens, statement, offset + 27)
        try bindOptional(signals.limitOutputTokens, statement, offset + 28)
        try bindOptional(signals.remainingOutputTokens, statement, offset + 29)
        try bindOptional(signals.retryAfterMs, statement, offset + 30)
        try bindOptional(signals.utilization, statement, offset + 31)
        try statement.bind(Int64(event.unparseableHeaders), at: offset + 32)
    }

    // Absent values are not bound: they stay NULL from `clearBindings()`, which the caller runs once per
    // statement execution. Half of a typical row is NULL, and one `sqlite3_clear_bindings` costs less
    // than those `sqlite3_bind_null` calls.

    @inline(__always)
    static func bindOptional(_ value: Int64?, _ statement: SQLiteStatement, _ index: Int) throws(SQLiteError) {
        if let value { try statement.bind(value, at: index) }
    }

    @inline(__always)
    static func bindOptional(_ value: Double?, _ statement: SQLiteStatement, _ index: Int) throws(SQLiteError) {
        if let value { try statement.bind(value, at: index) }
    }

    @inline(__always)
    static func bindOptional(_ value: String?, _ statement: SQLiteStatement, _ index: Int) throws(SQLiteError) {
        if let value { try statement.bind(value, at: index) }
    }

    // MARK: Rollups

    static let rollupCounterColumns = [
        "requests", "ok", "quota_exhausted", "spend_cap", "overloaded", "server_error", "timeout", "denied_local",
        "queued", "retries", "prompt_tokens", "completion_tokens", "estimated_tokens", "latency_count",
        "latency_sum_ms", "latency_max_ms", "queue_count", "queue_sum_ms", "queue_max_ms", "latency_le_250ms",
        "latency_le_500ms", "latency_le_1s", "latency_le_2500ms", "latency_le_5s", "latency_le_10s",
        "latency_le_30s", "latency_gt_30s", "served_prompt_tokens", "served_completion_tokens",
    ]

    /// The columns of every attempt's tokens that a served-token column (migration 0008) stands beside.
    static let servedTokenColumns = [
        "served_prompt_tokens": "prompt_tokens", "served_completion_tokens": "completion_tokens",
    ]

    /// How a rollup column is read: the column itself, except a served-token column of a row written before
    /// migration 0008 (NULL), which reads as every attempt's tokens where the minute had a served call, else 0.
    /// `table`: the table's alias and a dot (`"r."`), or "" inside an upsert's `SET`, where names are the old row's.
    static func rollupReadExpression(_ column: String, table: String) -> String {
        guard let all = servedTokenColumns[column] else { return table + column }
        return "coalesce(\(table)\(column), CASE WHEN \(table)ok = 0 THEN 0 ELSE \(table)\(all) END)"
    }

    /// `SET` list of the rollup upserts: sums add, maxima take the larger (a served-token column of a row written
    /// before migration 0008 adds to its reading, ``rollupReadExpression(_:table:)``).
    static let upsertAssignments = rollupCounterColumns.map { column in
        column.hasSuffix("_max_ms")
            ? "\(column) = max(\(column), excluded.\(column))"
            : "\(column) = \(rollupReadExpression(column, table: "")) + excluded.\(column)"
    }.joined(separator: ", ")

    /// Inserts a minute's row or adds to it.
    static let upsertRollupSQL: String = {
        let keys = ["tenant_ref", "minute_ms", "upstream_ref", "task_class"]
        let columns = keys + rollupCounterColumns
        return "INSERT INTO rollups_minute (\(columns.joined(separator: ", "))) VALUES ("
            + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ") "
            + "ON CONFLICT (tenant_ref, minute_ms, upstream_ref, task_class) DO UPDATE SET " + upsertAssignments
    }()

    /// Writes pending rollup rows and moves the progress mark to `through`: every event with
    /// `id <= through` is then counted in `rollups_minute`, none above it.
    static func writeRollups(
        _ rows: [RollupRowKey: MinuteCounters], through: Int64, connection: SQLiteConnection
    ) throws {
        let upsert = try connection.cachedStatement(upsertRollupSQL)
        for (key, counters) in rows {
            try bind(counters, to: upsert, key: key)
            try upsert.step()
            upsert.reset()
        }
        try connection.run("UPDATE rollup_progress SET last_event_id = ? WHERE singleton = 1", through)
    }

    /// Counts the events above the progress mark into the rollups, in SQL: what the store had
    /// aggregated in memory but not yet written when the process stopped. Same rules as
    /// ``MinuteCounters/add(_:)``.
    static func recoverRollups(_ connection: SQLiteConnection) throws {
        try connection.run(recoverRollupsSQL)
        try connection.run(
            "UPDATE rollup_progress SET last_event_id = (SELECT coalesce(max(id), 0) FROM events) WHERE singleton = 1")
    }

    static let recoverRollupsSQL: String = {
        let keys = ["tenant_ref", "minute_ms", "upstream_ref", "task_class"]
        let columns = keys + rollupCounterColumns
        let counters = [
            "count(*)", "count(CASE WHEN outcome = 0 THEN 1 END)", "count(CASE WHEN outcome = 1 THEN 1 END)",
            "count(CASE WHEN outcome = 2 THEN 1 END)", "count(CASE WHEN outcome = 3 THEN 1 END)",
            "count(CASE WHEN outcome = 4 THEN 1 END)", "count(CASE WHEN outcome = 5 THEN 1 END)",
            "count(CASE WHEN outcome = 6 THEN 1 END)", "count(CASE WHEN outcome = 7 THEN 1 END)",
            "count(CASE WHEN retry > 0 THEN 1 END)", "coalesce(sum(prompt_tokens), 0)",
            "coalesce(sum(completion_tokens), 0)", "coalesce(sum(estimated_tokens), 0)", "count(latency_ms)",
            "coalesce(sum(latency_ms), 0.0)", "coalesce(max(latency_ms), 0.0)", "count(queue_ms)",
            "coalesce(sum(queue_ms), 0.0)", "coalesce(max(queue_ms), 0.0)",
            "count(CASE WHEN latency_ms <= 250 THEN 1 END)",
            "count(CASE WHEN latency_ms > 250 AND latency_ms <= 500 THEN 1 END)",
            "count(CASE WHEN latency_ms > 500 AND latency_ms <= 1000 THEN 1 END)",
            "count(CASE WHEN latency_ms > 1000 AND latency_ms <= 2500 THEN 1 END)",
            "count(CASE WHEN latency_ms > 2500 AND latency_ms <= 5000 THEN 1 END)",
            "count(CASE WHEN latency_ms > 5000 AND latency_ms <= 10000 THEN 1 END)",
            "count(CASE WHEN latency_ms > 10000 AND latency_ms <= 30000 THEN 1 END)",
            "count(CASE WHEN latency_ms > 30000 THEN 1 END)",
            "coalesce(sum(CASE WHEN outcome = 0 THEN prompt_tokens END), 0)",
            "coalesce(sum(CASE WHEN outcome = 0 THEN completion_tokens END), 0)",
        ]
        precondition(counters.count == rollupCounterColumns.count)
        return "INSERT INTO rollups_minute (\(columns.joined(separator: ", "))) "
            + "SELECT tenant_ref, ts_ms - ts_ms % 60000, upstream_ref, task_class, "
            + counters.joined(separator: ", ")
            + " FROM events WHERE id > (SELECT last_event_id FROM rollup_progress WHERE singleton = 1) "
            + "GROUP BY tenant_ref, ts_ms - ts_ms % 60000, upstream_ref, task_class "
            + "ON CONFLICT (tenant_ref, minute_ms, upstream_ref, task_class) DO UPDATE SET "
            + upsertAssignments
    }()

    private static func bind(_ counters: MinuteCounters, to statement: SQLiteStatement, key: RollupRowKey)
        throws(SQLiteError)
    {
        // Bound one by one, in `rollupCounterColumns` order (no arrays: this runs for every rollup row).
        try statement.bind(key.tenant, at: 1)
        try statement.bind(key.minuteMs, at: 2)
        try statement.bind(key.upstream, at: 3)
        try statement.bind(Int64(key.taskClass), at: 4)
        try statement.bind(counters.requests, at: 5)
        try statement.bind(counters.ok, at: 6)
        try statement.bind(counters.quotaExhausted, at: 7)
        try statement.bind(counters.spendCap, at: 8)
        try statement.bind(counters.overloaded, at: 9)
        try statement.bind(counters.serverError, at: 10)
        try statement.bind(counters.timeout, at: 11)
        try statement.bind(counters.deniedLocal, at: 12)
        try statement.bind(counters.queued, at: 13)
        try statement.bind(counters.retries, at: 14)
        try statement.bind(counters.promptTokens, at: 15)
        try statement.bind(counters.completionTokens, at: 16)
        try statement.bind(counters.estimatedTokens, at: 17)
        try statement.bind(counters.latencyCount, at: 18)
        try statement.bind(counters.latencySumMs, at: 19)
        try statement.bind(counters.latencyMaxMs, at: 20)
        try statement.bind(counters.queueCount, at: 21)
        try statement.bind(counters.queueSumMs, at: 22)
        try statement.bind(counters.queueMaxMs, at: 23)
        try counters.forEachLatencyBucket { (offset, value) throws(SQLiteError) in
            try statement.bind(value, at: 24 + offset)
        }
        try statement.bind(counters.servedPromptTokens, at: 32)
        try statement.bind(counters.servedCompletionTokens, at: 33)
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
        if let entry = known(name, learned.tenants, cache.tenants) {
            try remember(touch(entry, seen, table: "tenants"), was: entry, name, in: &learned.tenants)
            return (entry.ref, false)
        }
        if let entry = try lookUp(name, table: "tenants") {
            learned.tenants[name] = try touch(entry, seen, table: "tenants")
            return (entry.ref, false)
        }
        try connection.run(
            "INSERT INTO tenants (id, tier, first_seen_ms, last_seen_ms) VALUES (?, ?, ?, ?)", name, tier, seen.first,
            seen.last)
        let ref = connection.lastInsertRowID
        learned.tenants[name] = NameCache.Entry(ref: ref, firstSeen: seen.first, lastSeen: seen.last)
        return (ref, true)
    }

    mutating func upstream(_ name: String, seen: PreparedBatch.SeenRange) throws -> Int64 {
        if let entry = known(name, learned.upstreams, cache.upstreams) {
            try remember(touch(entry, seen, table: "upstreams"), was: entry, name, in: &learned.upstreams)
            return entry.ref
        }
        if let entry = try lookUp(name, table: "upstreams") {
            learned.upstreams[name] = try touch(entry, seen, table: "upstreams")
            return entry.ref
        }
        try connection.run(
            "INSERT INTO upstreams (id, first_seen_ms, last_seen_ms) VALUES (?, ?, ?)", name, seen.first, seen.last)
        let ref = connection.lastInsertRowID
        learned.upstreams[name] = NameCache.Entry(ref: ref, firstSeen: seen.first, lastSeen: seen.last)
        return ref
    }

    mutating func gateway(_ name: String, receivedMs: Int64) throws -> Int64 {
        let seen = PreparedBatch.SeenRange(first: receivedMs, last: receivedMs)
        if let entry = known(name, learned.gateways, cache.gateways) {
            try remember(touch(entry, seen, table: "gateways"), was: entry, name, in: &learned.gateways)
            return entry.ref
        }
        if let entry = try lookUp(name, table: "gateways") {
            learned.gateways[name] = try touch(entry, seen, table: "gateways")
            return entry.ref
        }
        try connection.run(
            "INSERT INTO gateways (id, first_seen_ms, last_seen_ms) VALUES (?, ?, ?)", name, receivedMs, receivedMs)
        let ref = connection.lastInsertRowID
        learned.gateways[name] = NameCache.Entry(ref: ref, firstSeen: receivedMs, lastSeen: receivedMs)
        return ref
    }

    mutating func model(_ name: String, firstSeenMs: Int64) throws -> Int64 {
        if !learned.models.isEmpty, let ref = learned.models[name] { return ref }
        if let ref = cache.models[name] { return ref }
        if let ref = try connection.queryOne("SELECT ref FROM model_versions WHERE id = ?", name, map: { $0.int64(0) })
        {
            learned.models[name] = ref
            return ref
        }
        try connection.run("INSERT INTO model_versions (id, first_seen_ms) VALUES (?, ?)", name, firstSeenMs)
        let ref = connection.lastInsertRowID
        learned.models[name] = ref
        return ref
    }

    /// The entry for `name` from what this transaction learnt, else from the cache. (`learned` is
    /// usually empty or small: only new and touched names go there.)
    @inline(__always)
    private func known(_ name: String, _ learned: [String: NameCache.Entry], _ cache: [String: NameCache.Entry])
        -> NameCache.Entry?
    {
        if !learned.isEmpty, let entry = learned[name] { return entry }
        return cache[name]
    }

    /// Keeps `entry` for the cache when it differs from what the cache has (`previous`): an unchanged
    /// name costs no dictionary write here nor in the store's merge after commit.
    @inline(__always)
    private func remember(
        _ entry: NameCache.Entry, was previous: NameCache.Entry, _ name: String,
        in learned: inout [String: NameCache.Entry]
    ) {
        if entry != previous { learned[name] = entry }
    }

    private func lookUp(_ name: String, table: StaticString) throws -> NameCache.Entry? {
        try connection.queryOne("SELECT ref, first_seen_ms, last_seen_ms FROM \(table) WHERE id = ?", name) { row in
            NameCache.Entry(ref: row.int64(0), firstSeen: row.int64(1), lastSeen: row.int64(2))
        }
    }

    /// Extends the row's seen range when `seen` falls outside what it holds (beyond the
    /// resolution for `last_seen_ms`); returns what the row now holds at least.
    private func touch(_ entry: NameCache.Entry, _ seen: PreparedBatch.SeenRange, table: StaticString) throws
        -> NameCache.Entry
    {
        guard seen.first < entry.firstSeen || seen.last > entry.lastSeen + TelemetryWriter.lastSeenResolutionMs else {
            return entry
        }
        try connection.run(
            "UPDATE \(table) SET first_seen_ms = min(first_seen_ms, ?1), last_seen_ms = max(last_seen_ms, ?2) "
                + "WHERE ref = ?3", seen.first, seen.last, entry.ref)
        return NameCache.Entry(
            ref: entry.ref, firstSeen: min(entry.firstSeen, seen.first), lastSeen: max(entry.lastSeen, seen.last))
    }
}
