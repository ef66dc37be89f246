import AllotSQLite
import AllotTime

/// The telemetry database: stores validated batches durably and serves them back to the loop
/// (SPEC sections 2 and 3).
///
/// **Writing.** ``ingest(_:defaultTier:now:)`` stores one batch all-or-nothing: it registers unknown
/// tenants (with the tier given, the policy's default), upstreams, gateways and model versions and
/// inserts the events in one transaction, and returns only after COMMIT, so with
/// `synchronous=FULL` (the default of ``AllotSQLite/SQLiteConfiguration``) an acknowledged batch
/// survives a crash or power loss.
///
/// **Group commit.** Batches that arrive while a transaction is committing wait in a queue and
/// are written together in the next transaction (up to ``Configuration/maxBatchesPerTransaction``
/// batches and ``Configuration/maxEventsPerTransaction`` events), each reported separately. Every
/// batch stays all-or-nothing: each was fully validated before it queued, and a group that fails
/// for a reason other than the database itself is retried batch by batch.
///
/// **Rollups.** The per-minute rollups are summed in memory as batches commit and written in the
/// write transaction that follows ``Configuration/rollupFlushInterval`` later (or at once when
/// ``Configuration/maxPendingRollupRows`` is reached, when the queue goes idle for that long, and
/// before every rollup read), together with the `rollup_progress` mark saying which events they
/// include. Upserting them with every batch halves ingest throughput: a batch from 1,000 tenants
/// touches almost one rollup row per event, while a few seconds of traffic touch each row once. The
/// interval trades the cost of those upserts (one costs about three event inserts; with 1,000 tenants
/// at over 100,000 events/s, flushing every second added a fifth to the store's CPU per event, every
/// 5 s a few percent) against the work of a restart after a crash (counting at most about one
/// interval of events) and memory (bounded by ``Configuration/maxPendingRollupRows``). Readers never
/// see the delay: rollup reads flush first.
/// Nothing is lost on a crash: on its first write a store counts the events above the mark into
/// the rollups in SQL (the raw events are kept 24 hours).
///
/// **Reading** (`TelemetryStore+Reading.swift`) runs on the pool's reader connection, in WAL
/// mode, and never waits for ingest.
///
/// An actor because it owns long-lived state: the queue of waiting batches, the rollup rows not
/// yet written, and the cache of interned names (which is only extended after a commit, so it never
/// holds a ref the database does not have). The per-event work happens before a batch enters the
/// actor, on the caller's task.
public actor TelemetryStore {
    /// Tuning of the write path.
    public struct Configuration: Sendable, Equatable {
        /// Most batches written in one transaction; 1 turns group commit off.
        public var maxBatchesPerTransaction: Int
        /// Most events written in one transaction (a group stops growing past this; a single
        /// batch larger than this is still written whole).
        public var maxEventsPerTransaction: Int
        /// Seconds rollup rows are summed in memory before they are written.
        public var rollupFlushInterval: Double
        /// Rollup rows held in memory before they are written regardless of the interval.
        public var maxPendingRollupRows: Int

        /// - Parameters:
        ///   - maxBatchesPerTransaction: Default 16.
        ///   - maxEventsPerTransaction: Default 20,000 (a few tens of milliseconds of writing, so
        ///     a batch never waits long behind a group).
        ///   - rollupFlushInterval: Default 5 s (see the type's documentation).
        ///   - maxPendingRollupRows: Default 50,000.
        public init(
            maxBatchesPerTransaction: Int = 16, maxEventsPerTransaction: Int = 20_000, rollupFlushInterval: Double = 5,
            maxPendingRollupRows: Int = 50_000
        ) {
            self.maxBatchesPerTransaction = max(1, maxBatchesPerTransaction)
            self.maxEventsPerTransaction = max(1, maxEventsPerTransaction)
            self.rollupFlushInterval = max(0, rollupFlushInterval)
            self.maxPendingRollupRows = max(1, maxPendingRollupRows)
        }
    }

    /// The database: ingest writes on its writer, reads use its reader.
    public nonisolated let pool: DatabasePool
    public nonisolated let configuration: Configuration
    /// Times the rollup flush interval (the system clock in service, a manual one in tests).
    public nonisolated let clock: any AllotClock

    private var names = NameCache()
    private var queue: [QueuedBatch] = []
    private var flushWaiters: [CheckedContinuation<Void, any Error>] = []
    private var isDraining = false
    private var statistics = TelemetryCounters()
    /// Rollup rows of committed events with ids in (mark, `committedThrough`], not yet written.
    private var pendingRollups: [RollupRowKey: MinuteCounters] = [:]
    /// When `pendingRollups` became non-empty (``clock`` seconds).
    private var pendingSince: Double?
    /// The largest committed event id this store knows of (valid once `hasRecovered`).
    private var committedThrough: Int64 = 0
    /// False until the first transaction has counted events left above the mark by a previous run.
    private var hasRecovered = false
    private var flushTimer: Task<Void, Never>?

    private struct QueuedBatch {
        var batch: PreparedBatch
        var continuation: CheckedContinuation<TelemetryWriter.BatchOutcome, any Error>
    }

    /// New tenants registered over the last minutes (``registrationFlood(now:)``).
    private var registrations = RegistrationWindow()

    /// A flood of new tenants (``RegistrationWindow``), if one is in force at `now`: the `tenant_flood` alert.
    public func registrationFlood(now: Double) -> RegistrationWindow.Flood? {
        registrations.flood(now: now)
    }

    /// - Parameters:
    ///   - pool: An open, migrated database (``StoreDatabase/open(path:configuration:)``).
    ///   - configuration: Write-path tuning.
    ///   - clock: Times the rollup flush interval. Default ``AllotTime/SystemClock``.
    public init(
        pool: DatabasePool, configuration: Configuration = Configuration(), clock: any AllotClock = SystemClock()
    ) {
        self.pool = pool
        self.configuration = configuration
        self.clock = clock
    }

    // MARK: Writing

    /// Stores `batch` durably, all or nothing; returns after COMMIT.
    ///
    /// - Parameters:
    ///   - batch: A validated batch (``TelemetryDecoder``); must not be empty.
    ///   - defaultTier: The tier new tenants are registered with (the policy's default tier now).
    ///   - now: The server's time in seconds since the epoch (gateways' last contact).
    /// - Throws: ``TelemetryStoreError`` when the database fails; nothing of the batch is stored.
    public nonisolated func ingest(_ batch: TelemetryBatch, defaultTier: String, now: Double)
        async throws(TelemetryStoreError) -> IngestResult
    {
        switch try await store(batch, defaultTier: defaultTier, now: now, key: nil) {
        case .stored(let result): result
        case .conflict(let conflict): throw TelemetryStoreError(message: conflict.rejection.message)  // no key: never
        }
    }

    /// A keyed batch's fate: stored (or answered as a duplicate), or refused for a key used by another body.
    private enum KeyedIngest {
        case stored(IngestResult)
        case conflict(TelemetryKeyConflict)
    }

    private nonisolated func store(_ batch: TelemetryBatch, defaultTier: String, now: Double, key: TelemetryBatchKey?)
        async throws(TelemetryStoreError) -> KeyedIngest
    {
        guard !batch.events.isEmpty else { return .stored(IngestResult(stored: 0, firstID: 0, lastID: 0)) }
        let prepared = PreparedBatch(
            batch.events, defaultTier: defaultTier, receivedMs: EpochTime.milliseconds(fromSeconds: now), key: key)
        let outcome: TelemetryWriter.BatchOutcome
        do {
            outcome = try await submit(prepared)
        } catch {
            let failure = TelemetryStoreError(error)
            await countFailure(failure)
            throw failure
        }
        switch outcome {
        case .stored(let rows):
            await countStored(batch, rows)
            return .stored(
                IngestResult(
                    stored: rows.count, firstID: rows.firstID, lastID: rows.lastID,
                    registeredTenants: rows.registeredTenants, unparseableHeaders: batch.unparseableHeaders,
                    ignoredFields: batch.ignoredFields))
        case .duplicate(let stored, let firstID, let lastID):
            await countDuplicate()
            return .stored(IngestResult(stored: stored, firstID: firstID, lastID: lastID, duplicate: true))
        case .conflict(let conflict):
            await countRejected(code: conflict.rejection.code)
            return .conflict(conflict)
        }
    }

    /// `POST /v1/telemetry` without HTTP: decodes and validates `body` (on the caller's task), then
    /// stores it with ``ingest(_:defaultTier:now:)``. Refusals are counted in ``counters``.
    ///
    /// - Parameters:
    ///   - body: The request body.
    ///   - format: From the `Content-Type` (``TelemetryFormat/init(contentType:)``).
    ///   - decoder: The validation bounds.
    ///   - defaultTier: The tier new tenants are registered with.
    ///   - now: The server's time, seconds since the epoch.
    ///   - gatewayScope: The gateway ids the sender's token may speak for (``GatewayScope``); nil: any. An event
    ///     of another gateway refuses the batch (`403 gateway_out_of_scope`, naming it).
    ///   - key: The gateway's idempotency key and the body's digest (``TelemetryBatchKey``); nil: none. A key
    ///     that stored this body before answers with that result (`duplicate`) and stores nothing; one that
    ///     stored another body refuses this one (`422 idempotency_key_reused`).
    /// - Throws: ``TelemetryIngestError``: `.rejected` (nothing stored) or `.database` (nothing stored).
    public nonisolated func ingest(
        body: [UInt8], format: TelemetryFormat, decoder: TelemetryDecoder = TelemetryDecoder(), defaultTier: String,
        now: Double, gatewayScope: String? = nil, key: TelemetryBatchKey? = nil
    ) async throws(TelemetryIngestError) -> IngestResult {
        // A resend of a batch its key already stored is answered so before the body is judged again: a check made
        // stricter since (a token's scope, a server upgrade) must not refuse what was stored, or the gateway would
        // drop the event named and resend the rest under a new key — stored twice. (Another body under the key is
        // judged first and refused by the write path.) Found by neither a failed read nor a racing first attempt:
        // the write path decides those.
        if let key, let earlier = await storedDuplicate(key) {
            await countDuplicate()
            return earlier
        }
        let batch: TelemetryBatch
        do {
            batch = try decoder.decode(body, format: format, now: now)
        } catch {
            await countRejected(code: error.code)
            throw .rejected(error)
        }
        if let gatewayScope,
            let index = batch.events.firstIndex(where: { !GatewayScope.allows(gatewayScope, gateway: $0.gateway) })
        {
            let rejection = TelemetryRejection(
                code: "gateway_out_of_scope",
                message: "event \(index): field 'gateway': this token "
                    + GatewayScope.refusal(gatewayScope, gateway: batch.events[index].gateway),
                field: "[\(index)].gateway", eventIndex: index, status: 403)
            await countRejected(code: rejection.code)
            throw .rejected(rejection)
        }
        let outcome: KeyedIngest
        do {
            outcome = try await store(batch, defaultTier: defaultTier, now: now, key: key)
        } catch {
            throw .database(error)
        }
        switch outcome {
        case .stored(let result): return result
        case .conflict(let conflict): throw .rejected(conflict.rejection)
        }
    }

    /// The first attempt's result when `key` stored this very body (read on the reader connection), else nil.
    private nonisolated func storedDuplicate(_ key: TelemetryBatchKey) async -> IngestResult? {
        try? await pool.read { connection -> IngestResult? in
            var result: IngestResult?
            try connection.query(TelemetryWriter.selectKeySQL, key.key) { row in
                guard row.string(0) == key.bodySHA256 else { return }
                result = IngestResult(stored: row.int(1), firstID: row.int64(2), lastID: row.int64(3), duplicate: true)
            }
            return result
        } ?? nil
    }

    /// Writes the rollup rows summed in memory (and, on a store's first write, the rollups of
    /// events a previous run left uncounted). Rollup reads call it first, so they are exact.
    ///
    /// - Throws: ``TelemetryStoreError`` when the database fails (the rows stay in memory).
    public func flushRollups() async throws(TelemetryStoreError) {
        do {
            try await withCheckedThrowingContinuation { continuation in
                flushWaiters.append(continuation)
                startDraining()
            }
        } catch {
            throw TelemetryStoreError(error)
        }
    }

    /// Writes what is pending and stops the flush timer; call before closing the pool on shutdown
    /// (if it is not called, the next start recovers the rollups from the events instead).
    public func close() async throws(TelemetryStoreError) {
        flushTimer?.cancel()
        flushTimer = nil
        if !pendingRollups.isEmpty || !hasRecovered { try await flushRollups() }
    }

    /// Counts a batch refused before storage (by ``TelemetryDecoder`` or the HTTP edge), for the
    /// `rejected batches by code` metric.
    public func countRejected(code: String) {
        statistics.batchesRejected[code, default: 0] += 1
    }

    /// The counters since start.
    public var counters: TelemetryCounters { statistics }

    private func submit(_ batch: PreparedBatch) async throws -> TelemetryWriter.BatchOutcome {
        try await withCheckedThrowingContinuation { continuation in
            queue.append(QueuedBatch(batch: batch, continuation: continuation))
            startDraining()
        }
    }

    private func startDraining() {
        guard !isDraining else { return }
        isDraining = true
        Task { await self.drain() }
    }

    /// Writes queued batches, group by group, until the queue is empty. Runs on the actor, so while
    /// a group's transaction is in flight (awaiting the writer queue) new batches can join `queue`.
    private func drain() async {
        while !queue.isEmpty || !flushWaiters.isEmpty {
            var group: [QueuedBatch] = []
            var events = 0
            while let next = queue.first, group.count < configuration.maxBatchesPerTransaction,
                group.isEmpty || events + next.batch.events.count <= configuration.maxEventsPerTransaction
            {
                group.append(next)
                events += next.batch.events.count
                queue.removeFirst()
            }
            let waiters = flushWaiters
            flushWaiters = []
            await write(group, flushWaiters: waiters)
        }
        isDraining = false
        scheduleFlushTimer()
    }

    private var flushIsDue: Bool {
        guard let pendingSince, !pendingRollups.isEmpty else { return false }
        return pendingRollups.count >= configuration.maxPendingRollupRows
            || clock.now - pendingSince >= configuration.rollupFlushInterval
    }

    private func write(_ group: [QueuedBatch], flushWaiters waiters: [CheckedContinuation<Void, any Error>]) async {
        let flush = !waiters.isEmpty || flushIsDue
        let work = TelemetryWriter.GroupWork(
            batches: group.map(\.batch), recover: !hasRecovered, flush: flush ? pendingRollups : nil,
            flushThrough: committedThrough)
        let cache = names
        do {
            let result = try await pool.write { connection in
                try TelemetryWriter.write(work, cache: cache, connection: connection)
            }
            names.merge(result.learned)
            if result.batches.contains(where: { if case .stored = $0 { true } else { false } }) {
                statistics.transactions += 1
            }
            if flush { statistics.rollupFlushes += 1 }
            hasRecovered = true
            if flush {
                pendingRollups = [:]
                pendingSince = nil
            }
            for (item, outcome) in zip(group, result.batches) {
                if case .stored(let rows) = outcome { addPendingRollups(item.batch, rows) }
            }
            committedThrough = result.lastEventID
            for (item, outcome) in zip(group, result.batches) { item.continuation.resume(returning: outcome) }
            for waiter in waiters { waiter.resume() }
        } catch {
            // A failure of the database itself (busy, full, read-only, I/O, closed) fails every
            // batch alike; anything else might belong to one batch, so the others are retried
            // alone rather than refused for a neighbour's fault.
            if group.count > 1 && !Self.isDatabaseWide(error) {
                for (index, item) in group.enumerated() { await write([item], flushWaiters: index == 0 ? waiters : []) }
            } else {
                for item in group { item.continuation.resume(throwing: error) }
                for waiter in waiters { waiter.resume(throwing: error) }
            }
        }
    }

    /// Adds a committed batch's rollup rows (keyed by its local names) to the pending rows.
    private func addPendingRollups(_ batch: PreparedBatch, _ rows: StoredRows) {
        if pendingSince == nil && !batch.rollups.isEmpty { pendingSince = clock.now }
        for (local, counters) in batch.rollups {
            let key = RollupRowKey(
                tenant: rows.tenantRefs[Int(local.tenant)], upstream: rows.upstreamRefs[Int(local.upstream)],
                taskClass: local.taskClass, minuteMs: local.minuteMs)
            pendingRollups[key, default: MinuteCounters()].merge(counters)
        }
    }

    /// When the queue has gone idle with rollup rows pending, writes them after the flush interval
    /// (so that they are on disk within about one interval even when no further batch arrives).
    private func scheduleFlushTimer() {
        guard flushTimer == nil, !pendingRollups.isEmpty else { return }
        let clock = self.clock
        let interval = configuration.rollupFlushInterval
        flushTimer = Task {
            try? await clock.sleep(for: interval)
            await self.flushTimerFired()
        }
    }

    private func flushTimerFired() async {
        flushTimer = nil
        guard !Task.isCancelled, !pendingRollups.isEmpty else { return }
        if flushIsDue || !isDraining { try? await flushRollups() }
    }

    private static func isDatabaseWide(_ error: any Error) -> Bool {
        guard let error = error as? SQLiteError else { return false }
        return error.isBusy || error.isFull || error.isReadOnly || error.isIOError || error.isCannotOpen
            || error.isMisuse || error.isCorrupt || error.isInterrupted
    }

    private func countStored(_ batch: TelemetryBatch, _ rows: StoredRows) {
        if !rows.registeredTenants.isEmpty {
            // Each new tenant counts for the gateway of its first event in the batch: the alert names who floods.
            var gatewayOf: [String: String] = [:]
            for event in batch.events where gatewayOf[event.tenant] == nil { gatewayOf[event.tenant] = event.gateway }
            var byGateway: [String: Int] = [:]
            for tenant in rows.registeredTenants { byGateway[gatewayOf[tenant] ?? "?", default: 0] += 1 }
            registrations.record(byGateway, now: clock.now)
        }
        statistics.batchesStored += 1
        statistics.eventsStored += rows.count
        statistics.tenantsRegistered += rows.registeredTenants.count
        statistics.unparseableHeaders += batch.unparseableHeaders
        statistics.classifiedOutcomes += batch.classifiedOutcomes
        statistics.ignoredFields += batch.ignoredFieldCount
    }

    private func countDuplicate() {
        statistics.batchesDuplicate += 1
    }

    private func countFailure(_ failure: TelemetryStoreError) {
        statistics.batchesRejected[failure.code, default: 0] += 1
    }
}

/// Ingest counters since the store started (the ingest benchmark and the tests read them; `/metrics` has the HTTP
/// route's own counts, `allot_telemetry_batches_total{result}` and `allot_telemetry_events_stored_total`).
public struct TelemetryCounters: Sendable, Equatable {
    /// Batches and events committed.
    public var batchesStored = 0
    public var eventsStored = 0
    /// Batches answered as duplicates: their ``TelemetryBatchKey`` had stored the same body before (nothing stored).
    public var batchesDuplicate = 0
    /// Write transactions that stored batches (fewer than batches when group commit combined some).
    public var transactions = 0
    /// Transactions that wrote the rollup rows summed in memory (most also stored batches).
    public var rollupFlushes = 0
    /// Batches refused, by error code (`invalid_json`, `invalid_event`, `empty_batch`,
    /// `too_many_events`, `body_too_large`, `unsupported_media_type`, `gateway_out_of_scope`,
    /// `invalid_idempotency_key`, `idempotency_key_reused`, `database_unavailable`).
    public var batchesRejected: [String: Int] = [:]
    /// Tenants registered automatically.
    public var tenantsRegistered = 0
    /// Recognised rate-limit header values that could not be parsed (in stored batches).
    public var unparseableHeaders = 0
    /// Events stored whose outcome was classified because the gateway did not send one.
    public var classifiedOutcomes = 0
    /// Unknown event members ignored (in stored batches).
    public var ignoredFields = 0

    public init() {}
}
