import AllotSQLite
import Testing

@Suite struct DurabilityTests {
    @Test func committedRowsSurviveCloseAndReopen() throws {
        let directory = try TemporaryDirectory.make()
        do {
            let connection = try SQLiteConnection(path: directory.file())  // FULL synchronous
            try connection.execute("CREATE TABLE event(id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, tokens INTEGER)")
            try connection.transaction { connection in
                for index in 0..<500 {
                    try connection.run("INSERT INTO event(tenant, tokens) VALUES (?, ?)", "tenant-\(index % 7)", index)
                }
            }
            // Uncommitted work is not kept.
            try connection.execute("BEGIN; INSERT INTO event(tenant, tokens) VALUES ('lost', 0);")
            connection.close()
        }
        let reopened = try SQLiteConnection(path: directory.file())
        #expect(try reopened.count("event") == 500)
        #expect(try reopened.queryValue("SELECT sum(tokens) FROM event")?.int64 == 124_750)
        #expect(try reopened.queryValue("SELECT count(*) FROM event WHERE tenant = 'lost'")?.int64 == 0)
        #expect(try reopened.integrityProblems().isEmpty)
    }

    @Test func committedRowsAreVisibleToANewConnectionBeforeCheckpoint() throws {
        // With the writer still open the rows live in the -wal file; a process that crashes now
        // (kill -9) leaves them there, and the next opener recovers them from the log.
        let directory = try TemporaryDirectory.make()
        let writer = try SQLiteConnection(path: directory.file())
        try writer.execute("CREATE TABLE t(x)")
        try writer.transaction { try $0.run("INSERT INTO t VALUES (?)", 42) }
        #expect(writer.fileSizes().wal > 0)
        let other = try SQLiteConnection(path: directory.file())
        #expect(try other.queryValue("SELECT x FROM t")?.int64 == 42)
    }

    @Test func theLastCloseCheckpointsAndRemovesTheLog() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection(path: directory.file())
        try connection.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        connection.close()
        let reopened = try SQLiteConnection(path: directory.file(), configuration: SQLiteConfiguration(readOnly: true))
        #expect(reopened.fileSizes().wal == 0)
        #expect(try reopened.count("t") == 1)
    }
}
