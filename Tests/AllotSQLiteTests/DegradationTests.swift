import AllotSQLite
import CSQLite
import Foundation
import Testing

/// SPEC section 13: a database that is locked, full or gone yields errors, never a crash or a hang.
@Suite struct DegradationTests {
    @Test func aWriteLockHeldElsewhereGivesBusyAfterTheTimeout() throws {
        let directory = try TemporaryDirectory.make()
        let holder = try SQLiteConnection.make(in: directory)
        try holder.execute("CREATE TABLE t(x)")
        let waiter = try SQLiteConnection.make(
            in: directory, configuration: SQLiteConfiguration(synchronous: .normal, busyTimeoutMilliseconds: 20))
        try holder.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")

        let insert = #expect(throws: SQLiteError.self) { try waiter.run("INSERT INTO t VALUES (2)") }
        #expect(insert?.isBusy == true)
        #expect(insert?.isDatabaseUnavailable == true)
        #expect(insert?.message == "database is locked")
        let transaction = #expect(throws: SQLiteError.self) {
            try waiter.transaction { try $0.run("INSERT INTO t VALUES (3)") }
        }
        #expect(transaction?.isBusy == true)
        #expect(transaction?.sql == "BEGIN IMMEDIATE")
        // WAL: reading is not blocked by the writer, and sees only committed data.
        #expect(try waiter.count("t") == 0)
        #expect(try waiter.probe(write: false) == ())
        let probe = #expect(throws: SQLiteError.self) { try waiter.probe(write: true, lockTimeoutMilliseconds: 10) }
        #expect(probe?.isBusy == true)

        try holder.execute("COMMIT")
        try waiter.run("INSERT INTO t VALUES (4)")
        #expect(try waiter.queryAll("SELECT x FROM t ORDER BY x") { $0.int(0) } == [1, 4])
        try waiter.probe(write: true)
        #expect(try waiter.queryValue("PRAGMA busy_timeout")?.int64 == 20)  // restored after the probe
    }

    @Test func theActorReportsBusyToo() async throws {
        let directory = try TemporaryDirectory.make()
        let holder = try SQLiteConnection.make(in: directory)
        try holder.execute("CREATE TABLE t(x)")
        let queue = try DatabaseQueue(
            path: directory.file(), configuration: SQLiteConfiguration(busyTimeoutMilliseconds: 10))
        try holder.execute("BEGIN IMMEDIATE")
        do {
            try await queue.write { try $0.run("INSERT INTO t VALUES (1)") }
            Issue.record("expected SQLITE_BUSY")
        } catch let error as SQLiteError {
            #expect(error.isBusy)
            // Kept for `/readyz` until a write commits.
            #expect(queue.lastWriteFailure == error)
        }
        try holder.execute("ROLLBACK")
        // A statement's own mistake says nothing about the database: neither kept nor clearing the busy one.
        await #expect(throws: SQLiteError.self) {
            try await queue.write { try $0.run("INSERT INTO nowhere VALUES (1)") }
        }
        #expect(queue.lastWriteFailure?.isBusy == true)
        try await queue.write { try $0.run("INSERT INTO t VALUES (1)") }
        #expect(queue.lastWriteFailure == nil)
        #expect(try await queue.read { try $0.count("t") } == 1)
    }

    @Test func aFullDatabaseGivesFullAndTheConnectionStaysUsable() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        try connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, payload BLOB)")
        try connection.run("INSERT INTO t(payload) VALUES (?)", [UInt8](repeating: 1, count: 100))
        let pages = try #require(try connection.queryValue("PRAGMA page_count")?.int64)
        try connection.execute("PRAGMA max_page_count = \(pages + 4)")

        // One transaction of many rows: fails part-way with SQLITE_FULL and leaves nothing.
        let error = #expect(throws: SQLiteError.self) {
            try connection.transaction { connection in
                for _ in 0..<100 {
                    try connection.run("INSERT INTO t(payload) VALUES (?)", [UInt8](repeating: 2, count: 3000))
                }
            }
        }
        #expect(error?.isFull == true)
        #expect(error?.isDatabaseUnavailable == true)
        #expect(error?.message == "database or disk is full")
        #expect(!connection.isInTransaction)
        #expect(try connection.count("t") == 1)

        // Still usable: reads work, small writes that fit work, and more room lets big ones through.
        try connection.run("INSERT INTO t(payload) VALUES (?)", [UInt8](repeating: 3, count: 10))
        #expect(try connection.count("t") == 2)
        try connection.execute("PRAGMA max_page_count = 1000000")
        try connection.transaction { connection in
            for _ in 0..<100 {
                try connection.run("INSERT INTO t(payload) VALUES (?)", [UInt8](repeating: 2, count: 3000))
            }
        }
        #expect(try connection.count("t") == 102)
        #expect(try connection.integrityProblems().isEmpty)
    }

    @Test func aDeletedDatabaseFileGivesErrorsNotCrashes() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        try connection.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        for suffix in ["", "-wal", "-shm"] {
            try? FileManager.default.removeItem(atPath: directory.file() + suffix)
        }
        let probe = #expect(throws: SQLiteError.self) { try connection.probe() }
        #expect(probe?.isDatabaseMoved == true)
        #expect(probe?.isDatabaseUnavailable == true)
        // In WAL mode SQLite would "commit" into the unlinked files; the transaction refuses.
        let transaction = #expect(throws: SQLiteError.self) {
            try connection.transaction { try $0.run("INSERT INTO t VALUES (3)") }
        }
        #expect(transaction?.isDatabaseMoved == true)
        #expect(transaction?.isReadOnly == true)
        #expect(transaction?.isDatabaseUnavailable == true)
        #expect(
            transaction?.message
                == "the database file \(directory.file()) was deleted, moved or replaced while open; "
                + "the transaction was rolled back; put the file back if it was moved and restart the process to "
                + "open the file now at that path (without it a restart refuses to start while the write-ahead log "
                + "is there)"
        )
        #expect(!connection.isInTransaction)
        #expect(try connection.count("t") == 1)
        connection.close()
    }

    @Test func aReplacedDatabaseFileIsDetected() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        try connection.execute("CREATE TABLE t(x)")
        try FileManager.default.moveItem(atPath: directory.file(), toPath: directory.file("moved.sqlite"))
        _ = try SQLiteConnection.make(in: directory)  // a new, empty database where the old one was
        let error = #expect(throws: SQLiteError.self) { try connection.probe() }
        #expect(error?.isDatabaseMoved == true)
    }

    /// A database replaced while open (an older copy moved over it): the write-ahead log at its path holds the open
    /// file's pages, so it is moved aside when the move is seen, and the next open reads the file now there intact
    /// (outside evaluation round 40: the next start replayed the old file's log over the copy, SQLITE_CORRUPT).
    @Test func theLogOfAReplacedDatabaseIsMovedAsideNotReplayedOverTheFileNowThere() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        try connection.execute("PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x);")
        try connection.transaction { connection in
            for value in 0..<3_000 { try connection.run("INSERT INTO t VALUES (?)", "row \(value) of the live file") }
        }
        // The copy: another database (its own table, its own pages), moved over the live file.
        let copy = try SQLiteConnection.make(in: directory, name: "copy.sqlite")
        try copy.execute("CREATE TABLE copied(y); INSERT INTO copied VALUES (1), (2);")
        copy.close()
        #expect(rename(directory.file("copy.sqlite"), directory.file()) == 0)

        let refused = #expect(throws: SQLiteError.self) {
            try connection.transaction { try $0.run("INSERT INTO t VALUES (3)") }
        }
        #expect(refused?.isDatabaseMoved == true)
        let asides = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasPrefix("test.sqlite-wal.of-replaced-")
        }
        #expect(asides.count == 1)
        #expect(refused?.message.contains("its write-ahead log, which belongs to the file this process had open, was "
            + "moved to \(directory.path)/\(asides.first ?? "")") == true, "\(refused?.message ?? "")")
        #expect(!FileManager.default.fileExists(atPath: directory.file() + "-wal"))
        // No longer "a restart refuses to start while the write-ahead log is there": it is not there now.
        #expect(refused?.message.hasSuffix("; restart the process to open the file now at that path") == true)
        let again = #expect(throws: SQLiteError.self) { try connection.probe() }
        #expect(again?.message.hasSuffix("; restart the process to open the file now at that path") == true)
        connection.close()

        let reopened = try SQLiteConnection.make(in: directory)
        #expect(try reopened.integrityProblems(quick: false).isEmpty)
        #expect(try reopened.count("copied") == 2)
        #expect(try !reopened.tableExists("t"))
        reopened.close()
    }

    /// A restore that brought its own log beside the file it moved over the live one keeps that log: only the log
    /// this connection committed to is moved aside (review of round 40's fix).
    @Test func aLogThatCameWithTheReplacingFileIsKept() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        try connection.execute("CREATE TABLE t(x)")
        try connection.transaction { try $0.run("INSERT INTO t VALUES (1)") }
        // The restored pair: a file and a log of its own, moved over the live ones.
        try Data("not the live log".utf8).write(to: URL(fileURLWithPath: directory.file("restored-wal")))
        let copy = try SQLiteConnection.make(in: directory, name: "restored.sqlite")
        try copy.execute("CREATE TABLE copied(y)")
        copy.close()
        #expect(rename(directory.file("restored.sqlite"), directory.file()) == 0)
        #expect(rename(directory.file("restored-wal"), directory.file() + "-wal") == 0)
        let refused = #expect(throws: SQLiteError.self) {
            try connection.transaction { try $0.run("INSERT INTO t VALUES (2)") }
        }
        #expect(refused?.isDatabaseMoved == true)
        #expect(refused?.message.contains("moved to") == false)
        #expect(
            try String(contentsOfFile: directory.file() + "-wal", encoding: .utf8) == "not the live log")
        connection.close()
        // Closing the connection of the replaced file leaves it too.
        #expect(
            try String(contentsOfFile: directory.file() + "-wal", encoding: .utf8) == "not the live log")
    }

    @Test func aFileThatIsNotADatabaseIsRefusedAtOpen() throws {
        let directory = try TemporaryDirectory.make()
        let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        try garbage.write(to: URL(fileURLWithPath: directory.file()))
        let error = #expect(throws: SQLiteError.self) { try SQLiteConnection(path: directory.file()) }
        #expect(error?.code == SQLITE_NOTADB)
        #expect(error?.isCorrupt == true)
        #expect(error?.message == "cannot open \(directory.file()): file is not a database")
    }

    @Test func unopenablePathsAreRefused() throws {
        let directory = try TemporaryDirectory.make()
        let missingDirectory = #expect(throws: SQLiteError.self) {
            try SQLiteConnection(path: directory.path + "/no/such/dir/db.sqlite")
        }
        #expect(missingDirectory?.isCannotOpen == true)
        #expect(
            missingDirectory?.message
                == "cannot open \(directory.path)/no/such/dir/db.sqlite: unable to open database file")
        let isDirectory = #expect(throws: SQLiteError.self) { try SQLiteConnection(path: directory.path) }
        #expect(isDirectory?.isCannotOpen == true)
        let readOnlyMissing = #expect(throws: SQLiteError.self) {
            try SQLiteConnection(
                path: directory.file("absent.sqlite"), configuration: SQLiteConfiguration(readOnly: true))
        }
        #expect(readOnlyMissing?.isCannotOpen == true)
        let noCreate = #expect(throws: SQLiteError.self) {
            try SQLiteConnection(
                path: directory.file("absent.sqlite"), configuration: SQLiteConfiguration(create: false))
        }
        #expect(noCreate?.isCannotOpen == true)
        #expect(!FileManager.default.fileExists(atPath: directory.file("absent.sqlite")))
    }

    @Test func aCorruptedDatabaseIsReported() throws {
        let directory = try TemporaryDirectory.make()
        do {
            let connection = try SQLiteConnection.make(in: directory)
            try connection.execute("CREATE TABLE t(x TEXT); CREATE INDEX t_x ON t(x);")
            try connection.transaction { connection in
                for index in 0..<2000 { try connection.run("INSERT INTO t VALUES (?)", "row \(index)") }
            }
            _ = try connection.checkpoint(.truncate)
            connection.close()
        }
        // Overwrite everything after the first two pages (the header and the schema survive).
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: directory.file()))
        try handle.seek(toOffset: 8192)
        try handle.write(contentsOf: Data(repeating: 0x5A, count: 16384))
        try handle.close()

        let connection = try SQLiteConnection.make(in: directory)
        var failures: [SQLiteError] = []
        do {
            let problems = try connection.integrityProblems()
            #expect(!problems.isEmpty)
        } catch {
            failures.append(error)  // typed: integrityProblems throws only SQLiteError
        }
        do {
            _ = try connection.queryAll("SELECT x FROM t") { $0.string(0) }
        } catch let error as SQLiteError {
            failures.append(error)
        }
        #expect(!failures.isEmpty)
        #expect(failures.allSatisfy { $0.isCorrupt })
    }
}
