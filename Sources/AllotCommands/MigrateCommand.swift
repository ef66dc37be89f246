import AllotArguments
import AllotSQLite
import AllotStore
import Foundation

/// `allot migrate [--data DIR] [--status]`.
enum MigrateCommand {
    static func run(_ command: ParsedCommand, output: CommandOutput) async throws -> Int32 {
        let directory = DataDirectory(path: command.string("data") ?? "./allot-data")
        if command.flag("status") {
            return try await status(directory, output: output)
        }
        // Not under a running service: it holds the directory's lock (review of 2026-11-30: a migration applied
        // beside a running `allot serve` changed the schema under it). `--status` only reads and stays allowed.
        let lock = try DataDirectoryLock.acquire(directory)
        defer { lock.release() }
        let (pool, applied) = try await directory.openDatabase()
        await pool.close()
        if applied.isEmpty {
            output.out("\(directory.databasePath): up to date")
        } else {
            for migration in applied { output.out("applied \(migration.fileName)") }
            output.out("\(directory.databasePath): \(applied.count) migration(s) applied")
        }
        return 0
    }

    /// `--status`: lists what the database has applied and what is pending, as `NNNN_name`, and exits 3 when
    /// something is pending, 0 when nothing is. A database
    /// that does not exist is not created (nor its directory): every migration is listed as pending. The
    /// database is opened read-only, so a copy in a directory one may not write can be inspected (opened for
    /// writing, it failed on `PRAGMA journal_mode = WAL`).
    private static func status(_ directory: DataDirectory, output: CommandOutput) async throws -> Int32 {
        let migrator = try DataDirectory.migrator()
        // A database lost beside its log is not "no database yet": `migrate`, `tokens` and `serve` refuse it.
        try directory.checkNotOrphaned()
        guard try directory.exists(), FileManager.default.fileExists(atPath: directory.databasePath) else {
            output.out("\(directory.databasePath): no database yet (not created)")
            for migration in migrator.migrations { output.out("pending  \(migration.identifier)") }
            return pendingExitCode
        }
        let database = try await DatabaseQueue.open(
            path: directory.databasePath, configuration: SQLiteConfiguration(readOnly: true))
        defer { Task { await database.close() } }
        let listed: ([AppliedMigration], [Migration])
        do {
            listed = try await database.access {
                (connection) throws(MigrationError) -> ([AppliedMigration], [Migration]) in
                (try migrator.appliedMigrations(connection), try migrator.pendingMigrations(connection))
            }
        } catch {
            let shm = directory.databasePath + "-shm"
            guard access(directory.path, W_OK) != 0, !FileManager.default.fileExists(atPath: shm) else { throw error }
            // SQLite reads a WAL database through its `-shm` index, which it must create next to the file.
            output.err(
                "allot migrate: cannot read \(directory.databasePath): \(error); SQLite reads a WAL database "
                    + "through a -shm file it creates beside it, and \(directory.path) is not writable: copy the "
                    + "database somewhere writable to inspect it")
            return 1
        }
        let (applied, pending) = listed
        for migration in applied { output.out("applied  \(migration.identifier)") }
        for migration in pending { output.out("pending  \(migration.identifier)") }
        return pending.isEmpty ? 0 : pendingExitCode
    }

    /// `--status`'s exit code when migrations are pending (a database not created yet included), so a deploy script
    /// can tell "up to date" (0) from "needs `allot migrate`" without parsing the list; 1 stays an error and 2 a
    /// usage error (outside evaluation round 39, L2: it exited 0 either way).
    static let pendingExitCode: Int32 = 3
}
