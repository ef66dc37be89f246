import AllotSQLite
import Testing

@Suite struct StatementCacheTests {
    @Test func sameSQLReusesOnePreparedStatement() throws {
        let connection = try SQLiteConnection.inMemory()
        try connection.execute("CREATE TABLE t(x)")
        let first = try connection.cachedStatement("INSERT INTO t VALUES (?)")
        let second = try connection.cachedStatement("INSERT INTO t VALUES (?)")
        #expect(first === second)
        let before = connection.cachedStatementCount
        for value in 0..<100 {
            try connection.run("INSERT INTO t VALUES (?)", value)
        }
        #expect(connection.cachedStatementCount == before)
        #expect(try connection.count("t") == 100)
        // A statement made outside the cache is a separate one.
        #expect(try connection.makeStatement("INSERT INTO t VALUES (?)") !== first)
    }

    @Test func cacheIsBoundedAndEvictsLeastRecentlyUsed() throws {
        let connection = try SQLiteConnection(
            path: SQLiteConnection.memoryPath,
            configuration: SQLiteConfiguration(statementCacheCapacity: 3)
        )
        let one = try connection.cachedStatement("SELECT 1")
        let two = try connection.cachedStatement("SELECT 2")
        _ = try connection.cachedStatement("SELECT 3")
        #expect(try connection.cachedStatement("SELECT 1") === one)  // 1 is now the most recent
        _ = try connection.cachedStatement("SELECT 4")  // evicts 2
        #expect(connection.cachedStatementCount == 3)
        #expect(try connection.cachedStatement("SELECT 1") === one)
        #expect(try connection.cachedStatement("SELECT 2") !== two)
        // An evicted statement still held by its user keeps working.
        #expect(try two.step())
        #expect(two.row.int64(0) == 2)
    }

    @Test func zeroCapacityDisablesCaching() throws {
        let connection = try SQLiteConnection(
            path: SQLiteConnection.memoryPath,
            configuration: SQLiteConfiguration(statementCacheCapacity: 0)
        )
        #expect(try connection.cachedStatement("SELECT 1") !== connection.cachedStatement("SELECT 1"))
        #expect(connection.cachedStatementCount == 0)
        #expect(try connection.queryOne("SELECT 5") { $0.int(0) } == 5)
    }

    @Test func nestedUseOfTheSameSQLDoesNotDisturbTheOuterIteration() throws {
        let connection = try SQLiteConnection.inMemory()
        try connection.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3);")
        var pairs: [[Int]] = []
        try connection.query("SELECT x FROM t ORDER BY x") { outer in
            let x = outer.int(0)
            try connection.query("SELECT x FROM t ORDER BY x") { inner in
                pairs.append([x, inner.int(0)])
            }
        }
        #expect(pairs.count == 9)
        #expect(pairs.first == [1, 1])
        #expect(pairs.last == [3, 3])
    }

    @Test func statementsAreResetAfterUseSoNoReadSnapshotStaysOpen() throws {
        let directory = try TemporaryDirectory.make()
        let writer = try SQLiteConnection.make(in: directory)
        try writer.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);")
        let reader = try SQLiteConnection.make(in: directory)
        // queryOne stops after the first of two rows; the statement must not keep its snapshot.
        #expect(try reader.queryOne("SELECT x FROM t ORDER BY x") { $0.int(0) } == 1)
        #expect(!reader.isInTransaction)
        try writer.run("INSERT INTO t VALUES (0)")
        #expect(try reader.queryOne("SELECT x FROM t ORDER BY x") { $0.int(0) } == 0)
    }

    @Test func bulkInsertFastPath() throws {
        let connection = try SQLiteConnection.inMemory()
        try connection.execute("CREATE TABLE t(a INTEGER, b TEXT, c REAL, d BLOB)")
        try connection.transaction { connection in
            let insert = try connection.cachedStatement("INSERT INTO t VALUES (?, ?, ?, ?)")
            for index in 0..<1000 {
                insert.reset()
                try insert.bind(Int64(index), at: 1)
                try insert.bind("row \(index)", at: 2)
                try insert.bind(Double(index) / 2, at: 3)
                try insert.bind(blob: [UInt8(index % 256)], at: 4)
                #expect(try insert.step() == false)
            }
        }
        #expect(try connection.count("t") == 1000)
        #expect(
            try connection.queryOne("SELECT a, b, c, d FROM t WHERE a = 999") {
                [$0.value(0), $0.value(1), $0.value(2), $0.value(3)]
            }
                == [.integer(999), .text("row 999"), .real(499.5), .blob([231])])
    }
}
