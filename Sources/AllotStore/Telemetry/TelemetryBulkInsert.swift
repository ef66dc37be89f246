import AllotSQLite

/// The physical limit of the telemetry write path: the same `events` rows inserted with the same
/// prepared statement, without JSON, validation, interning or rollups, and without HTTP.
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
                let statement = try connection.cachedStatement(TelemetryWriter.insertEventSQL)
                for event in slice {
                    try TelemetryWriter.bind(event, to: statement, tenant: 1, upstream: 1, gateway: 1, model: nil)
                    try statement.step()
                    statement.reset()
                }
                return slice.count
            }
            start += step
        }
        return inserted
    }
}
