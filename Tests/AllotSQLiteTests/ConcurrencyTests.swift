import AllotSQLite
import Dispatch
import Foundation
import Testing

@Suite struct ConcurrencyTests {
    @Test func aQueueRunsItsWorkOnItsOwnDispatchQueue() async throws {
        let queue = try DatabaseQueue.inMemory()
        #expect(!queue.isCurrent)
        #expect(await queue.access { _ in queue.isCurrent })
        #expect(try await queue.write { _ in queue.isCurrent })
        let pool = try DatabasePool.temporary()
        #expect(await pool.writer.access { _ in pool.writer.isCurrent && !pool.reader.isCurrent && !queue.isCurrent })
        #expect(try await pool.read { _ in pool.reader.isCurrent && !pool.writer.isCurrent })
    }

    @Test func openingFromAsyncCodeWorksAndReportsFailures() async throws {
        let directory = try TemporaryDirectory.make()
        let pool = try await DatabasePool.open(path: directory.file())
        try await pool.write { try $0.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1);") }
        #expect(try await pool.read { try $0.count("t") } == 1)
        #expect(await pool.reader.access { $0.configuration.readOnly })
        #expect(try await pool.writer.access { try $0.queryValue("PRAGMA journal_mode")?.string } == "wal")

        let queue = try await DatabaseQueue.open(path: directory.file(), label: "allot.sqlite.test")
        #expect(try await queue.read { try $0.count("t") } == 1)
        do {
            _ = try await DatabaseQueue.open(path: directory.path + "/missing/db.sqlite")
            Issue.record("expected SQLITE_CANTOPEN")
        } catch {
            #expect(error.isCannotOpen)  // typed: `error` is a SQLiteError
        }
        await #expect(throws: SQLiteError.self) { try await DatabasePool.open(path: ":memory:") }
    }

    @Test func accessRethrowsTheBodysTypedError() async throws {
        let queue = try DatabaseQueue.inMemory()
        do {
            try await queue.access { (_: SQLiteConnection) throws(Boom) in throw Boom() }
            Issue.record("expected Boom")
        } catch {
            #expect(error == Boom())  // `error` is statically a Boom
        }
        let error = await #expect(throws: SQLiteError.self) { try await queue.access { try $0.execute("NOT SQL") } }
        #expect(error?.message == "near \"NOT\": syntax error")
    }

    @Test func manyTasksHammeringOneQueueAreSerialised() async throws {
        let directory = try TemporaryDirectory.make()
        let queue = try DatabaseQueue(path: directory.file(), configuration: SQLiteConfiguration(synchronous: .off))
        try await queue.write {
            try $0.execute("CREATE TABLE counter(n INTEGER NOT NULL); INSERT INTO counter VALUES (0);")
        }
        let tasks = 48
        let incrementsPerTask = 25
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    for increment in 0..<incrementsPerTask {
                        if increment % 5 == 0 {
                            // Read-modify-write inside one transaction: lost updates would show.
                            try await queue.write { connection in
                                let n = try connection.queryValue("SELECT n FROM counter")?.int64 ?? -1
                                try connection.run("UPDATE counter SET n = ?", n + 1)
                            }
                        } else {
                            try await queue.write { try $0.run("UPDATE counter SET n = n + 1") }
                        }
                        let seen = try await queue.read { try $0.queryValue("SELECT n FROM counter")?.int64 ?? -1 }
                        #expect(seen >= 1 && seen <= Int64(tasks * incrementsPerTask))
                    }
                    _ = task
                }
            }
            try await group.waitForAll()
        }
        #expect(
            try await queue.read { try $0.queryValue("SELECT n FROM counter")?.int64 }
                == Int64(tasks * incrementsPerTask))
        await queue.close()
        #expect(await !queue.isOpen)
        let closed = await #expect(throws: SQLiteError.self) { try await queue.read { try $0.count("counter") } }
        #expect(closed?.isMisuse == true)
    }

    @Test func aReaderSeesCommittedTransactionsWholeNeverPartOfOne() async throws {
        let pool = try DatabasePool.temporary()
        try await pool.write { try $0.execute("CREATE TABLE item(batch INTEGER NOT NULL, position INTEGER NOT NULL)") }
        let batches = 150
        let batchSize = 20

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for batch in 0..<batches {
                    try await pool.write { connection in
                        for position in 0..<batchSize {
                            try connection.run("INSERT INTO item VALUES (?, ?)", batch, position)
                        }
                    }
                }
            }
            group.addTask {
                var last: Int64 = 0
                while last < Int64(batches * batchSize) {
                    try Task.checkCancellation()
                    let (total, incompleteBatches) = try await pool.read { connection in
                        let total = try connection.queryValue("SELECT count(*) FROM item")?.int64 ?? -1
                        let incomplete =
                            try connection.queryValue(
                                "SELECT count(*) FROM (SELECT batch FROM item GROUP BY batch HAVING count(*) != ?)",
                                batchSize
                            )?.int64 ?? -1
                        return (total, incomplete)
                    }
                    #expect(total % Int64(batchSize) == 0)
                    #expect(incompleteBatches == 0)
                    #expect(total >= last)  // never goes back
                    last = total
                }
            }
            try await group.waitForAll()
        }
        #expect(try await pool.read { try $0.count("item") } == Int64(batches * batchSize))
    }

    @Test func theReaderIsReadOnlyAndDoesNotWaitForAnOpenWrite() async throws {
        let pool = try DatabasePool.temporary()
        try await pool.write { try $0.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1);") }
        let error = await #expect(throws: SQLiteError.self) {
            try await pool.reader.write { try $0.run("INSERT INTO t VALUES (2)") }
        }
        #expect(error?.isReadOnly == true)

        // A write transaction held open on the writer's queue does not block a read.
        let writerHolds = DispatchSemaphore(value: 0)
        let readerDone = DispatchSemaphore(value: 0)
        async let writing: Void = pool.write { connection in
            try connection.run("INSERT INTO t VALUES (3)")
            writerHolds.signal()
            // Keep the transaction open until the reader has read (bounded: never hangs the test).
            _ = readerDone.wait(timeout: .now() + 5)
        }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                writerHolds.wait()
                continuation.resume()
            }
        }
        let seen = try await pool.read { try $0.queryValues("SELECT x FROM t ORDER BY x").compactMap(\.int64) }
        readerDone.signal()
        try await writing
        #expect(seen == [1])
        #expect(try await pool.read { try $0.queryValues("SELECT x FROM t ORDER BY x").compactMap(\.int64) } == [1, 3])
    }

    @Test func temporaryPoolFilesAreRemovedWithThePool() async throws {
        var path = ""
        do {
            let pool = try DatabasePool.temporary()
            path = pool.path
            try await pool.write { try $0.execute("CREATE TABLE t(x)") }
            #expect(FileManagerProbe.exists(path))
            await pool.close()
        }
        #expect(!FileManagerProbe.exists(path))
        let error = #expect(throws: SQLiteError.self) { try DatabasePool(path: ":memory:") }
        #expect(error?.isMisuse == true)
    }
}

enum FileManagerProbe {
    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }
}
