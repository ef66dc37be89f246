import AllotSQLite
import AllotTime

/// The telemetry database: stores validated batches durably and serves them back to the loop
/// (SPEC sections 2 and 3).
///
/// **Writing.** ``ingest(_:defaultTier:now:)`` stores one batch all-or-nothing: it registers unknown
/// tenants (with the tier given, the policy's default), upstreams, gateways and model versions,
/// inserts the events and adds them to the per-minute rollups, in one transaction, and returns
/// only after COMMIT, so with `synchronous=FULL` (the default of ``AllotSQLite/SQLiteConfiguration``)
/// an acknowledged batch survives a crash or power loss.
///
/// **Group commit.** Batches that arrive while a transaction is committing wait in a queue and
/// are written together in the next transaction (up to ``Configuration/maxBatchesPerTransaction``
/// batches and ``Configuration/maxEventsPerTransaction`` events), each reported separately. This
/// keeps every batch all-or-nothing (each was fully validated before it queued, and a group that
/// fails for a reason other than the database itself is retried batch by batch) while paying one
/// BEGIN/COMMIT and one fsync for several batches under load. Measured in
/// `IngestBenchmark`; see the README.
///
/// **Reading** (`TelemetryStore+Reading.swift`) runs on the pool's reader connection, in WAL
/// mode, and never waits for ingest.
///
/// An actor because it owns long-lived state: the queue of waiting batches and the cache of
/// interned names (which is only extended after a commit, so it never holds a ref the database
/// does not have). The per-event work (rollup aggregation) happens before a batch enters the
/// actor, on the caller's task.
public actor TelemetryStore {
    /// Tuning of the write path.
    public struct Configuration: Sendable, Equatable {
        /// Most batches written in one transaction; 1 turns group commit off.
        public var maxBatchesPerTransaction: Int
        /// Most events written in one transaction (a group stops growing past this; a single
        /// batch larger than this is still written whole).
        public var maxEventsPerTransaction: Int

        /// - Parameters:
        ///   - maxBatchesPerTransaction: Default 16.
        ///   - maxEventsPerTransaction: Default 20,000 (a few tens of milliseconds of writing, so
        ///     a batch never waits long behind a group).
        public init(maxBatchesPerTransaction: Int = 16, maxEventsPerTransaction: Int = 20_000) {
            self.maxBatchesPerTransaction = max(1, maxBatchesPerTransaction)
            self.maxEventsPerTransaction = max(1, maxEventsPerTransaction)
        }
    }

    /// The database: ingest writes on its writer, reads use its reader.
    public nonisolated let pool: DatabasePool
    public nonisolated let configuration: Configuration

    private var names = NameCache()
    private var pending: [PendingBatch] = []
    private var isDraining = false
    private var statistics = TelemetryCounters()

    private struct PendingBatch {
        var batch: PreparedBatch
        var continuation: CheckedContinuation<StoredRows, any Error>
    }

    /// - Parameters:
    ///   - pool: An open, migrated database (``StoreDatabase/open(path:configuration:now:)``).
    ///   - configuration: Write-path tuning.
    public init(pool: DatabasePool, configuration: Configuration = Configuration()) {
        self.pool = pool
        self.configuration = configuration
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
        guard !batch.events.isEmpty else { return IngestResult(stored: 0, firstID: 0, lastID: 0) }
        let prepared = PreparedBatch(
            batch.events, defaultTier: defaultTier, receivedMs: EpochTime.milliseconds(fromSeconds: now))
        let rows: StoredRows
        do {
            rows = try await submit(prepared)
        } catch {
            let failure = TelemetryStoreError(error)
            await countFailure(failure)
            throw failure
        }
        await countStored(batch, rows)
        return IngestResult(
            stored: rows.count, firstID: rows.firstID, lastID: rows.lastID, registeredTenants: rows.registeredTenants,
            unparseableHeaders: batch.unparseableHeaders, ignoredFields: batch.ignoredFields)
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
    /// - Throws: ``TelemetryIngestError``: `.rejected` (nothing stored, database untouched) or
    ///   `.database` (nothing stored).
    public nonisolated func ingest(
        body: [UInt8], format: TelemetryFormat, decoder: TelemetryDecoder = TelemetryDecoder(), defaultTier: String,
        now: Double
    ) async throws(TelemetryIngestError) -> IngestResult {
        let batch: TelemetryBatch
        do {
            batch = try decoder.decode(body, format: format, now: now)
        } catch {
            await countRejected(code: error.code)
            throw .rejected(error)
        }
        do {
            return try await ingest(batch, defaultTier: defaultTier, now: now)
        } catch {
            throw .database(error)
        }
    }

    /// Counts a batch refused before storage (by ``TelemetryDecoder`` or the HTTP edge), for the
    /// `rejected batches by code` metric.
    public func countRejected(code: String) {
        statistics.batchesRejected[code, default: 0] += 1
    }

    /// The counters since start.
    public var counters: TelemetryCounters { statistics }

    private func submit(_ batch: PreparedBatch) async throws -> StoredRows {
        try await withCheckedThrowingContinuation { continuation in
            pending.append(PendingBatch(batch: batch, continuation: continuation))
            if !isDraining {
                isDraining = true
                Task { await self.drain() }
            }
        }
    }

    /// Writes queued batches, group by group, until the queue is empty. Runs on the actor, so while
    /// a group's transaction is in flight (awaiting the writer queue) new batches can join `pending`.
    private func drain() async {
        while !pending.isEmpty {
            var group: [PendingBatch] = []
            var events = 0
            while let next = pending.first, group.count < configuration.maxBatchesPerTransaction,
                group.isEmpty || events + next.batch.events.count <= configuration.maxEventsPerTransaction
            {
                group.append(next)
                events += next.batch.events.count
                pending.removeFirst()
            }
            await write(group)
        }
        isDraining = false
    }

    private func write(_ group: [PendingBatch]) async {
        let batches = group.map(\.batch)
        let cache = names
        do {
            let result = try await pool.write { connection in
                try TelemetryWriter.write(batches, cache: cache, connection: connection)
            }
            names.merge(result.learned)
            statistics.transactions += 1
            for (item, rows) in zip(group, result.batches) { item.continuation.resume(returning: rows) }
        } catch {
            // A failure of the database itself (busy, full, read-only, I/O, closed) fails every
            // batch alike; anything else might belong to one batch, so the others are retried
            // alone rather than refused for a neighbour's fault.
            if group.count > 1 && !Self.isDatabaseWide(error) {
                for item in group { await write([item]) }
            } else {
                for item in group { item.continuation.resume(throwing: error) }
            }
        }
    }

    private static func isDatabaseWide(_ error: any Error) -> Bool {
        guard let error = error as? SQLiteError else { return false }
        return error.isBusy || error.isFull || error.isReadOnly || error.isIOError || error.isCannotOpen
            || error.isMisuse || error.isCorrupt || error.isInterrupted
    }

    private func countStored(_ batch: TelemetryBatch, _ rows: StoredRows) {
        statistics.batchesStored += 1
        statistics.eventsStored += rows.count
        statistics.tenantsRegistered += rows.registeredTenants.count
        statistics.unparseableHeaders += batch.unparseableHeaders
        statistics.classifiedOutcomes += batch.classifiedOutcomes
        statistics.ignoredFields += batch.ignoredFieldCount
    }

    private func countFailure(_ failure: TelemetryStoreError) {
        statistics.batchesRejected[failure.code, default: 0] += 1
    }
}

/// Ingest counters since the store started, for `/metrics` (exported by the server).
public struct TelemetryCounters: Sendable, Equatable {
    /// Batches and events committed.
    public var batchesStored = 0
    public var eventsStored = 0
    /// Write transactions committed (fewer than batches when group commit combined some).
    public var transactions = 0
    /// Batches refused, by error code (`invalid_json`, `invalid_event`, `empty_batch`,
    /// `too_many_events`, `body_too_large`, `unsupported_media_type`, `database_unavailable`).
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
