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
    /// DELETE transactions run (including the last, short one of each table).
    public var chunks: Int

    public init(eventsDeleted: Int = 0, rollupsDeleted: Int = 0, chunks: Int = 0) {
        self.eventsDeleted = eventsDeleted
        self.rollupsDeleted = rollupsDeleted
        self.chunks = chunks
    }
}

/// Deletes telemetry older than the ``RetentionPolicy``, in bounded chunks (SPEC section 3).
///
/// Raw events go by `ts_ms` (through the `events_by_time` index), oldest first, but the event with
/// the largest id is always kept, even when it is old: SQLite gives a new row `max(id) + 1`, so
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
        while true {
            let deleted = try await pool.write { connection -> Int in
                try connection.run(Self.deleteEventsSQL, eventCutoff, chunk)
                return connection.changes
            }
            report.chunks += 1
            report.eventsDeleted += deleted
            if deleted < chunk { break }
            await Task.yield()
        }
        let rollupCutoff = EpochTime.milliseconds(fromSeconds: now - policy.rollups)
        while true {
            let deleted = try await pool.write { connection -> Int in
                try connection.run(Self.deleteRollupsSQL, rollupCutoff, chunk)
                return connection.changes
            }
            report.chunks += 1
            report.rollupsDeleted += deleted
            if deleted < chunk { break }
            await Task.yield()
        }
        return report
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

    /// One chunk of old events, oldest first, never the newest row.
    static let deleteEventsSQL = """
        DELETE FROM events WHERE id IN
        (SELECT id FROM events WHERE ts_ms < ?1 AND id < (SELECT max(id) FROM events)
         AND id <= (SELECT last_event_id FROM rollup_progress) ORDER BY ts_ms LIMIT ?2)
        """

    /// One chunk of old rollup rows, oldest first.
    static let deleteRollupsSQL = """
        DELETE FROM rollups_minute WHERE (tenant_ref, minute_ms, upstream_ref, task_class) IN
        (SELECT tenant_ref, minute_ms, upstream_ref, task_class FROM rollups_minute
         WHERE minute_ms < ?1 ORDER BY minute_ms LIMIT ?2)
        """
}
