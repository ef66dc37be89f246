import AllotSQLite
import AllotTime

/// How long telemetry is kept (SPEC section 3: raw events 24 h, rollups 30 days, configurable).
public struct RetentionPolicy: Sendable, Equatable {
    /// Seconds raw events are kept, by event time.
    public var rawEvents: Double
    /// Seconds per-minute rollups are kept, by minute.
    public var rollups: Double
    /// Most rows one DELETE removes. Each chunk is its own short write transaction, so ingest
    /// batches queue behind at most one chunk (a few milliseconds), never behind the whole purge.
    public var chunkRows: Int

    /// - Parameters:
    ///   - rawEvents: Default 86,400 (24 hours).
    ///   - rollups: Default 2,592,000 (30 days).
    ///   - chunkRows: Default 5,000.
    public init(rawEvents: Double = 86_400, rollups: Double = 30 * 86_400, chunkRows: Int = 5_000) {
        self.rawEvents = rawEvents
        self.rollups = rollups
        self.chunkRows = max(1, chunkRows)
    }
}

/// What one ``RetentionPruner/prune(now:)`` pass deleted.
public struct PruneReport: Sendable, Equatable {
    public var eventsDeleted: Int
    public var rollupsDeleted: Int
    /// Idempotency keys of telemetry batches (``TelemetryBatchKey``) forgotten.
    public var keysDeleted: Int
    /// DELETE transactions run (including the last, short one of each table).
    public var chunks: Int

    public init(eventsDeleted: Int = 0, rollupsDeleted: Int = 0, keysDeleted: Int = 0, chunks: Int = 0) {
        self.eventsDeleted = eventsDeleted
        self.rollupsDeleted = rollupsDeleted
        self.keysDeleted = keysDeleted
        self.chunks = chunks
    }
}

/// Deletes telemetry older than the ``RetentionPolicy``, in bounded chunks (SPEC section 3), and the idempotency
/// keys of batches (``TelemetryBatchKey``) as old as the raw events.
///
/// Raw events go by `ts_ms`: every event older than the cutoff is deleted, found through the per-block
/// time bounds of ``EventBlocks`` (blocks in id order, i.e. roughly oldest first; each chunk scans only
/// blocks whose bounds reach below the cutoff). The event with the largest id is always kept, even when it is old: SQLite gives a new row `max(id) + 1`, so
/// deleting the last row would let the next event reuse an id that the loop has already read past
/// (see `migrations/0001_telemetry.sql`). Nor does it delete events the rollups have not counted
/// yet (above the `rollup_progress` mark), which a restart would need to rebuild them. Rollups go
/// by `minute_ms`.
///
/// Time comes from the `now` passed in (or the clock given to ``run(clock:every:onError:)``),
/// never from the wall clock, so tests drive it on a virtual clock.
public struct RetentionPruner: Sendable {
    public let pool: DatabasePool
    public var policy: RetentionPolicy

    public init(pool: DatabasePool, policy: RetentionPolicy = RetentionPolicy()) {
        self.pool = pool
        self.policy = policy
    }

    /// Deletes everything older than the policy allows at `now` (seconds since the epoch), chunk by
    /// chunk, yielding between chunks.
    ///
    /// - Throws: ``AllotSQLite/SQLiteError``; chunks deleted before the failure stay deleted.
    public func prune(now: Double) async throws -> PruneReport {
        var report = PruneReport()
        let chunk = Int64(policy.chunkRows)
        let eventCutoff = EpochTime.milliseconds(fromSeconds: now - policy.rawEvents)
        var resumeAfter: Int64?
        while true {
            let (deleted, lastBlock) = try await pool.write { [resumeAfter] connection in
                try Self.deleteEvents(before: eventCutoff, limit: chunk, after: resumeAfter, connection: connection)
            }
            report.chunks += 1
            report.eventsDeleted += deleted
            if deleted < chunk { break }
            resumeAfter = lastBlock
            await Task.yield()
        }
        let rollupCutoff = EpochTime.milliseconds(fromSeconds: now - policy.rollups)
        report.rollupsDeleted = try await deleteInChunks(Self.deleteRollupsSQL, before: rollupCutoff, report: &report)
        // A batch's key is kept as long as its events (by the time it arrived): a batch resent later is stored again.
        report.keysDeleted = try await deleteInChunks(Self.deleteKeysSQL, before: eventCutoff, report: &report)
        return report
    }

    /// Runs `sql` (a DELETE of at most `?2` rows older than `?1`) chunk by chunk until a chunk deletes fewer than
    /// the policy's `chunkRows`, yielding between chunks; returns the rows deleted (each chunk counted in `report`).
    private func deleteInChunks(_ sql: String, before cutoff: Int64, report: inout PruneReport) async throws -> Int {
        let chunk = Int64(policy.chunkRows)
        var total = 0
        while true {
            let deleted = try await pool.write { connection -> Int in
                try connection.run(sql, cutoff, chunk)
                return connection.changes
            }
            report.chunks += 1
            total += deleted
            if deleted < chunk { return total }
            await Task.yield()
        }
    }

    /// Prunes every `interval` seconds of `clock` until the task is cancelled. A failed pass is
    /// reported to `onError` and retried at the next interval (a full disk must not stop pruning,
    /// which is what frees space).
    public func run(
        clock: some AllotClock, every interval: Double = 60,
        onError: @Sendable (any Error) -> Void = { _ in }
    ) async {
        while !Task.isCancelled {
            do {
                _ = try await prune(now: clock.now)
            } catch {
                onError(error)
            }
            do {
                try await clock.sleep(for: interval)
            } catch {
                return  // cancelled
            }
        }
    }

    /// Deletes up to `limit` events with `ts_ms < cutoff` in one transaction, block by block from the
    /// first block after `after` whose bounds reach below the cutoff; never the newest row nor rows
    /// above the rollup mark. Returns how many it deleted and the last block it finished (every old
    /// event below that block that may be deleted is gone, so the next chunk starts after it).
    ///
    /// A block the chunk finished gets its bounds recomputed (or its row deleted when empty), so a
    /// block whose remaining events are all recent stops being visited.
    static func deleteEvents(before cutoff: Int64, limit: Int64, after: Int64?, connection: SQLiteConnection)
        throws -> (deleted: Int, lastBlock: Int64?)
    {
        let newest = try connection.queryOne("SELECT max(id) FROM events") { $0.optionalInt64(0) } ?? nil
        guard let newest else { return (0, nil) }
        let counted = try connection.queryOne("SELECT last_event_id FROM rollup_progress") { $0.int64(0) } ?? 0
        let deletable = min(newest - 1, counted)  // ids above this must stay
        var deleted = 0
        var finished = after
        var block = after
        while deleted < limit,
            let next = try EventBlocks.nextBlock(after: block, withEventsBefore: cutoff, connection: connection),
            next <= EventBlocks.block(of: deletable)
        {
            block = next
            let range = EventBlocks.ids(of: next)
            let wanted = limit - Int64(deleted)
            try connection.run(
                deleteEventsSQL, range.lowerBound, min(range.upperBound, deletable), cutoff, wanted)
            deleted += connection.changes
            guard connection.changes < wanted else { break }  // the limit may have cut the block short
            try EventBlocks.refresh(next, connection: connection)
            finished = next
        }
        return (deleted, finished)
    }

    /// Old events of one block's id range, in id order, at most `?4` of them.
    static let deleteEventsSQL = """
        DELETE FROM events WHERE id IN
        (SELECT id FROM events WHERE id BETWEEN ?1 AND ?2 AND ts_ms < ?3 ORDER BY id LIMIT ?4)
        """

    /// One chunk of idempotency keys of batches committed before the raw-event cutoff, oldest first.
    static let deleteKeysSQL = """
        DELETE FROM telemetry_batch_keys WHERE key IN
        (SELECT key FROM telemetry_batch_keys WHERE committed_ms < ?1 ORDER BY committed_ms LIMIT ?2)
        """

    /// One chunk of old rollup rows, oldest first.
    static let deleteRollupsSQL = """
        DELETE FROM rollups_minute WHERE (tenant_ref, minute_ms, upstream_ref, task_class) IN
        (SELECT tenant_ref, minute_ms, upstream_ref, task_class FROM rollups_minute
         WHERE minute_ms < ?1 ORDER BY minute_ms LIMIT ?2)
        """
}
