import AllotSQLite
import Foundation
import Testing

/// Bulk-insert throughput (SPEC section 13: ingest >= 100,000 events/s). Prints figures, asserts
/// none (tests never assert on wall-clock speed). Run with:
///
///     ALLOT_BENCH=1 swift test -c release --filter BenchmarkTests
@Suite(.enabled(if: ProcessInfo.processInfo.environment["ALLOT_BENCH"] == "1"))
struct BenchmarkTests {
    static let rows = 200_000
    static let runs = 5
    static let schema = """
        CREATE TABLE event(
            id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, gateway TEXT NOT NULL, tenant TEXT NOT NULL,
            upstream TEXT NOT NULL, outcome TEXT NOT NULL, status INTEGER, latency_ms REAL, queue_ms REAL,
            prompt_tokens INTEGER, completion_tokens INTEGER, estimated_tokens INTEGER, task_class TEXT NOT NULL,
            retry INTEGER NOT NULL, error_type TEXT
        )
        """
    static let insert = """
        INSERT INTO event(ts, gateway, tenant, upstream, outcome, status, latency_ms, queue_ms, prompt_tokens,
            completion_tokens, estimated_tokens, task_class, retry, error_type)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    static let tenants = (0..<1000).map { "tenant-\($0)" }
    static let outcomes = ["ok", "ok", "ok", "quota_exhausted", "overloaded"]

    enum Mode {
        /// One cached statement, `reset` + typed `bind(_:at:)` + `step` per row: the fast path.
        case typedBinds
        /// One cached statement, `statement.run(values...)` per row (existential bindings).
        case statementRun
        /// `connection.run(sql, values...)` per row (cache lookup by SQL text each time).
        case connectionRun
    }

    /// One transaction of `rows` inserts; returns rows per second.
    private func measure(_ mode: Mode, synchronous: SQLiteConfiguration.Synchronous) throws -> Double {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection(
            path: directory.file(), configuration: SQLiteConfiguration(synchronous: synchronous))
        try connection.execute(Self.schema)
        let start = ContinuousClock.now
        try connection.transaction { connection in
            let statement = try connection.cachedStatement(Self.insert)
            for index in 0..<Self.rows {
                let tenant = Self.tenants[index % Self.tenants.count]
                let outcome = Self.outcomes[index % Self.outcomes.count]
                let errorType: String? = outcome == "ok" ? nil : "rate_limit_exceeded"
                switch mode {
                case .typedBinds:
                    statement.reset()
                    try statement.bind(Int64(1_700_000_000_000 + index), at: 1)
                    try statement.bind("gw-1", at: 2)
                    try statement.bind(tenant, at: 3)
                    try statement.bind("openai/gpt-4o", at: 4)
                    try statement.bind(outcome, at: 5)
                    try statement.bind(Int64(outcome == "ok" ? 200 : 429), at: 6)
                    try statement.bind(Double(index % 900) + 0.5, at: 7)
                    try statement.bind(Double(index % 10), at: 8)
                    try statement.bind(Int64(index % 4000), at: 9)
                    try statement.bind(Int64(index % 800), at: 10)
                    try statement.bind(Int64(index % 5000), at: 11)
                    try statement.bind("interactive", at: 12)
                    try statement.bind(Int64(index % 3), at: 13)
                    try statement.bind(errorType, at: 14)
                    try statement.step()
                case .statementRun:
                    try statement.run(
                        1_700_000_000_000 + index, "gw-1", tenant, "openai/gpt-4o", outcome,
                        outcome == "ok" ? 200 : 429,
                        Double(index % 900) + 0.5, Double(index % 10), index % 4000, index % 800, index % 5000,
                        "interactive", index % 3, errorType)
                case .connectionRun:
                    try connection.run(
                        Self.insert,
                        1_700_000_000_000 + index, "gw-1", tenant, "openai/gpt-4o", outcome,
                        outcome == "ok" ? 200 : 429,
                        Double(index % 900) + 0.5, Double(index % 10), index % 4000, index % 800, index % 5000,
                        "interactive", index % 3, errorType)
                }
            }
        }
        let elapsed = ContinuousClock.now - start
        #expect(try connection.count("event") == Int64(Self.rows))
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        return Double(Self.rows) / seconds
    }

    private func report(_ name: String, _ figures: [Double]) {
        let sorted = figures.sorted()
        let median = sorted[sorted.count / 2]
        let line =
            "BENCH \(name): median \(Int(median)) rows/s (runs: \(sorted.map { String(Int($0)) }.joined(separator: ", ")))\n"
        FileHandle.standardError.write(Data(line.utf8))
    }

    @Test func bulkInsertTypedBindsFullSync() throws {
        report(
            "bulk insert, 14 bound + rowid = 15 columns, typed binds, synchronous=FULL",
            try (0..<Self.runs).map { _ in try measure(.typedBinds, synchronous: .full) })
    }

    @Test func bulkInsertVariadicRunFullSync() throws {
        report(
            "bulk insert, 15 columns, statement.run(variadic), synchronous=FULL",
            try (0..<Self.runs).map { _ in try measure(.statementRun, synchronous: .full) })
    }

    @Test func bulkInsertConnectionRunFullSync() throws {
        report(
            "bulk insert, 15 columns, connection.run(sql, variadic), synchronous=FULL",
            try (0..<Self.runs).map { _ in try measure(.connectionRun, synchronous: .full) })
    }
}
