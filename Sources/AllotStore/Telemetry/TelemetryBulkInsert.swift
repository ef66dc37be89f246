import AllotSQLite

/// The physical limit of the telemetry write path: the same `events` rows inserted with the same
/// prepared statements (``TelemetryWriter/rowsPerInsert`` rows per INSERT), without JSON, validation,
/// interning, time bounds or rollups, and without HTTP.
///
/// The ingest benchmark reports it beside the HTTP figure so that the cost of everything above
/// SQLite can be read off directly (SPEC section 13 asks for 100,000 events/s through HTTP).
/// Every row gets refs 1 (the rows are throwaway; `events` has no foreign keys).
public enum TelemetryBulkInsert {
    /// Inserts `events` on the pool's writer, `rowsPerTransaction` per transaction; returns how many
    /// rows were inserted.
    public static func insert(_ events: [TelemetryEvent], into pool: DatabasePool, rowsPerTransaction: Int = 1_000)
        async throws -> Int
    {
        var inserted = 0
        var start = 0
        let step = max(1, rowsPerTransaction)
        while start < events.count {
            let slice = Array(events[start..<min(start + step, events.count)])
            inserted += try await pool.write { connection in
                let rows = TelemetryWriter.rowsPerInsert
                let columns = TelemetryWriter.eventColumns.count
                var position = 0
                let many = try connection.cachedStatement(TelemetryWriter.insertEventsSQL)
                while position + rows <= slice.count {
                    many.clearBindings()
                    for row in 0..<rows {
                        try TelemetryWriter.bind(
                            slice[position + row], to: many, offset: row * columns, tenant: 1, upstream: 1, gateway: 1,
                            model: nil)
                    }
                    try many.step()
                    many.reset()
                    position += rows
                }
                let one = try connection.cachedStatement(TelemetryWriter.insertEventSQL)
                for event in slice[position...] {
                    one.clearBindings()
                    try TelemetryWriter.bind(event, to: one, tenant: 1, upstream: 1, gateway: 1, model: nil)
                    try one.step()
                    one.reset()
                }
                return slice.count
            }
            start += step
        }
        return inserted
    }
}
