import AllotSQLite
import CSQLite
import Foundation
import Testing

@Suite struct ConnectionTests {
    @Test func openingConfiguresWALForeignKeysAndTimeouts() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection(path: directory.file())
        #expect(try connection.queryOne("PRAGMA journal_mode") { $0.string(0) } == "wal")
        #expect(try connection.queryOne("PRAGMA foreign_keys") { $0.int64(0) } == 1)
        #expect(try connection.queryOne("PRAGMA synchronous") { $0.int64(0) } == 2)  // FULL
        #expect(try connection.queryOne("PRAGMA busy_timeout") { $0.int64(0) } == 5000)
        #expect(try connection.queryOne("PRAGMA temp_store") { $0.int64(0) } == 2)  // MEMORY
        #expect(connection.isOpen)
        #expect(connection.filePath == directory.file())
    }

    @Test func configurationIsApplied() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection(
            path: directory.file(),
            configuration: SQLiteConfiguration(synchronous: .normal, busyTimeoutMilliseconds: 250)
        )
        #expect(try connection.queryOne("PRAGMA synchronous") { $0.int64(0) } == 1)  // NORMAL
        #expect(try connection.queryOne("PRAGMA busy_timeout") { $0.int64(0) } == 250)
    }

    @Test func foreignKeysAreEnforced() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        try connection.execute(
            """
            CREATE TABLE parent(id INTEGER PRIMARY KEY);
            CREATE TABLE child(id INTEGER PRIMARY KEY, parent INTEGER NOT NULL REFERENCES parent(id));
            """
        )
        let error = #expect(throws: SQLiteError.self) { try connection.run("INSERT INTO child(parent) VALUES (42)") }
        #expect(error?.isConstraint == true)
        #expect(error?.extendedCode == 787)  // SQLITE_CONSTRAINT_FOREIGNKEY
        #expect(error?.message == "FOREIGN KEY constraint failed")
        #expect(error?.sql == "INSERT INTO child(parent) VALUES (42)")
    }

    @Test func inMemoryConnectionWorksWithoutWAL() throws {
        let connection = try SQLiteConnection.inMemory()
        #expect(connection.isInMemory)
        #expect(connection.filePath == nil)
        #expect(try connection.queryOne("PRAGMA journal_mode") { $0.string(0) } == "memory")
        try connection.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);")
        #expect(try connection.count("t") == 2)
        #expect(connection.fileSizes() == DatabaseFileSizes(database: 0, wal: 0))
    }

    @Test func closedConnectionThrowsMisuseEverywhere() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        try connection.execute("CREATE TABLE t(x)")
        let held = try connection.cachedStatement("INSERT INTO t VALUES (?)")
        connection.close()
        connection.close()  // idempotent
        #expect(!connection.isOpen)
        let runError = #expect(throws: SQLiteError.self) { try connection.run("SELECT 1") }
        #expect(runError?.isMisuse == true)
        #expect(runError?.message == "the database connection is closed")
        #expect(throws: SQLiteError.self) { try connection.execute("SELECT 1") }
        #expect(throws: SQLiteError.self) { try connection.transaction { _ in 1 } }
        let heldError = #expect(throws: SQLiteError.self) { try held.run(1) }
        #expect(heldError?.isMisuse == true)
        #expect(connection.lastInsertRowID == 0)
        #expect(connection.changes == 0)
        #expect(!connection.isInTransaction)
    }

    @Test func statementOutlivingItsConnectionThrowsInsteadOfCrashing() throws {
        let directory = try TemporaryDirectory.make()
        var statement: SQLiteStatement?
        do {
            let connection = try SQLiteConnection.make(in: directory)
            statement = try connection.makeStatement("SELECT 1")
        }  // connection released: deinit closes it (zombie until the statement goes)
        let error = #expect(throws: SQLiteError.self) { try statement?.step() }
        #expect(error?.isMisuse == true)
        statement = nil
    }

    @Test func lastInsertRowIDAndChanges() throws {
        let connection = try SQLiteConnection.inMemory()
        try connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, x INTEGER)")
        try connection.run("INSERT INTO t(id, x) VALUES (?, ?)", 41, 1)
        #expect(connection.lastInsertRowID == 41)
        try connection.run("INSERT INTO t(x) VALUES (?)", 2)
        #expect(connection.lastInsertRowID == 42)
        try connection.run("INSERT INTO t(x) VALUES (?)", 3)
        try connection.run("UPDATE t SET x = x + 1 WHERE x >= ?", 2)
        #expect(connection.changes == 2)
        #expect(connection.totalChanges == 5)
    }

    @Test func executeRunsAScriptAndReportsTheFailingStatement() throws {
        let connection = try SQLiteConnection.inMemory()
        try connection.execute(
            """
            -- a comment first
            CREATE TABLE t(x INTEGER NOT NULL);
            INSERT INTO t VALUES (1); INSERT INTO t VALUES (2);
            SELECT * FROM t;   -- rows are ignored
            /* trailing comment */
            """
        )
        #expect(try connection.count("t") == 2)
        try connection.execute("")
        try connection.execute("   ;  ")

        let stepError = #expect(throws: SQLiteError.self) {
            try connection.execute("INSERT INTO t VALUES (3); INSERT INTO t VALUES (NULL); INSERT INTO t VALUES (4);")
        }
        #expect(stepError?.isConstraint == true)
        #expect(stepError?.sql == "INSERT INTO t VALUES (NULL);")
        #expect(try connection.count("t") == 3)  // the first ran, the last did not

        let parseError = #expect(throws: SQLiteError.self) {
            try connection.execute("SELECT 1; SELEKT 2; SELECT 3;")
        }
        #expect(parseError?.code == SQLITE_ERROR)
        #expect(parseError?.message == "near \"SELEKT\": syntax error")
        #expect(parseError?.sql == "SELEKT 2;")
        #expect(
            parseError?.description == "SQLite error 1 SQLITE_ERROR: near \"SELEKT\": syntax error (in: SELEKT 2;)")
        let last = #expect(throws: SQLiteError.self) { try connection.execute("SELECT 1;\n  SELEKT 2  ") }
        #expect(last?.sql == "SELEKT 2")
    }

    @Test func singleStatementAPIsRefuseScriptsAndEmptySQL() throws {
        let connection = try SQLiteConnection.inMemory()
        try connection.execute("CREATE TABLE t(x)")
        let script = #expect(throws: SQLiteError.self) {
            try connection.run("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)")
        }
        #expect(script?.isMisuse == true)
        #expect(try connection.count("t") == 0)
        let empty = #expect(throws: SQLiteError.self) { try connection.run("  -- nothing ") }
        #expect(empty?.message == "no SQL statement to prepare")
        // A trailing semicolon or comment is not a second statement.
        try connection.run("INSERT INTO t VALUES (1); -- done")
        #expect(try connection.count("t") == 1)
    }

    @Test func readOnlyConnectionRefusesWrites() throws {
        let directory = try TemporaryDirectory.make()
        let writer = try SQLiteConnection.make(in: directory)
        try writer.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        let reader = try SQLiteConnection(path: directory.file(), configuration: SQLiteConfiguration(readOnly: true))
        #expect(try reader.count("t") == 1)
        let error = #expect(throws: SQLiteError.self) { try reader.run("INSERT INTO t VALUES (2)") }
        #expect(error?.isReadOnly == true)
        #expect(error?.message == "attempt to write a readonly database")
    }
}
