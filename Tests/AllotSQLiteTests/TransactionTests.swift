import AllotSQLite
import CSQLite
import Testing

@Suite struct TransactionTests {
    private func makeConnection(_ directory: TemporaryDirectory) throws -> SQLiteConnection {
        let connection = try SQLiteConnection.make(in: directory)
        try connection.execute("CREATE TABLE t(x INTEGER NOT NULL)")
        return connection
    }

    @Test func commitsWhenTheBodyReturns() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try makeConnection(directory)
        let value = try connection.transaction { connection in
            try connection.run("INSERT INTO t VALUES (1)")
            try connection.run("INSERT INTO t VALUES (2)")
            #expect(connection.isInTransaction)
            return "done"
        }
        #expect(value == "done")
        #expect(!connection.isInTransaction)
        let other = try SQLiteConnection.make(in: directory)
        #expect(try other.count("t") == 2)
    }

    @Test(arguments: [TransactionKind.deferred, .immediate, .exclusive])
    func rollsBackWhenTheBodyThrows(_ kind: TransactionKind) throws {
        let directory = try TemporaryDirectory.make()
        let connection = try makeConnection(directory)
        #expect(throws: Boom()) {
            try connection.transaction(kind) { connection in
                try connection.run("INSERT INTO t VALUES (1)")
                try connection.run("INSERT INTO t VALUES (2)")
                throw Boom()
            }
        }
        #expect(!connection.isInTransaction)
        #expect(try connection.count("t") == 0)
        // The connection is usable afterwards.
        try connection.transaction { try $0.run("INSERT INTO t VALUES (3)") }
        #expect(try connection.count("t") == 1)
    }

    @Test func rollsBackWhenAStatementFails() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try makeConnection(directory)
        let error = #expect(throws: SQLiteError.self) {
            try connection.transaction { connection in
                try connection.run("INSERT INTO t VALUES (1)")
                try connection.run("INSERT INTO t VALUES (NULL)")
            }
        }
        #expect(error?.isConstraint == true)
        #expect(try connection.count("t") == 0)
    }

    @Test func nestedTransactionsAreSavepoints() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try makeConnection(directory)
        try connection.transaction { connection in
            try connection.run("INSERT INTO t VALUES (1)")
            // A failing nested transaction undoes only its own work…
            #expect(throws: Boom()) {
                try connection.transaction { connection in
                    try connection.run("INSERT INTO t VALUES (2)")
                    throw Boom()
                }
            }
            #expect(try connection.count("t") == 1)
            // …a succeeding one is kept, three levels deep.
            try connection.transaction { connection in
                try connection.run("INSERT INTO t VALUES (3)")
                try connection.transaction { try $0.run("INSERT INTO t VALUES (4)") }
            }
            #expect(connection.isInTransaction)
        }
        #expect(try connection.queryAll("SELECT x FROM t ORDER BY x") { $0.int(0) } == [1, 3, 4])
    }

    @Test func nestedWorkIsUndoneWithTheOuterTransaction() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try makeConnection(directory)
        #expect(throws: Boom()) {
            try connection.transaction { connection in
                try connection.transaction { try $0.run("INSERT INTO t VALUES (1)") }
                throw Boom()
            }
        }
        #expect(try connection.count("t") == 0)
    }

    @Test func aTransactionRolledBackBySQLiteIsNotReportedAsCommitted() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try makeConnection(directory)
        // The body swallows an error after which the transaction no longer exists: here a
        // ROLLBACK it ran itself, which has the same effect as SQLite's automatic rollback after
        // SQLITE_FULL or SQLITE_IOERR.
        let error = #expect(throws: SQLiteError.self) {
            try connection.transaction { connection in
                try connection.run("INSERT INTO t VALUES (1)")
                try connection.run("ROLLBACK")
                try connection.run("INSERT INTO t VALUES (2)")  // autocommit: saved on its own
            }
        }
        #expect(error?.isAbort == true)
        #expect(
            error?.message == "the transaction was rolled back by SQLite after an earlier error; nothing was committed")
        #expect(try connection.queryAll("SELECT x FROM t") { $0.int(0) } == [2])
        try connection.transaction { try $0.run("INSERT INTO t VALUES (3)") }
        #expect(try connection.count("t") == 2)
    }

    @Test func beginFailsClearlyInsideARawTransaction() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try makeConnection(directory)
        try connection.execute("BEGIN")
        let error = #expect(throws: SQLiteError.self) { try connection.transaction { _ in } }
        #expect(error?.message == "cannot start a transaction within a transaction")
        try connection.execute("ROLLBACK")
    }

    @Test func returnsTheBodysValueAndPropagatesItsErrorType() throws {
        let connection = try SQLiteConnection.inMemory()
        try connection.execute("CREATE TABLE t(x)")
        let rowID = try connection.transaction { connection in
            try connection.run("INSERT INTO t VALUES (9)")
            return connection.lastInsertRowID
        }
        #expect(rowID == 1)
        do {
            try connection.transaction { _ in throw Boom() }
            Issue.record("expected Boom")
        } catch {
            #expect(error is Boom)
        }
    }
}

extension TransactionTests {
    @Test func aNestedTransactionThatCannotBeUndoneStopsTheOuterCommit() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try makeConnection(directory)
        // Releasing the savepoint behind the nested transaction's back makes its ROLLBACK TO
        // fail ("no such savepoint"), so its work cannot be undone alone: the outer transaction
        // must not commit it. (Relies on the savepoint naming of SQLiteConnection+Transaction.)
        let error = #expect(throws: SQLiteError.self) {
            try connection.transaction { connection in
                try connection.run("INSERT INTO t VALUES (1)")
                #expect(throws: Boom()) {
                    try connection.transaction { connection in
                        try connection.run("INSERT INTO t VALUES (2)")
                        try connection.execute("RELEASE allot_savepoint_1")
                        throw Boom()
                    }
                }
            }
        }
        #expect(error?.isAbort == true)
        #expect(
            error?.message == "a nested transaction could not be rolled back, so the whole transaction was rolled back")
        #expect(try connection.count("t") == 0)
        #expect(!connection.isInTransaction)
        try connection.transaction { try $0.run("INSERT INTO t VALUES (3)") }
        #expect(try connection.count("t") == 1)
    }
}
