import AllotSQLite
import Testing

@Suite struct MaintenanceTests {
    @Test func integrityCheckOfASoundDatabaseIsClean() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        try connection.execute("CREATE TABLE t(x TEXT UNIQUE); INSERT INTO t VALUES ('a'), ('b');")
        #expect(try connection.integrityProblems().isEmpty)
        #expect(try connection.integrityProblems(quick: false).isEmpty)
    }

    @Test func checkpointTruncateEmptiesTheLog() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        try connection.execute("CREATE TABLE t(x BLOB)")
        try connection.transaction { connection in
            for _ in 0..<50 { try connection.run("INSERT INTO t VALUES (?)", [UInt8](repeating: 7, count: 4000)) }
        }
        let before = connection.fileSizes()
        #expect(before.wal > 200_000)
        let passive = try connection.checkpoint()
        #expect(passive.logFrames > 0)
        #expect(passive.isComplete)
        let truncate = try connection.checkpoint(.truncate)
        #expect(truncate == CheckpointResult(logFrames: 0, checkpointedFrames: 0))
        let after = connection.fileSizes()
        #expect(after.wal == 0)
        #expect(after.database >= 200_000)
        #expect(after.total == after.database)
        #expect(try connection.contentSize() == after.database)
    }

    @Test func checkpointWaitingForAReaderGivesBusy() throws {
        let directory = try TemporaryDirectory.make()
        let writer = try SQLiteConnection.make(
            in: directory, configuration: SQLiteConfiguration(synchronous: .normal, busyTimeoutMilliseconds: 10))
        try writer.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        let reader = try SQLiteConnection.make(in: directory)
        try reader.execute("BEGIN; SELECT * FROM t;")  // holds a read snapshot
        try writer.run("INSERT INTO t VALUES (2)")
        let error = #expect(throws: SQLiteError.self) { try writer.checkpoint(.truncate) }
        #expect(error?.isBusy == true)
        #expect(try writer.checkpoint(.passive).logFrames > 0)  // passive never waits
        try reader.execute("COMMIT")
        #expect(try writer.checkpoint(.truncate).logFrames == 0)
    }

    @Test func probeOfAHealthyDatabasePasses() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        try connection.probe()
        try connection.probe(write: true)
        #expect(!connection.isInTransaction)
        let memory = try SQLiteConnection.inMemory()
        try memory.probe(write: true)
        connection.close()
        let closed = #expect(throws: SQLiteError.self) { try connection.probe() }
        #expect(closed?.isMisuse == true)
    }

    @Test func errorDescriptionNamesCodeMessageAndSQL() {
        let error = SQLiteError(
            code: 2067, message: "UNIQUE constraint failed: t.x", sql: "INSERT INTO t\n    VALUES (1)")
        #expect(error.code == 19)
        #expect(error.codeName == "SQLITE_CONSTRAINT")
        #expect(error.isConstraint)
        #expect(!error.isDatabaseUnavailable)
        #expect(
            error.description
                == "SQLite error 19/2067 SQLITE_CONSTRAINT: UNIQUE constraint failed: t.x (in: INSERT INTO t VALUES (1))"
        )
        #expect(SQLiteError(code: 5).message == "database is locked")
        let long = SQLiteError(code: 1, message: "m", sql: String(repeating: "x", count: 500))
        #expect(long.description.count < 260)
        #expect(long.description.hasSuffix("…)"))
    }
}
