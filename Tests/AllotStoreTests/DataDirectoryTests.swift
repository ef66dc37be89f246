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

        // An empty log holds nothing: a fresh start is what it looks like.
        try Data().write(to: URL(fileURLWithPath: directory.databasePath + "-wal"))
        let (fresh, applied) = try await directory.openDatabase()
        #expect(!applied.isEmpty)
        await fresh.close()
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
        #expect(failure(file + "/data") == "cannot create data directory \(file)/data: Not a directory")
        #expect(failure(file) == "data directory \(file) exists but is not a directory")
        // Parents are made too, each 0700.
        let nested = DataDirectory(path: directory.path + "/a/b")
        try nested.create()
        for made in [directory.path + "/a", nested.path] {
            let mode = (try FileManager.default.attributesOfItem(atPath: made)[.posixPermissions] as? NSNumber)?.intValue
            #expect(mode == 0o700)
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
        let applied = try Migrator(files: files).migrate(connection)
        #expect(applied.map(\.version) == [8])
        let served = try connection.queryOne(
            "SELECT served_prompt_tokens, served_completion_tokens FROM rollups_minute"
        ) { [$0.int64(0), $0.int64(1)] }
        #expect(served == [700, 90])
    }
}
