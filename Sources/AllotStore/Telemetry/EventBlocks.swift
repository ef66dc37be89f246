import AllotSQLite

/// The `event_blocks` table: per block of ``idsPerBlock`` consecutive event ids, the range of `ts_ms`
/// in it (see `migrations/0001_telemetry.sql`).
///
/// Why not an index on `events.ts_ms`: it costs a b-tree entry per event, 15-25% of the CPU of
/// inserting one, while the only time-based queries on raw events are retention (every minute) and
/// a loop's cold start. Ids follow arrival and arrival follows event time closely (late deliveries
/// excepted), so per-block bounds let those queries skip almost every block and scan the few that
/// overlap by rowid: exact answers, with at most ``idsPerBlock`` rows examined per block visited.
///
/// Invariant: every event's `ts_ms` lies within its block's `[min_ts_ms, max_ts_ms]`, and every
/// block holding events has a row. Ingest widens the row in the transaction that inserts the events;
/// ``RetentionPruner`` recomputes it (or deletes it) in the transaction that deletes from the block.
enum EventBlocks {
    /// Ids per block: a power of two, so a block is `id >> blockShift`.
    static let idsPerBlock: Int64 = 1 << blockShift
    static let blockShift: Int64 = 12

    @inline(__always)
    static func block(of id: Int64) -> Int64 { id >> blockShift }

    /// The ids a block may hold.
    static func ids(of block: Int64) -> ClosedRange<Int64> {
        (block << blockShift)...((block << blockShift) + idsPerBlock - 1)
    }

    /// Widens the bounds of the blocks that `events` (ids `firstID`, `firstID + 1`, …) fall in.
    /// One upsert per block: one or two per batch.
    static func record(_ events: [TelemetryEvent], firstID: Int64, connection: SQLiteConnection) throws {
        guard !events.isEmpty else { return }
        let upsert = try connection.cachedStatement(upsertSQL)
        var position = 0
        while position < events.count {
            let block = block(of: firstID + Int64(position))
            let end = min(events.count, Int(ids(of: block).upperBound - firstID) + 1)
            var low = Int64.max
            var high = Int64.min
            for event in events[position..<end] {
                low = min(low, event.timestampMs)
                high = max(high, event.timestampMs)
            }
            try upsert.run(block, low, high)
            position = end
        }
    }

    static let upsertSQL = """
        INSERT INTO event_blocks (block, min_ts_ms, max_ts_ms) VALUES (?1, ?2, ?3)
        ON CONFLICT (block) DO UPDATE SET min_ts_ms = min(min_ts_ms, excluded.min_ts_ms),
        max_ts_ms = max(max_ts_ms, excluded.max_ts_ms)
        """

    /// Recomputes a block's bounds from its events, or deletes its row when it has none left.
    static func refresh(_ block: Int64, connection: SQLiteConnection) throws {
        let range = ids(of: block)
        let bounds = try connection.queryOne(
            "SELECT min(ts_ms), max(ts_ms) FROM events WHERE id BETWEEN ?1 AND ?2", range.lowerBound,
            range.upperBound
        ) { row in (row.optionalInt64(0), row.optionalInt64(1)) }
        if let bounds, let low = bounds.0, let high = bounds.1 {
            try connection.run(
                "UPDATE event_blocks SET min_ts_ms = ?2, max_ts_ms = ?3 WHERE block = ?1", block, low, high)
        } else {
            try connection.run("DELETE FROM event_blocks WHERE block = ?1", block)
        }
    }

    /// The first block after `block` (nil: from the start) that may hold events with `ts_ms < cutoff`.
    static func nextBlock(after block: Int64?, withEventsBefore cutoff: Int64, connection: SQLiteConnection) throws
        -> Int64?
    {
        try connection.queryOne(
            "SELECT block FROM event_blocks WHERE block > ?1 AND min_ts_ms < ?2 ORDER BY block LIMIT 1",
            block ?? Int64.min, cutoff
        ) { $0.int64(0) }
    }

    /// The smallest id of an event with `ts_ms >= milliseconds`, or nil.
    static func firstEventID(atOrAfter milliseconds: Int64, connection: SQLiteConnection) throws -> Int64? {
        var after = Int64.min
        while let block = try connection.queryOne(
            "SELECT block FROM event_blocks WHERE block > ?1 AND max_ts_ms >= ?2 ORDER BY block LIMIT 1", after,
            milliseconds, map: { $0.int64(0) })
        {
            let range = ids(of: block)
            let id = try connection.queryOne(
                "SELECT min(id) FROM events WHERE id BETWEEN ?1 AND ?2 AND ts_ms >= ?3", range.lowerBound,
                range.upperBound, milliseconds
            ) { $0.optionalInt64(0) }
            if let found = id ?? nil { return found }
            after = block  // bounds wider than the events (cannot happen while the invariant holds)
        }
        return nil
    }
}
